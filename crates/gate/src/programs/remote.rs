//! tools stage (gate), PURE: network tools whose options run local programs: ssh/scp/sftp, rsync,
//! nc, tcpdump.

use crate::programs::argv::{denied, long_abbrev, options, short_has};
use crate::shell::lex::Word;

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
        // A daemon runs its config's `pre-xfer exec`/`post-xfer exec` programs.
        if long_abbrev(v, &["daemon", "config", "dparam"]).is_some() {
            return hit("`--daemon`/`--config` runs a server whose config can run programs");
        }
    }
    None
}

/// ssh configuration keywords that run local programs, load code or read more
/// configuration.
const SSH_RUNS: &[&str] = &[
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "proxyusefdpass",
    "proxyjump",
    "pkcs11provider",
    "securitykeyprovider",
    "include",
    "match",
    // The path of the xauth program ssh runs for X11 forwarding.
    "xauthlocation",
];

/// ssh, scp and sftp (`copy`): options that run local programs. Short options are read as
/// getopt does (clusters, a value attached or in the next word, options after operands);
/// an `-o` value is read as ssh reads a config line, ignoring case, quotes, backslashes and
/// whitespace anywhere (`-o ' ProxyCommand=…'`, `-o '"ProxyCommand" …'`).
pub(crate) fn ssh_check(base: &str, args: &[Word], copy: bool) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    let valued = if copy {
        "cDFiJloPSXsbBR"
    } else {
        "bceilmopBDEFIJLOPQRSwW"
    };
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        if v == "--" {
            break;
        }
        let Some(cluster) = v.strip_prefix('-').filter(|c| !c.is_empty()) else {
            continue;
        };
        for (at, c) in cluster.char_indices() {
            if !valued.contains(c) {
                continue;
            }
            let attached = &cluster[at + c.len_utf8()..];
            let value = if attached.is_empty() {
                k += 1;
                args.get(k - 1).map_or("", |w| w.value.as_str())
            } else {
                attached
            };
            let runs = match c {
                'o' => {
                    let line: String = value
                        .chars()
                        .filter(|x| !x.is_whitespace() && !matches!(x, '"' | '\'' | '\\'))
                        .collect::<String>()
                        .to_ascii_lowercase();
                    SSH_RUNS.iter().any(|o| line.contains(o))
                }
                // `-J` is ProxyJump (a proxy command line ssh builds and runs); ssh's `-E`
                // appends its log to any file.
                'F' | 'I' | 'J' => true,
                'E' => !copy,
                'S' | 'D' | 'b' => copy,
                _ => false,
            };
            if runs {
                return hit(&format!(
                    "`-{c} {value}`: options that run local programs, load code or read a config file are denied"
                ));
            }
            break;
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

/// ssh-keygen `-D`/`-w` and ssh-add `-s`/`-S`/`-e` load a PKCS#11 or FIDO library.
pub(crate) fn ssh_keys_check(base: &str, args: &[Word]) -> Option<String> {
    let (flags, valued) = if base == "ssh-add" {
        ("sSe", "EhHt")
    } else {
        ("Dw", "bCEFGIJMNOPRVYZafgjmnrstz")
    };
    let loads = options(args).any(|v| short_has(v, flags, valued));
    denied(base, "options that load a PKCS#11 or FIDO library").filter(|_| loads)
}
