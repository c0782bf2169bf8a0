//! Tools adapter: the root crate's side of the sandbox crate (`harness_sandbox`, re-exported
//! here as `tools::sandbox`). In: `[tools.bash]` (`BashConfig`). Out: the crate's
//! [`Settings`], the one place the config becomes what the sandbox reads. Pure.

pub use harness_sandbox::*;

use crate::config::BashConfig;

impl From<&BashConfig> for Settings {
    fn from(bash: &BashConfig) -> Settings {
        Settings {
            policy: bash.policy.clone(),
            network: bash.network,
            egress: bash.egress.is_some(),
            write_roots: bash.write_roots.clone(),
            read_roots: bash.read_roots.clone(),
            unix_sockets: bash.unix_sockets.clone(),
            exec_roots: bash.exec_roots.clone(),
            never_read: bash.never_read.clone(),
            inputs: bash.inputs.clone(),
            attachments: bash.attachments.clone(),
        }
    }
}
