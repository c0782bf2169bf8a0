//! tools stage (gate), PURE: lint of allow rules (escape hatches a policy author should know
//! about) and of deny rules (spellings of the same command they do not match).

use crate::judge::{file_code_runs, Ctx};
use crate::paths::basename;
use crate::programs::registry::{
    canonical, family, Check, Code, Kind, EQUIVALENT_COMMANDS, FAMILIES,
};
use crate::rule::{allow_matches, deny_matches, Policy, RuleKind, Verdict};
use crate::shell::lex::Word;

/// Deny rules that name a subcommand which other commands also do (`npm install *` and `npm
/// ci`, `pnpm add`; `pip install *` and `uv pip install`): a warning naming those no deny rule
/// of the policy matches and its allow rules (or default) let run. Deny rules for programs with subcommands match the subcommand path
/// only (`git push *` does not deny `git stash push`), so these pass.
fn deny_misses(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for rule in &policy.deny {
        let (RuleKind::Exact(ws) | RuleKind::Words(ws)) = &rule.kind else {
            continue;
        };
        let [head, sub, ..] = ws.as_slice() else {
            continue;
        };
        let head_family = family(basename(head)).map(|f| f.names[0]);
        let missed: Vec<&str> = EQUIVALENT_COMMANDS
            .iter()
            .filter(|(p, s, _)| Some(*p) == head_family && s == sub)
            .flat_map(|(_, _, others)| others.iter().copied())
            .filter(|cmd| {
                let words: Vec<Word> = cmd.split_whitespace().map(Word::synthetic).collect();
                let allowed = policy.default == Verdict::Allow
                    || policy.allow.iter().any(|r| allow_matches(r, &words, ""));
                allowed && !policy.deny.iter().any(|r| deny_matches(r, &words, ""))
            })
            .collect();
        if !missed.is_empty() {
            let list: Vec<String> = missed.iter().map(|c| format!("`{c}`")).collect();
            out.push(format!(
                "deny rule `{}` does not deny {}, which do the same and which the policy lets run; deny them too",
                rule.text,
                list.join(", ")
            ));
        }
    }
    out
}

/// Escape-hatch warnings for allow rules, and deny rules that miss a spelling (interpreters, shells, find, xargs, env, timeout, awk, sed, bare git, cargo*/npm* raw prefixes, `*`...)
pub fn lint(policy: &Policy) -> Vec<String> {
    let mut out = deny_misses(policy);
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
        if let Some(w) = heuristic_warning(policy, rule) {
            out.push(w);
        }
    }
    out
}

/// An interpreter an allow rule runs whose inline code the gate judges by the capability-word
/// heuristic (deny rules in force, and no file can be written and run with it): the heuristic
/// refuses everyday code and a determined model gets around it.
fn heuristic_warning(policy: &Policy, rule: &crate::rule::Rule) -> Option<String> {
    if policy.deny.is_empty() {
        return None;
    }
    let first = match &rule.kind {
        RuleKind::Exact(ws) | RuleKind::Words(ws) => ws.first()?.clone(),
        RuleKind::Raw(p) => p.split_whitespace().next()?.to_string(),
        RuleKind::Universal | RuleKind::Path(_) => return None,
    };
    let base = canonical(basename(&first));
    let fam = family(&base)?;
    if fam.kind != Kind::Interpreter || fam.code == Code::Own || fam.check != Check::None {
        return None;
    }
    if file_code_runs(&Ctx::new(policy), &Word::synthetic(&first), &base, 0) {
        return None;
    }
    Some(format!(
        "allow rule `{}`: inline `{first}` code (`-c`, `-e`, stdin) is judged by a capability-word heuristic under the deny rules: it refuses everyday code (`import os`, `open(`) and can be evaded; deny `{first}` if it must not run arbitrary code, or let the model write and run files with it (`write_redirects` or the file tools, with a rule such as `{first} *`), where the heuristic is off",
        rule.text
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Rule;

    fn policy(deny: &[&str]) -> Policy {
        Policy {
            default: Verdict::Allow,
            allow: vec![],
            deny: deny.iter().map(|r| Rule::parse(r).unwrap()).collect(),
            write_redirects: false,
            env_allow: Vec::new(),
            file_tools: false,
            work_root: None,
        }
    }

    #[test]
    fn deny_rules_that_miss_a_spelling_are_warned_about() {
        let warnings = lint(&policy(&["npm install *"]));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`npm ci`"), "{warnings:?}");
        assert!(warnings[0].contains("`pnpm add x`"), "{warnings:?}");
        // npm's own aliases are matched by the rule (`npm i`, `npm add`), so not listed.
        assert!(!warnings[0].contains("`npm i "), "{warnings:?}");
        let pip = lint(&policy(&["pip install *"]));
        assert!(pip[0].contains("`uv pip install x`"), "{pip:?}");
        assert!(!pip[0].contains("python3 -m pip"), "{pip:?}");
        // Denied too: nothing left to name.
        let covered = lint(&policy(&["git push *", "git send-pack *", "git subtree *"]));
        assert!(covered.is_empty(), "{covered:?}");
        assert!(lint(&policy(&["rm *"])).is_empty());
        // Under `default = "deny"` only the spellings an allow rule lets run are named.
        let mut narrow = policy(&["npm install *"]);
        narrow.default = Verdict::Deny;
        assert!(lint(&narrow).is_empty());
        narrow.allow = vec![Rule::parse("npm *").unwrap()];
        let w = lint(&narrow);
        assert!(
            w.iter()
                .any(|m| m.contains("`npm ci`") && !m.contains("pnpm")),
            "{w:?}"
        );
    }
}
