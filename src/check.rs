//! `harness check`: every check that costs no token, as a checklist. A loaded [`Config`] in,
//! a list of [`Item`]s out; [`render`] is PURE. The checks are adapters: the
//! [`crate::preflight`] list that `harness once` runs too (report dir, work root, write roots),
//! key refs resolved (env, files) and checked as header values, the proxy gets
//! `GET /models` (and `GET /model/info` with `prices = "proxy"`), Redmine gets
//! `GET /users/current.json`. No chat completion is ever sent.

use std::collections::BTreeMap;

use crate::config::{Config, EgressConfig, Prices, SocketName};
use crate::llm::client::{ClientOptions, HttpClient};
use crate::preflight;
use crate::redmine::client::RedmineClient;
use crate::secrets::Redactor;
use harness_gate as gate;

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Works.
    Ok,
    /// Works, but worth a look (a gate lint); does not fail the check.
    Warn,
    /// Broken: `harness once` would fail or misbehave.
    Fail,
    /// Not configured, so not checked.
    Skip,
}

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    /// The verdict.
    pub status: Status,
    /// What was checked (`proxy`, `redmine`, ...).
    pub what: String,
    /// What was found.
    pub detail: String,
}

fn item(status: Status, what: &str, detail: impl Into<String>) -> Item {
    Item {
        status,
        what: what.to_string(),
        detail: detail.into(),
    }
}

/// Runs every check of `cfg` in order. Secrets resolved on the way are added to `redactor`.
pub(crate) async fn run(cfg: &Config, redactor: &mut Redactor) -> Vec<Item> {
    let tiers = cfg.models.tiers.len();
    let mut items = vec![item(
        Status::Ok,
        "config",
        format!(
            "{} is valid (vertical {:?}, {tiers} tier{})",
            cfg.path.display(),
            cfg.vertical,
            if tiers == 1 { "" } else { "s" }
        ),
    )];
    // The same list `harness once` stops at, so check passes only what once accepts.
    items.extend(
        preflight::local(cfg, None)
            .into_iter()
            .map(|c| match c.outcome {
                Ok(detail) => item(Status::Ok, c.what, detail),
                Err(e) => item(Status::Fail, c.what, format!("{e:#}")),
            }),
    );
    if cfg.bash.enabled {
        items.extend(gate_items(cfg));
    }
    items.extend(cfg.workflows.iter().flat_map(workflow_items));
    items.extend(litellm_items(cfg, redactor).await);
    items.extend(redmine_items(cfg, redactor).await);
    items.extend(forge_items(cfg, redactor));
    for i in &mut items {
        i.detail = redactor.redact(&i.detail);
    }
    items
}

/// `[workflows]`: how they run, then each workflow's stages (the config load already
/// checked that every skill reads and parses, every tier exists and every edge is valid).
fn workflow_items(w: &crate::config::Workflows) -> Vec<Item> {
    let mut items = vec![item(
        Status::Ok,
        "workflows",
        format!(
            "{} workflow{}, default {}, per_run {:?}, max_loops {}",
            w.named.len(),
            if w.named.len() == 1 { "" } else { "s" },
            w.default
                .as_deref()
                .unwrap_or("none (an unmatched task is a routing error)"),
            w.per_run.as_str(),
            w.max_loops
        ),
    )];
    for flow in w.named.values() {
        let stages: Vec<String> = flow
            .stages
            .iter()
            .map(|s| {
                let judge = match &s.check {
                    Some(c) => format!("check `{}`", c.command),
                    None => "the model's verdict".to_string(),
                };
                let back = s
                    .on_fail
                    .and_then(|i| flow.stages.get(i))
                    .map_or_else(String::new, |b| format!(", on_fail -> {}", b.name));
                format!(
                    "{} ({}, tier {}, {} retr{}, {judge}{back})",
                    s.name,
                    s.skill.path.display(),
                    s.tier.as_deref().unwrap_or("the task's"),
                    s.retries,
                    if s.retries == 1 { "y" } else { "ies" }
                )
            })
            .collect();
        items.push(item(
            Status::Ok,
            &format!("workflow {}", flow.name),
            format!(
                "{}; intent: {}",
                stages.join(" -> "),
                if flow.intent.is_empty() {
                    "none".to_string()
                } else {
                    flow.intent.join(" ")
                }
            ),
        ));
    }
    items
}

