//! tools stage (gate), PURE: network tools whose options run local programs: ssh/scp/sftp, rsync,
//! nc, tcpdump.

use crate::tools::gate::programs::argv::{denied, long_abbrev, options, short_has};
use crate::tools::gate::shell::lex::Word;

/// nc `-e`/`-c`/`--exec` runs a program on the connection.
pub(crate) fn nc_check(base: &str, args: &[Word]) -> Option<String> {
    let found = options(args).any(|v| {
        long_abbrev(v, &["exec", "sh-exec", "lua-exec"]).is_some()
            || short_has(v, "ec", "pswiqIOTVXbgGmPx")
    });
    denied(base, "`-e`/`-c`/`--exec` runs a program on the connection").filter(|_| found)
}

/// rsync `-e`/`--rsh`/`--rsync-path` runs a program.
pub(crate) fn rsync_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if short_has(v, "e", "BfMT") || long_abbrev(v, &["rsh", "rsync-path"]).is_some() {
            return hit("`-e`/`--rsh`/`--rsync-path` runs a program");
        }
    }
    None
}

/// `copy` for scp and sftp, where `-S` names the program to run.
pub(crate) fn ssh_check(base: &str, args: &[Word], copy: bool) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    let all: Vec<&str> = options(args).collect();
    for (k, v) in all.iter().enumerate() {
        let lc = v.to_ascii_lowercase();
        let next = all
            .get(k + 1)
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        let opt = if lc == "-o" {
            next.as_str()
        } else {
            lc.strip_prefix("-o").unwrap_or("")
        };
        if [
            "proxycommand",
            "localcommand",
            "permitlocalcommand",
            "knownhostscommand",
            "proxyusefdpass",
        ]
        .iter()
        .any(|o| opt.starts_with(o))
            || *v == "-F"
            || (copy && *v == "-S")
        {
            return hit("options that run local programs are denied");
        }
    }
    None
}

/// tcpdump `-z` runs a program, `-w` writes a file.
pub(crate) fn tcpdump_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if short_has(v, "zw", "") {
            return hit("`-z`/`-w` runs a program or writes a file");
        }
    }
    None
}
