//! Config stage, the file read (filesystem adapter): which file (`--config`, else
//! `$HARNESS_CONFIG`, else `./harness.toml`) and its text, handed to the PURE [`super::parse`].

use std::path::PathBuf;

use anyhow::Context;

use super::Config;

/// `--config`, else `$HARNESS_CONFIG`, else `./harness.toml`.
fn config_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HARNESS_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("harness.toml"))
}

/// Reads and validates the config file; the error names the file and how to choose another.
pub fn load(flag: Option<PathBuf>) -> anyhow::Result<Config> {
    let path = config_path(flag);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read config {} (use --config PATH or HARNESS_CONFIG; harness.toml.example documents every key)",
            path.display()
        )
    })?;
    Ok(super::parse(&text, &path)?)
}