/// The bash tool's checks: its policy, the sandbox and what it confines (execution, the
/// programs, reads, sockets, egress), then the Unix sockets it names.
fn gate_items(cfg: &Config) -> Vec<Item> {
    let mut items = policy_items(&cfg.bash.policy);
    let sandbox = crate::tools::sandbox::decide(
        cfg.bash.sandbox,
        crate::tools::sandbox::kernel_abi(),
        cfg.bash.network,
    );
    let confined = matches!(sandbox, Ok(crate::tools::sandbox::Status::Landlock { .. }));
    items.push(match sandbox {
        Ok(s) => item(
            Status::Ok,
            "sandbox",
            s.plan_line(cfg.bash.write_roots.len()),
        ),
        Err(e) => item(Status::Fail, "sandbox", format!("{e:#}")),
    });
    items.push(if confined {
        item(
            Status::Ok,
            "exec",
            crate::tools::sandbox::exec_line(&(&cfg.bash).into(), &cfg.work_root),
        )
    } else {
        item(
            Status::Skip,
            "exec",
            "commands run unconfined: the kernel does not hold them to the allow list",
        )
    });
    if confined {
        items.extend(program_items(cfg));
    }
    items.extend(read_items(cfg, confined));
    items.push(sockets_item(cfg, confined));
    if let Some(egress) = &cfg.bash.egress {
        items.extend(egress_items(cfg, egress, confined));
    }
    if !cfg.bash.network {
        items.extend(socket_path_items(&cfg.bash.unix_sockets));
    }
    items
}

/// The gate's policy in one line (its rules, its default), then a warning per lint.
fn policy_items(p: &gate::Policy) -> Vec<Item> {
    let default = match p.default {
        gate::Verdict::Allow => "allow",
        gate::Verdict::Deny => "deny",
    };
    let mut items = vec![item(
        Status::Ok,
        "gate",
        format!(
            "{} allow rules, {} deny rules, default {default}",
            p.allow.len(),
            p.deny.len()
        ),
    )];
    items.extend(
        gate::lint(p)
            .into_iter()
            .map(|w| item(Status::Warn, "gate", w)),
    );
    items
}

/// Which Unix sockets (and network) the kernel confines commands to; skipped unconfined.
fn sockets_item(cfg: &Config, confined: bool) -> Item {
    match (confined, crate::tools::sandbox::kernel_abi()) {
        (true, Ok(abi)) => item(
            Status::Ok,
            "sockets",
            crate::tools::sandbox::sockets_line(&(&cfg.bash).into(), abi),
        ),
        _ => item(
            Status::Skip,
            "sockets",
            "commands run unconfined: Unix sockets (and the network) are not confined",
        ),
    }
}

/// `network = "allowlist"`: the proxy's settings (which need the sandbox), and a warning for
/// each of the harness's own services the allow list lets commands reach.
fn egress_items(cfg: &Config, egress: &EgressConfig, confined: bool) -> Vec<Item> {
    let line = crate::tools::egress::describe(egress);
    let mut items = vec![match crate::tools::egress::settings(egress) {
        Err(e) => item(Status::Fail, "egress", format!("{e:#}")),
        Ok(_) if !confined => item(
            Status::Fail,
            "egress",
            format!("{line}; but commands run unconfined, and network = \"allowlist\" needs the sandbox"),
        ),
        Ok(_) => item(Status::Ok, "egress", line),
    }];
    // The proxy adds no key, but a listed LLM proxy or Redmine is a door to the harness's
    // own services that the operator should have opened on purpose.
    let own = [
        (
            "the LLM proxy ([litellm].base_url)",
            cfg.litellm.base_url.as_deref(),
        ),
        (
            "Redmine ([redmine].url)",
            cfg.redmine.as_ref().map(|r| r.url.as_str()),
        ),
    ];
    for (what, url) in own {
        let host = url.and_then(crate::tools::egress::policy::url_host);
        if let Some(host) = host.filter(|h| crate::tools::egress::policy::allowed(&egress.allow, h))
        {
            items.push(item(
                Status::Warn,
                "egress",
                format!("the allow list lets commands reach {what} at {host}; the proxy adds no key, but is that meant?"),
            ));
        }
    }
    items
}

/// A warning for each socket path `unix_sockets` names that is missing or not a socket.
fn socket_path_items(names: &[SocketName]) -> Vec<Item> {
    use std::os::unix::fs::FileTypeExt;
    let mut items = Vec::new();
    for name in names {
        if let SocketName::Path(p) = name {
            let problem = match std::fs::metadata(p) {
                Err(_) => Some("does not exist (yet)"),
                Ok(m) if !m.file_type().is_socket() => Some("is not a socket"),
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                items.push(item(
                    Status::Warn,
                    "sockets",
                    format!("unix_sockets names {}, which {problem}", p.display()),
                ));
            }
        }
    }
    items
}

