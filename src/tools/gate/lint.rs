//! tools stage (gate), PURE: lint of allow rules: escape hatches a policy author should know about.

use crate::tools::gate::paths::basename;
use crate::tools::gate::programs::registry::{family, Check, Kind, FAMILIES};
use crate::tools::gate::rule::{Policy, RuleKind};

/// Escape-hatch warnings for allow rules (interpreters, shells, find, xargs, env, timeout, awk, sed, bare git, cargo*/npm* raw prefixes, `*`...)
pub fn lint(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for rule in &policy.allow {
        let t = &rule.text;
        match &rule.kind {
            RuleKind::Universal => out.push(format!(
                "allow rule `{t}` allows every command; only deny rules and the always-denied constructs still apply"
            )),
            RuleKind::Raw(p) => {
                let head = p.split_whitespace().next().unwrap_or("");
                let project = FAMILIES
                    .iter()
                    .filter(|f| f.project)
                    .flat_map(|f| f.names)
                    .any(|m| head.starts_with(m));
                if project || p.is_empty() {
                    out.push(format!(
                        "allow rule `{t}` is a raw prefix with no word boundary: it also allows `{p}run`, `{p} install`, `{p} run …` and `{p}-anything`, which run arbitrary code"
                    ));
                } else {
                    out.push(format!(
                        "allow rule `{t}` is a raw prefix with no word boundary: it also allows `{p}-anything`; prefer `{} *`",
                        p.trim_end()
                    ));
                }
            }
            RuleKind::Exact(ws) | RuleKind::Words(ws) => {
                let first = ws.first().map(String::as_str).unwrap_or("");
                let fam = family(&basename(first).to_ascii_lowercase());
                let (kind, check) = fam.map_or((Kind::Plain, Check::None), |f| (f.kind, f.check));
                let msg = if kind == Kind::Shell {
                    Some("is a shell: it runs any script it is given (the gate still checks `-c` strings)")
                } else if kind == Kind::Interpreter && check != Check::Awk {
                    Some("is an interpreter: its code can run any program, which no rule can see")
                } else if matches!(check, Check::Awk | Check::Sed) {
                    Some("can run commands or write files from its script (the gate denies the forms it knows: system, |, >, e, w, -i)")
                } else if check == Check::Find {
                    Some("can run commands (-exec) and delete files; the gate judges -exec commands against the rules and denies -delete/-fprint")
                } else if kind == Kind::Wrapper {
                    Some("runs other commands; the gate judges the command it runs against the rules too")
                } else if check == Check::Git && ws.len() == 1 {
                    Some("allows every git subcommand (push, config, hooks run by commit...); list subcommands instead, e.g. `git status`, `git diff *`")
                } else if kind == Kind::Runner {
                    Some("runs other commands in a way the gate cannot follow")
                } else if fam.is_some_and(|f| f.project) && ws.len() == 1 {
                    Some("allows `run`/`install`/scripts, which execute arbitrary code")
                } else {
                    None
                };
                if let Some(m) = msg {
                    out.push(format!("allow rule `{t}`: `{first}` {m}"));
                }
            }
            RuleKind::Path(p) => {
                if p == "." || p == "./" || p == "/" {
                    out.push(format!("allow rule `{t}` allows every script in `{p}`"));
                }
            }
        }
    }
    out
}
