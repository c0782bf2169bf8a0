//! Config stage, PURE: `[tools.bash].network` and `[tools.bash.egress]` in, the network
//! switch and the [`EgressConfig`] of `network = "allowlist"` out, every problem by key.

use super::raw::{RawEgress, RawNetwork};
use super::validate::Validator;
use super::EgressConfig;
use crate::tools::egress::policy::{self, Pattern};

/// `[tools.bash.egress].max_bytes` by default: 512 MiB.
pub(super) const DEFAULT_MAX_BYTES: i64 = 512 * 1024 * 1024;

impl Validator {
    /// `(network, egress)`: `true`/`false` as before; `"allowlist"` is `network = false`
    /// (every confinement of no network stays) with the proxy's list beside it.
    pub(super) fn network(
        &mut self,
        network: Option<RawNetwork>,
        egress: Option<RawEgress>,
    ) -> (bool, Option<EgressConfig>) {
        let allowlist = match network {
            None | Some(RawNetwork::Switch(false)) => false,
            Some(RawNetwork::Switch(true)) => {
                if egress.is_some() {
                    self.problem(
                        "[tools.bash.egress]",
                        "only applies with network = \"allowlist\" (network = true is unconfined)",
                    );
                }
                return (true, None);
            }
            Some(RawNetwork::Word(w)) if w == "allowlist" => true,
            Some(RawNetwork::Word(w)) => {
                // The schema lets only "allowlist" through; kept for a raw-layer caller.
                self.problem(
                    "[tools.bash].network",
                    format!("must be true, false or \"allowlist\", not {w:?}"),
                );
                return (false, None);
            }
        };
        if !allowlist {
            if egress.is_some() {
                self.problem(
                    "[tools.bash.egress]",
                    "only applies with network = \"allowlist\"",
                );
            }
            return (false, None);
        }
        (false, Some(self.egress(egress.unwrap_or_default())))
    }

    /// `[tools.bash.egress]` under `network = "allowlist"`, every problem by key.
    fn egress(&mut self, raw: RawEgress) -> EgressConfig {
        let presets = raw.presets.unwrap_or_default();
        let allow = self.allow_list(raw.allow.unwrap_or_default(), &presets);
        let max_bytes = self.int_in(
            "[tools.bash.egress].max_bytes",
            raw.max_bytes,
            DEFAULT_MAX_BYTES,
            1024,
            i64::MAX,
        ) as u64;
        let hosts = self.optional_path("[tools.bash.egress].hosts", raw.hosts);
        let ca_file = self.optional_path("[tools.bash.egress].ca_file", raw.ca_file);
        let upstream = raw.upstream.and_then(|u| match policy::upstream(&u) {
            Ok(hp) => Some(hp),
            Err(e) => {
                self.problem("[tools.bash.egress].upstream", e);
                None
            }
        });
        EgressConfig {
            allow,
            presets,
            deny_private: raw.deny_private.unwrap_or(true),
            max_bytes,
            hosts,
            ca_file,
            upstream,
        }
    }

    /// The patterns of `allow` and then the hosts of `presets`, each once, in that order.
    fn allow_list(&mut self, allow_raw: Vec<String>, presets: &[String]) -> Vec<Pattern> {
        let mut allow: Vec<Pattern> = Vec::new();
        fn add(p: Pattern, allow: &mut Vec<Pattern>) {
            if !allow.contains(&p) {
                allow.push(p);
            }
        }
        for (i, entry) in allow_raw.into_iter().enumerate() {
            match policy::parse_pattern(&entry) {
                Ok(p) => add(p, &mut allow),
                Err(e) => self.problem(&format!("[tools.bash.egress].allow[{i}]"), e),
            }
        }
        for (i, name) in presets.iter().enumerate() {
            match policy::preset(name) {
                Some(hosts) => {
                    for h in hosts {
                        add(Pattern::Exact((*h).to_string()), &mut allow);
                    }
                }
                None => {
                    let known: Vec<&str> = policy::PRESETS.iter().map(|(n, _)| *n).collect();
                    self.problem(
                        &format!("[tools.bash.egress].presets[{i}]"),
                        format!(
                            "unknown preset {name:?}; the presets are {}",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
        allow
    }

    /// A path key: resolved against the config's directory; empty is a problem.
    fn optional_path(&mut self, key: &str, raw: Option<String>) -> Option<std::path::PathBuf> {
        match raw {
            Some(p) if p.trim().is_empty() => {
                self.problem(key, "must not be empty");
                None
            }
            Some(p) => Some(self.path(Some(p), ".")),
            None => None,
        }
    }
}

impl EgressConfig {
    /// The effective list, as `harness check` and the PLAN print it.
    pub fn describe(&self) -> String {
        if self.allow.is_empty() {
            return "no host (the allow list is empty)".to_string();
        }
        let names: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
        names.join(", ")
    }
}