/// Under Landlock, a warning for each allowed program that resolves (through PATH, a shim, a
/// `#!` line, a venv) to a file the sandbox hides: it would fail with `Permission denied`.
fn program_items(cfg: &Config) -> Vec<Item> {
    use crate::tools::sandbox::{self, exec, reach, reads};
    let bash = sandbox::Settings::from(&cfg.bash);
    let Ok(read) = reads::read_set(&bash, &cfg.work_root, None) else {
        // The read set's own failure is the `reads` preflight entry.
        return Vec::new();
    };
    let path_var = sandbox::path_var();
    let exec_set = exec::exec_set(&bash, &cfg.work_root, &path_var, None);
    let needs = reach::needs(&bash, &cfg.work_root, &path_var);
    reach::hints(&needs, &read, exec_set.as_ref(), &reach::never(&bash))
        .into_iter()
        .map(|h| item(Status::Warn, "programs", h))
        .collect()
}

/// Warnings about what commands may read: unconfined commands, paths hidden inside the work
/// root, key files with hard links.
fn read_items(cfg: &Config, confined: bool) -> Vec<Item> {
    use crate::tools::sandbox::reads;
    if !confined {
        return vec![item(
            Status::Warn,
            "reads",
            "commands run unconfined: they can read every file this user can, key files and the config included",
        )];
    }
    // The read set itself, and its failures, are a preflight entry (`reads`).
    let mut items = Vec::new();
    if let Ok(set) = reads::read_set(&(&cfg.bash).into(), &cfg.work_root, None) {
        // $HOME holds keys harness does not know about (~/.ssh, ~/.config, ~/.netrc).
        let home =
            std::env::var_os("HOME").and_then(|h| std::path::Path::new(&h).canonicalize().ok());
        if let Some(home) = home.filter(|h| set.allows(h, false)) {
            items.push(item(
                Status::Warn,
                "reads",
                format!(
                    "commands can read all of {} ($HOME: ~/.ssh, ~/.config and other keys); name narrower read roots",
                    home.display()
                ),
            ));
        }
        if !set.hidden.is_empty() {
            items.push(item(
                Status::Warn,
                "reads",
                format!(
                    "work_root holds {}: hidden from commands, and so is every file created later beside them; a work tree in its own directory avoids this",
                    set.hidden.join(", ")
                ),
            ));
        }
    }
    // A hard link is the same file under another path: Landlock would allow it there.
    for n in &cfg.bash.never_read {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(&n.path) {
            if meta.is_file() && meta.nlink() > 1 {
                items.push(item(
                    Status::Warn,
                    "reads",
                    format!(
                        "{} ({}) has {} hard links: a link inside a read root would be readable",
                        n.what,
                        n.path.display(),
                        meta.nlink()
                    ),
                ));
            }
        }
    }
    items
}

async fn litellm_items(cfg: &Config, redactor: &mut Redactor) -> Vec<Item> {
    if let Some(path) = &cfg.litellm.replay {
        return vec![match crate::llm::cassette::Replayer::load(path) {
            Ok(_) => item(
                Status::Ok,
                "llm",
                format!("replay {} loads (no key, no network)", path.display()),
            ),
            Err(e) => item(Status::Fail, "llm", format!("{e:#}")),
        }];
    }
    let (Some(url), Some(key_ref)) = (&cfg.litellm.base_url, &cfg.litellm.key_ref) else {
        return vec![item(
            Status::Fail,
            "llm",
            "[litellm] needs base_url and key_ref (or replay)",
        )];
    };
    let key = match preflight::key(
        key_ref,
        "litellm key",
        "[litellm].key_ref",
        &cfg.path,
        redactor,
    ) {
        Ok(k) => k,
        Err(e) => {
            return vec![item(
                Status::Fail,
                "litellm key",
                unlabelled("litellm key", &e),
            )]
        }
    };
    let mut items = vec![item(
        Status::Ok,
        "litellm key",
        format!("{} resolves", key_ref.describe()),
    )];
    let client = match HttpClient::new(
        url,
        key,
        ClientOptions::new(&cfg.litellm, key_ref),
        redactor.clone(),
    ) {
        Ok(c) => c,
        Err(e) => {
            items.push(item(Status::Fail, "proxy", format!("{e:#}")));
            return items;
        }
    };
    let served = match client.list_models().await {
        Ok(s) => s,
        Err(e) => {
            items.push(item(Status::Fail, "proxy", e.message));
            return items;
        }
    };
    items.push(item(
        Status::Ok,
        "proxy",
        format!("{url} answers GET /models with {} models", served.len()),
    ));
    items.extend(model_items(&cfg.models.tiers, &served));
    if cfg.prices == Prices::Proxy {
        items.push(match client.model_prices().await {
            Ok(p) => item(
                Status::Ok,
                "prices",
                format!("GET /model/info prices {} models", p.len()),
            ),
            Err(e) => item(Status::Fail, "prices", e.message),
        });
    }
    items
}

