//! CLI arguments of the `scripted-llm` binary. PURE.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

pub(crate) const USAGE: &str = "usage: scripted-llm --script FILE [--host 127.0.0.1] [--port 0] \
                     [--log FILE.jsonl] [--models glm-5.3,glm-5.2,...]";
pub(crate) const DEFAULT_MODELS: &str = "glm-5.3,glm-5.2,glm-4.7-flash,glm-5-turbo";

#[derive(Debug, PartialEq)]
pub(crate) struct Args {
    pub(crate) script: PathBuf,
    pub(crate) host: IpAddr,
    pub(crate) port: u16,
    pub(crate) log: Option<PathBuf>,
    pub(crate) models: Vec<String>,
}

pub(crate) fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut script = None;
    let mut host = "127.0.0.1".to_string();
    let mut port = "0".to_string();
    let mut log = None;
    let mut models = DEFAULT_MODELS.to_string();
    while let Some(arg) = argv.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        let value = match inline.or_else(|| argv.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value\n{USAGE}")),
        };
        match flag.as_str() {
            "--script" => script = Some(PathBuf::from(value)),
            "--host" => host = value,
            "--port" => port = value,
            "--log" => log = Some(PathBuf::from(value)),
            "--models" => models = value,
            _ => return Err(format!("unknown argument {arg:?}\n{USAGE}")),
        }
    }
    let script = script.ok_or_else(|| format!("--script is required\n{USAGE}"))?;
    let host: IpAddr = if host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .map_err(|_| format!("--host {host:?} is not an IP address"))?
    };
    // A scripted server answers anyone with anything: never expose it beyond this machine.
    if !host.is_loopback() {
        return Err(format!(
            "--host {host} is not a loopback address; refusing to bind"
        ));
    }
    let port = port
        .parse()
        .map_err(|_| format!("--port {port:?} is not a port number"))?;
    let models = models
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(String::from)
        .collect();
    Ok(Args {
        script,
        host,
        port,
        log,
        models,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn flags_values_and_loopback_only() {
        let args = parse_args(
            ["--script", "s.json", "--port=9", "--models", "a, b"]
                .map(String::from)
                .into_iter(),
        )
        .unwrap();
        assert_eq!(args.port, 9);
        assert_eq!(args.models, vec!["a".to_string(), "b".to_string()]);
        assert!(parse_args(
            ["--script", "s", "--host", "0.0.0.0"]
                .map(String::from)
                .into_iter()
        )
        .unwrap_err()
        .contains("not a loopback"));
        assert!(parse_args(
            ["--script", "s", "--host", "::1"]
                .map(String::from)
                .into_iter()
        )
        .is_ok());
    }
}