/// One item per tier: are its models listed by the proxy? PURE.
pub(crate) fn model_items(tiers: &BTreeMap<String, Vec<String>>, served: &[String]) -> Vec<Item> {
    tiers
        .iter()
        .map(|(tier, chain)| {
            let missing: Vec<&String> = chain.iter().filter(|m| !served.contains(m)).collect();
            let what = format!("[models].{tier}");
            if missing.is_empty() {
                item(Status::Ok, &what, format!("{} listed", chain.join(", ")))
            } else {
                let names: Vec<String> = missing.iter().map(|m| format!("{m:?}")).collect();
                item(
                    Status::Fail,
                    &what,
                    format!("not listed by GET /models: {}", names.join(", ")),
                )
            }
        })
        .collect()
}

async fn redmine_items(cfg: &Config, redactor: &mut Redactor) -> Vec<Item> {
    let Some(rm) = &cfg.redmine else {
        return vec![item(Status::Skip, "redmine", "no [redmine] section")];
    };
    let key = match preflight::key(
        &rm.key_ref,
        "redmine key",
        "[redmine].key_ref",
        &cfg.path,
        redactor,
    ) {
        Ok(k) => k,
        Err(e) => {
            return vec![item(
                Status::Fail,
                "redmine key",
                unlabelled("redmine key", &e),
            )]
        }
    };
    let mut items = vec![item(
        Status::Ok,
        "redmine key",
        format!("{} resolves", rm.key_ref.describe()),
    )];
    let user = match RedmineClient::new(rm, key, redactor.clone()) {
        Ok(client) => client.current_user().await,
        Err(e) => Err(e),
    };
    items.push(match user {
        Ok(u) => item(
            Status::Ok,
            "redmine",
            format!(
                "{} accepts the key (user {:?}, id {})",
                rm.url, u.login, u.id
            ),
        ),
        Err(e) => item(Status::Fail, "redmine", format!("{e:#}")),
    });
    items
}

/// `[forge]`: where pull requests go and how, and whether its token resolves (the one
/// place once gets it from: [`preflight::forge_client`]). No request is sent.
fn forge_items(cfg: &Config, redactor: &mut Redactor) -> Vec<Item> {
    let Some(f) = &cfg.forge else {
        return Vec::new();
    };
    let pr = match f.pr {
        crate::config::PrMode::Off => "off",
        crate::config::PrMode::Draft => "draft",
        crate::config::PrMode::Ready => "ready",
    };
    let on_failure = match f.on_failure {
        crate::config::OnFailure::Branch => "branch",
        crate::config::OnFailure::Draft => "draft",
    };
    let mut items = vec![item(
        Status::Ok,
        "forge",
        format!(
            "{} {} repo {}: pr {pr}, on failure {on_failure}, title {:?}",
            f.kind.as_str(),
            f.url,
            f.repo,
            f.title
        ),
    )];
    items.push(match preflight::forge_client(cfg, redactor) {
        Some(Ok(_)) => item(
            Status::Ok,
            "forge token",
            format!("{} resolves", f.token_ref.describe()),
        ),
        Some(Err(e)) => item(Status::Fail, "forge token", unlabelled("forge token", &e)),
        None => return items,
    });
    items
}

/// A key error without the label its line already starts with: `FAIL  litellm key:
/// environment variable X is not set`, not `litellm key: litellm key: ...` (`once` prints
/// the same error with its label, which it needs there).
fn unlabelled(label: &str, e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    match text.strip_prefix(label).and_then(|t| t.strip_prefix(": ")) {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// The checklist as printed: one line per item, then a count.
pub(crate) fn render(items: &[Item]) -> String {
    let mut out = String::new();
    for i in items {
        let mark = match i.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        out.push_str(&wrap(&format!("{mark}  {}: ", i.what), &i.detail, WIDTH));
    }
    let failed = failures(items);
    out.push_str(&if failed == 0 {
        format!("all {} checks passed\n", items.len())
    } else {
        format!("{failed} of {} checks failed\n", items.len())
    });
    out
}

/// The columns a `check` line fills before it wraps.
pub(crate) const WIDTH: usize = 100;

/// The widest indent of a continuation line: past it, continuations start under the mark's
/// end instead, so a long `what` leaves room for the detail.
const INDENT_MAX: usize = 40;

/// `head` then `detail`, wrapped at spaces to `width` columns (characters), each line ended by
/// a newline: continuation lines are indented under the detail's first column, a word longer
/// than the width is kept whole on a line of its own, and each line of a multi-line detail
/// wraps the same way. One space becomes each break, so joining a continuation (its indent
/// removed) to the line before with a space gives the detail back.
pub(crate) fn wrap(head: &str, detail: &str, width: usize) -> String {
    let lead = head.chars().count();
    let indent = " ".repeat(if lead <= INDENT_MAX { lead } else { 6 });
    let mut out = String::from(head);
    let mut col = lead;
    for (n, line) in detail.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
            out.push_str(&indent);
            col = indent.len();
        }
        let mut first = true;
        for word in line.split(' ') {
            let len = word.chars().count();
            if !first && col + 1 + len > width && col > indent.len() && !word.is_empty() {
                out.push('\n');
                out.push_str(&indent);
                col = indent.len();
            } else if !first {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += len;
            first = false;
        }
    }
    out.push('\n');
    out
}

/// How many items failed.
pub(crate) fn failures(items: &[Item]) -> usize {
    items.iter().filter(|i| i.status == Status::Fail).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn tiers_are_checked_against_the_listing() {
        let tiers: BTreeMap<String, Vec<String>> = [
            ("a", vec!["glm-5.3", "glm-5.2"]),
            ("b", vec!["glm-9", "glm-5.3"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        let served = vec!["glm-5.3".to_string(), "glm-5.2".to_string()];
        let items = model_items(&tiers, &served);
        assert_eq!(
            render(&items),
            "ok    [models].a: glm-5.3, glm-5.2 listed\nFAIL  [models].b: not listed by GET /models: \"glm-9\"\n1 of 2 checks failed\n"
        );
    }

    #[test]
    fn check_lines_wrap_at_spaces_under_the_detail_and_keep_long_words_whole() {
        assert_eq!(wrap("ok    a: ", "short", 100), "ok    a: short\n");
        assert_eq!(
            wrap("ok    a: ", "one two three four", 16),
            "ok    a: one two\n         three\n         four\n"
        );
        let long = "x".repeat(30);
        assert_eq!(
            wrap("FAIL  b: ", &format!("see {long} end"), 20),
            format!("FAIL  b: see\n         {long}\n         end\n")
        );
        // A detail of several lines keeps its breaks, each line indented the same.
        assert_eq!(wrap("ok    c: ", "a\nb", 100), "ok    c: a\n         b\n");
        // A `what` too long to indent under: continuations start under the mark's end.
        let what = "w".repeat(50);
        let head = format!("warn  {what}: ");
        assert_eq!(
            wrap(&head, "aa bb", head.len() + 2),
            format!("{head}aa\n      bb\n")
        );
        // Every line fits the width unless it is one word; rejoined, the detail comes back.
        let detail = "the quick brown fox jumps over the lazy dog ".repeat(8);
        let text = wrap("ok    reads: ", detail.trim_end(), WIDTH);
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        let rejoined: Vec<&str> = text.lines().map(str::trim_start).collect();
        assert_eq!(
            rejoined.join(" "),
            format!("ok    reads: {}", detail.trim_end())
        );
    }

    #[test]
    fn a_key_error_is_not_prefixed_twice() {
        let e = anyhow::anyhow!("litellm key: environment variable K is not set");
        let items = vec![item(
            Status::Fail,
            "litellm key",
            unlabelled("litellm key", &e),
        )];
        assert_eq!(
            render(&items),
            "FAIL  litellm key: environment variable K is not set\n1 of 1 checks failed\n"
        );
        let other = anyhow::anyhow!("[litellm].key_ref (env:K): the key is not ASCII");
        assert_eq!(
            unlabelled("litellm key", &other),
            "[litellm].key_ref (env:K): the key is not ASCII"
        );
    }

    #[test]
    fn warnings_and_skips_do_not_fail() {
        let items = vec![
            item(Status::Warn, "gate", "rule x shadows y"),
            item(Status::Skip, "redmine", "no [redmine] section"),
        ];
        assert_eq!(failures(&items), 0);
        assert!(render(&items).ends_with("all 2 checks passed\n"));
    }
}
