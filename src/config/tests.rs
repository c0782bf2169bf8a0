//! Unit tests of the config stage: parsing, defaults and every validation message.

use super::*;
use harness_gate::Verdict;
use pretty_assertions::assert_eq;

const MINIMAL: &str = r#"
vertical = "demo"
[litellm]
base_url = "http://127.0.0.1:4000/v1"
key_ref = "env:HARNESS_LITELLM_KEY"
[models]
mopac-primary = "glm-5.3"
default_tier = "mopac-primary"
[models.classes]
primary = "mopac-primary"
"#;

fn problems(text: &str) -> Vec<String> {
    match parse(text, Path::new("/etc/h/harness.toml")) {
        Ok(_) => vec![],
        Err(e) => e.problems,
    }
}

#[test]
fn minimal_config_gets_the_spec_defaults() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.vertical, "demo");
    assert_eq!(c.work_root, PathBuf::from("/etc/h"));
    assert_eq!(c.report_dir, PathBuf::from("/etc/h/reports"));
    assert_eq!(c.max_rounds, 8);
    assert_eq!(c.litellm.timeout, Duration::from_secs(120));
    assert_eq!(c.litellm.max_retries, 2);
    assert!(c.bash.enabled);
    assert_eq!(c.bash.timeout, Duration::from_secs(60));
    assert_eq!(c.bash.max_output_bytes, 100_000);
    assert_eq!(c.bash.policy.default, Verdict::Deny);
    assert_eq!(c.demo.id, "demo-1");
    assert!(c.redmine.is_none());
}

#[test]
fn unknown_keys_are_all_reported_with_their_section() {
    let text = format!("vertcal = 1\n{MINIMAL}\n[tools.bash]\nalow = []\n[loop]\nmax_round = 3\n");
    assert_eq!(
        problems(&text),
        vec![
            "vertcal: unknown key (did you mean `vertical`?)".to_string(),
            "[tools.bash].alow: unknown key (did you mean `allow`?)".to_string(),
            "[loop].max_round: unknown key (did you mean `max_rounds`?)".to_string(),
        ]
    );
}

#[test]
fn every_validation_problem_is_reported() {
    let text = r#"
vertical = "a b"
[loop]
max_rounds = 0
[litellm]
base_url = "ftp://x"
key_ref = "HARNESS_KEY"
timeout_secs = 0
[models]
t = "m"
default_tier = "nope"
[models.classes]
code = "missing-tier"
[tools.bash]
default = "maybe"
max_output_bytes = 1
"#;
    let p = problems(text);
    let keys: Vec<&str> = p
        .iter()
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        keys,
        vec![
            "vertical",
            "[loop].max_rounds",
            "[litellm].base_url",
            "[litellm].key_ref",
            "[litellm].timeout_secs",
            "[models].default_tier",
            "[models.classes].code",
            "[tools.bash].default",
            "[tools.bash].max_output_bytes",
        ],
        "{p:#?}"
    );
}

#[test]
fn missing_required_keys_are_named() {
    assert_eq!(
        problems("[models]\nt = \"m\"\n"),
        vec![
            "vertical: is required (the identity of this harness instance)".to_string(),
            "[litellm].base_url: is required (or set [litellm].replay to serve recorded replies)"
                .to_string(),
            "[litellm].key_ref: is required, e.g. key_ref = \"env:HARNESS_LITELLM_KEY\""
                .to_string(),
        ]
    );
    assert_eq!(
        problems("vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n"),
        vec!["[models]: defines no tier (e.g. mopac-primary = \"glm-5.3\")".to_string()]
    );
}

#[test]
fn replay_needs_no_endpoint_and_is_relative_to_the_config() {
    let c = parse(
        "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\n",
        Path::new("/x/y/h.toml"),
    )
    .unwrap();
    assert_eq!(c.litellm.replay, Some(PathBuf::from("/x/y/c.json")));
}

#[test]
fn tiers_may_be_fallback_chains() {
    let text = MINIMAL.replace("\"glm-5.3\"", "[\"glm-5.3\", \"glm-5.2\"]");
    let c = parse(&text, Path::new("h.toml")).unwrap();
    assert_eq!(c.models.tiers["mopac-primary"], vec!["glm-5.3", "glm-5.2"]);
    assert_eq!(
        problems(&MINIMAL.replace("\"glm-5.3\"", "[]")),
        vec![
            "[models].mopac-primary: must name a concrete model (a string, or a list of strings for fallback)".to_string(),
            "[models]: defines no tier (e.g. mopac-primary = \"glm-5.3\")".to_string(),
            "[models].default_tier: names tier \"mopac-primary\", which [models] does not define".to_string(),
            "[models.classes].primary: maps to tier \"mopac-primary\", which [models] does not define".to_string(),
        ]
    );
}

#[test]
fn bad_rules_name_their_index() {
    let text = format!("{MINIMAL}\n[tools.bash]\nallow = [\"ls *\", \"\"]\n");
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("[tools.bash].allow[1]: \"\""), "{p:?}");
}

#[test]
fn redmine_section_is_validated() {
    let text = format!("{MINIMAL}\n[redmine]\nurl = \"localhost\"\nlimit = 500\n");
    assert_eq!(
        problems(&text),
        vec![
            "[redmine].url: must be an http:// or https:// URL, got \"localhost\"".to_string(),
            "[redmine].key_ref: is required, e.g. key_ref = \"env:HARNESS_REDMINE_KEY\"".to_string(),
            "[redmine]: needs scope_query (raw /issues.json parameters) or scope_query_id (a saved query)".to_string(),
            "[redmine].limit: must be between 1 and 100, got 500".to_string(),
        ]
    );
    let ok = format!(
        "{MINIMAL}\n[redmine]\nurl = \"http://127.0.0.1:3000/\"\nkey_ref = \"env:K\"\nscope_query = \"status_id=open\"\nscope_query_id = 7\n"
    );
    let c = parse(&ok, Path::new("h.toml")).unwrap();
    let r = c.redmine.unwrap();
    assert_eq!(r.url, "http://127.0.0.1:3000");
    assert_eq!(r.scope, Scope::Query("status_id=open".into()));
    assert_eq!(r.class_field, "Class");
    assert_eq!(r.default_class, "primary");
    assert_eq!(r.limit, 50);
}

#[test]
fn type_errors_name_the_key() {
    let p = problems(&format!("{MINIMAL}\n[loop]\nmax_rounds = \"eight\"\n"));
    assert_eq!(p.len(), 1);
    assert!(p[0].contains("max_rounds"), "{p:?}");
}

#[test]
fn type_errors_are_all_reported_at_once_in_words_with_unknown_keys() {
    let text = format!(
        "{}\n[loop]\nmax_rounds = \"eight\"\nmax_round = 3\n[tools.bash]\ntimeout_secs = true\n",
        MINIMAL.replace("[models]\n", "[models]\nmopac-code = 5\n")
    );
    let p = problems(&text);
    assert_eq!(
        p,
        vec![
            "[loop].max_rounds: must be a whole number, not a string (\"eight\")".to_string(),
            "[models].mopac-code: must be a model name or a list of model names, not a whole number (5)".to_string(),
            "[tools.bash].timeout_secs: must be a whole number, not true".to_string(),
            "[loop].max_round: unknown key (did you mean `max_rounds`?)".to_string(),
        ]
    );
    for p in &p {
        assert!(
            !p.contains("i64") && !p.contains("untagged") && !p.contains("RawTier"),
            "{p}"
        );
    }
}

#[test]
fn paths_are_cleaned() {
    assert_eq!(
        clean_path(Path::new("examples/demo/../../reports")),
        PathBuf::from("reports")
    );
    assert_eq!(clean_path(Path::new("./.")), PathBuf::from("."));
    assert_eq!(clean_path(Path::new("../x/./y")), PathBuf::from("../x/y"));
    assert_eq!(clean_path(Path::new("/a/b/../c")), PathBuf::from("/a/c"));
}

#[test]
fn llm_side_keys_default_and_validate() {
    let c = parse(MINIMAL, Path::new("h.toml")).unwrap();
    assert!(!c.litellm.streaming && !c.litellm.preflight);
    assert_eq!(c.litellm.stream_idle_timeout, Duration::from_secs(30));
    assert_eq!(c.prices, Prices::None);
    assert_eq!(c.budget, BudgetConfig::default());
    let text = format!(
        "{}[budget]\nmax_cost_usd = 0.5\nmax_total_tokens = 9000\n[models.prices]\n\"glm-5.3\" = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2.5 }}\n",
        MINIMAL.replace("[models]\n", "streaming = true\n[models]\n")
    );
    let c = parse(&text, Path::new("h.toml")).unwrap();
    assert!(c.litellm.streaming);
    assert_eq!(
        c.budget,
        BudgetConfig {
            max_cost_usd: Some(0.5),
            max_total_tokens: Some(9000)
        }
    );
    let Prices::Table(t) = &c.prices else {
        panic!("{:?}", c.prices)
    };
    let usage = crate::llm::wire::Usage {
        prompt_tokens: 1000,
        completion_tokens: 500,
        total_tokens: 1500,
    };
    assert_eq!(t["glm-5.3"].cost(&usage), 0.00225);
    let proxy = MINIMAL.replace("[models]\n", "[models]\nprices = \"proxy\"\n");
    assert_eq!(
        parse(&proxy, Path::new("h.toml")).unwrap().prices,
        Prices::Proxy
    );
}

#[test]
fn llm_side_problems_name_their_keys() {
    let text = MINIMAL.replace(
        "[models]\n",
        "stream_idle_timeout_secs = 0\n[models]\nprices = \"guess\"\n",
    ) + "[budget]\nmax_cost_usd = -1.0\nmax_total_tokens = 0\nmax_rounds = 2\n";
    assert_eq!(
        problems(&text),
        vec![
            "[budget].max_rounds: unknown key".to_string(),
            "[litellm].stream_idle_timeout_secs: must be between 1 and 3600, got 0".to_string(),
            "[models].prices: must be \"proxy\" or a table of models ([models.prices]), got \"guess\"".to_string(),
            "[budget].max_cost_usd: must be a positive number of USD, got -1".to_string(),
            "[budget].max_total_tokens: must be at least 1, got 0".to_string(),
        ]
    );
    let table = format!(
        "{MINIMAL}[models.prices]\n\"glm-5.3\" = {{ input_usd_per_mtok = -1, out = 2 }}\n\"glm-5.2\" = 3\n"
    );
    assert_eq!(
        problems(&table),
        vec![
            "[models.prices].glm-5.2: must be a table, e.g. { input_usd_per_mtok = 1.0, output_usd_per_mtok = 2.0 }".to_string(),
            "[models.prices].glm-5.3.input_usd_per_mtok: must be a number of USD per million tokens (>= 0), got -1".to_string(),
            "[models.prices].glm-5.3.out: unknown key".to_string(),
            "[models.prices].glm-5.3.output_usd_per_mtok: is required".to_string(),
        ]
    );
    let replay_proxy =
        "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\nprices = \"proxy\"\n";
    assert_eq!(
        problems(replay_proxy),
        vec!["[models].prices: \"proxy\" reads GET /model/info from [litellm].base_url, which is not set".to_string()]
    );
}

#[test]
fn the_error_names_the_file() {
    let e = parse("vertical = 1", Path::new("/etc/h/harness.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("config /etc/h/harness.toml: 1 problem"),
        "{e}"
    );
}

#[test]
fn policy_examples_are_checked_at_load() {
    let text = format!(
        "{MINIMAL}\n[tools.bash]\nallow = [\"git status\", \"git diff *\", \"ls *\"]\ndeny = [\"rm *\"]\n\
         examples_allow = [\"git status\", \"git diff HEAD~1\", \"git push\", \"ls -la | wc -l\"]\n\
         examples_deny = [\"rm -rf /\", \"ls; git difftool\", \"ls src\"]\n"
    );
    assert_eq!(
        problems(&text),
        vec![
            "[tools.bash].examples_allow[2]: \"git push\" was denied: no allow rule matches `git`".to_string(),
            "[tools.bash].examples_allow[3]: \"ls -la | wc -l\" was denied: no allow rule matches `wc`".to_string(),
            "[tools.bash].examples_deny[2]: \"ls src\" was allowed: all 1 segment allowed".to_string(),
        ]
    );
}

#[test]
fn examples_are_skipped_when_a_rule_is_broken() {
    let text = format!("{MINIMAL}\n[tools.bash]\nallow = [\"l*s *\"]\nexamples_allow = [\"ls\"]\n");
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("[tools.bash].allow[0]"), "{p:?}");
}

#[test]
fn sandbox_keys_default_and_validate() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.bash.sandbox, SandboxMode::Auto);
    assert!(!c.bash.network);
    assert!(c.bash.write_roots.is_empty());
    let text = format!(
        "{MINIMAL}\n[tools.bash]\nsandbox = \"landlock\"\nnetwork = true\nwrite_roots = [\"cache\", \"/var/tmp/x\"]\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.bash.sandbox, SandboxMode::Landlock);
    assert!(c.bash.network);
    assert_eq!(
        c.bash.write_roots,
        vec![PathBuf::from("/etc/h/cache"), PathBuf::from("/var/tmp/x")]
    );
    let text = format!("{MINIMAL}\n[tools.bash]\nsandbox = \"yes\"\nwrite_roots = [\"\"]\n");
    assert_eq!(
        problems(&text),
        vec![
            "[tools.bash].sandbox: must be \"auto\", \"landlock\" or \"off\", got \"yes\""
                .to_string(),
            "[tools.bash].write_roots[0]: must not be empty".to_string(),
        ]
    );
}

#[test]
fn inbox_intake_order_and_metrics_are_validated_by_key() {
    const REDMINE: &str = "[redmine]\nurl = \"http://127.0.0.1:3000\"\nkey_ref = \"env:K\"\nscope_query = \"status_id=open\"\n";
    let c = parse(
        &format!("{MINIMAL}\n[inbox]\ndir = \"in\"\n[metrics]\ntextfile = \"m/h.prom\"\n{REDMINE}"),
        Path::new("/etc/h/harness.toml"),
    )
    .unwrap();
    assert_eq!(
        c.inbox,
        Some(InboxConfig {
            dir: PathBuf::from("/etc/h/in"),
            stale_after_mins: 120
        })
    );
    assert_eq!(c.metrics_textfile, Some(PathBuf::from("/etc/h/m/h.prom")));
    assert_eq!(c.intake_order, [SourceName::Inbox, SourceName::Redmine]);
    let c = parse(
        &format!("{MINIMAL}\n[inbox]\ndir = \"in\"\n[intake]\norder = [\"redmine\", \"inbox\"]\n{REDMINE}"),
        Path::new("/etc/h/harness.toml"),
    )
    .unwrap();
    assert_eq!(c.intake_order, [SourceName::Redmine, SourceName::Inbox]);
    assert_eq!(
        problems(&format!(
            "{MINIMAL}\n[inbox]\nstale_after_mins = 0\n[metrics]\ntextfile = \"h.txt\"\n[intake]\norder = [\"inbox\", \"inbox\", \"jira\"]\n{REDMINE}"
        )),
        vec![
            "[metrics].textfile: must end in .prom (node_exporter reads only those), got \"h.txt\"",
            "[inbox].dir: is required when [inbox] is present",
            "[inbox].stale_after_mins: must be between 1 and 525600, got 0",
            "[intake].order: names \"inbox\" twice",
            "[intake].order: unknown source \"jira\" (the sources are \"inbox\" and \"redmine\")",
            "[intake].order: leaves out \"redmine\", which is configured",
        ]
    );
}

#[test]
fn read_roots_unix_sockets_and_the_paths_never_read() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.bash.read_roots, vec![ReadRoot::System]);
    assert!(c.bash.unix_sockets.is_empty());
    let text = MINIMAL.replace("env:HARNESS_LITELLM_KEY", "file:keys/llm")
        + "[tools.bash]\nread_roots = [\"@system\", \"/opt/tools\", \"lib\"]\nunix_sockets = [\"/run/docker.sock\", \"@resolver\", \"run/x.sock\"]\n";
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(
        c.bash.read_roots,
        vec![
            ReadRoot::System,
            ReadRoot::Path(PathBuf::from("/opt/tools")),
            ReadRoot::Path(PathBuf::from("/etc/h/lib")),
        ]
    );
    assert_eq!(
        c.bash.unix_sockets,
        vec![
            SocketName::Path(PathBuf::from("/run/docker.sock")),
            SocketName::Abstract("resolver".to_string()),
            SocketName::Path(PathBuf::from("/etc/h/run/x.sock")),
        ]
    );
    assert_eq!(c.bash.unix_sockets[1].to_string(), "@resolver");
    let bad = MINIMAL.to_string() + "[tools.bash]\nunix_sockets = [\"@\", \"\"]\n";
    assert_eq!(
        parse(&bad, Path::new("/etc/h/harness.toml")).unwrap_err().to_string(),
        "config /etc/h/harness.toml: 2 problems\n  - [tools.bash].unix_sockets[0]: `@` needs an abstract socket name after it\n  - [tools.bash].unix_sockets[1]: must not be empty"
    );
    let never: Vec<(String, bool)> = c
        .bash
        .never_read
        .iter()
        .map(|n| (n.path.display().to_string(), n.may_share_work_root))
        .collect();
    assert_eq!(
        never,
        vec![
            ("/etc/h/harness.toml".to_string(), true),
            ("/etc/h/reports".to_string(), true),
            ("/etc/h/keys/llm".to_string(), false),
        ]
    );
    let bad = MINIMAL.to_string() + "[tools.bash]\nread_roots = [\"@home\", \"\"]\n";
    assert_eq!(
        problems(&bad),
        vec![
            "[tools.bash].read_roots[0]: \"@home\": the only @ name is \"@system\"".to_string(),
            "[tools.bash].read_roots[1]: must not be empty".to_string(),
        ]
    );
}

#[test]
fn exec_roots_resolve_against_the_config_dir() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert!(c.bash.exec_roots.is_empty());
    let text =
        MINIMAL.to_string() + "[tools.bash]\nexec_roots = [\"/opt/tc/bin\", \"target/debug\"]\n";
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(
        c.bash.exec_roots,
        vec![
            PathBuf::from("/opt/tc/bin"),
            PathBuf::from("/etc/h/target/debug")
        ]
    );
    let bad = MINIMAL.to_string() + "[tools.bash]\nexec_roots = [\" \"]\n";
    assert_eq!(
        problems(&bad),
        vec!["[tools.bash].exec_roots[0]: must not be empty".to_string()]
    );
}

#[test]
fn file_tool_keys_default_and_validate() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.files, FilesConfig::default());
    assert!(!c.files.enabled);
    let text = format!(
        "{MINIMAL}\n[tools.files]\nenabled = true\nmax_read_bytes = 2048\nmax_write_bytes = 4096\nprotect = [\"secrets\", \"*.pem\"]\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(
        c.files,
        FilesConfig {
            enabled: true,
            max_read_bytes: 2048,
            max_write_bytes: 4096,
            protect: vec!["secrets".into(), "*.pem".into()],
        }
    );
    let text = format!(
        "{MINIMAL}\n[tools.bash]\nenabled = false\n[tools.files]\nenabled = true\nmax_read_bytes = 10\nprotect = [\"\", \"/etc\", \"a/../b\"]\nmax = 1\n"
    );
    assert_eq!(
        problems(&text),
        vec![
            "[tools.files].max: unknown key".to_string(),
            "[tools.files].protect[0]: must not be empty".to_string(),
            "[tools.files].protect[1]: must be relative to the work root, without `..`, got \"/etc\"".to_string(),
            "[tools.files].protect[2]: must be relative to the work root, without `..`, got \"a/../b\"".to_string(),
            "[tools.files].max_read_bytes: must be between 1024 and 16777216, got 10".to_string(),
            "[tools.files].enabled: the file tools come with the tool set: they need [tools.bash] enabled = true".to_string(),
        ]
    );
}

#[test]
fn prompt_keys_default_and_validate() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.prompt.agents_max_bytes, 16_384);
    let text = format!("{MINIMAL}\n[prompt]\nagents_max_bytes = 0\n");
    assert_eq!(
        parse(&text, Path::new("/etc/h/harness.toml"))
            .unwrap()
            .prompt
            .agents_max_bytes,
        0
    );
    let text = format!("{MINIMAL}\n[prompt]\nagents_max_bytes = -1\n");
    assert_eq!(
        problems(&text),
        vec!["[prompt].agents_max_bytes: must be between 0 and 1048576, got -1".to_string()]
    );
}

#[test]
fn a_bad_url_is_quoted_without_its_password() {
    let text = MINIMAL.replace(
        "http://127.0.0.1:4000/v1",
        "http://bot:hunter2 x@127.0.0.1:4000/v1?q",
    );
    assert_eq!(
        problems(&text),
        vec!["[litellm].base_url: must be a plain base URL, got \"http://bot:[redacted]@127.0.0.1:4000/v1?q\"".to_string()]
    );
}

#[test]
fn finish_session_and_outcome_keys_default_and_validate() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.finish, FinishMode::Tool);
    assert_eq!(c.session, SessionConfig::default());
    assert_eq!(c.session.store, SessionStore::Auto);
    let text = format!(
        "{MINIMAL}\n[loop]\nfinish = \"message\"\n[session]\nenabled = false\nstore = \"local\"\nmax_history_tokens = 5000\nmax_attachment_bytes = 2048\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.finish, FinishMode::Message);
    assert_eq!(
        c.session,
        SessionConfig {
            enabled: false,
            store: SessionStore::Local,
            max_history_tokens: 5000,
            max_attachment_bytes: 2048
        }
    );
    let text = format!(
        "{MINIMAL}\n[loop]\nfinish = \"text\"\n[session]\nstore = \"s3\"\nmax_history_tokens = 10\n[redmine]\nurl = \"http://127.0.0.1:3000\"\nkey_ref = \"env:K\"\nscope_query = \"x=1\"\n[redmine.writeback]\nstatus_needs_input = \"\"\nassign_needs_input = \"bot\"\n"
    );
    assert_eq!(
        problems(&text),
        vec![
            "[loop].finish: must be \"tool\" or \"message\", got \"text\"".to_string(),
            "[session].store: must be \"auto\", \"redmine\" or \"local\", got \"s3\"".to_string(),
            "[session].max_history_tokens: must be between 1000 and 10000000, got 10".to_string(),
            "[redmine.writeback].status_needs_input: must not be empty (omit the key to leave the status unchanged)".to_string(),
            "[redmine.writeback].assign_needs_input: must be \"author\" (or left out), got \"bot\"".to_string(),
        ]
    );
}

#[test]
fn a_parse_error_on_a_huge_line_shows_a_clipped_line() {
    let deep = format!(
        "vertical = \"x\"\na = {}{}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let err = parse(&deep, Path::new("h.toml")).unwrap_err().to_string();
    assert!(err.len() < 2_000, "{} bytes", err.len());
    assert!(err.contains("h.toml") && err.contains("line 2"), "{err}");
}

#[test]
fn a_preset_starts_the_policy_and_the_config_adds_to_it() {
    let text = format!(
        "{MINIMAL}\n[tools.bash]\npreset = \"python-dev\"\nallow = [\"cargo test *\"]\ndeny = [\"git commit *\"]\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    let p = harness_gate::presets::preset("python-dev").unwrap();
    let policy = &c.bash.policy;
    assert_eq!(policy.allow.len(), p.allow_rules().count() + 1);
    assert_eq!(policy.allow.last().unwrap().as_str(), "cargo test *");
    assert_eq!(policy.deny.len(), p.deny_rules().count() + 1);
    assert_eq!(policy.deny.last().unwrap().as_str(), "git commit *");
    assert_eq!(policy.default, Verdict::Deny);
    assert!(policy.write_redirects, "the preset's write_redirects");
    let text = format!(
        "{MINIMAL}\n[tools.bash]\npreset = \"read-only\"\ndefault = \"allow\"\nwrite_redirects = true\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(
        c.bash.policy.default,
        Verdict::Allow,
        "the config's default wins"
    );
    assert!(
        c.bash.policy.write_redirects,
        "the config's write_redirects wins"
    );
}

#[test]
fn an_unknown_preset_names_the_key_and_the_presets() {
    let text = format!("{MINIMAL}\n[tools.bash]\npreset = \"pyhton-dev\"\n");
    let err = parse(&text, Path::new("/etc/h/harness.toml")).unwrap_err();
    assert_eq!(
        err.problems,
        vec![
            "[tools.bash].preset: unknown preset \"pyhton-dev\" (did you mean \"python-dev\"?); the presets are: python-dev, rust-dev, node-dev, read-only".to_string()
        ]
    );
    assert!(err
        .to_string()
        .starts_with("config /etc/h/harness.toml: 1 problem"));
    assert_eq!(
        problems(&format!("{MINIMAL}\n[tools.bash]\npreset = 3\n")).len(),
        1,
        "a preset that is no string is a type problem"
    );
}

#[test]
fn a_preset_policy_runs_the_examples() {
    let text = format!(
        "{MINIMAL}\n[tools.bash]\npreset = \"python-dev\"\nexamples_allow = [\"python3 reproduce.py\"]\nexamples_deny = [\"pip install requests\"]\n"
    );
    assert_eq!(problems(&text), Vec::<String>::new());
    let text = format!(
        "{MINIMAL}\n[tools.bash]\npreset = \"read-only\"\nexamples_allow = [\"python3 reproduce.py\"]\n"
    );
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("[tools.bash].examples_allow[0]: "),
        "{p:?}"
    );
}

#[test]
fn env_allow_takes_plain_names_never_the_denied_ones_and_files_enable_the_policy_flag() {
    let text = format!(
        "{MINIMAL}\n[tools.bash]\nenv_allow = [\"RUST_BACKTRACE\", \"PYTHONPATH\", \"LD_PRELOAD\", \"A-B\", \"NODE_OPTIONS\"]\n"
    );
    let p = problems(&text);
    assert_eq!(p.len(), 4, "{p:?}");
    for (i, name) in [(1, "PYTHONPATH"), (2, "LD_PRELOAD"), (4, "NODE_OPTIONS")] {
        assert!(
            p.iter().any(|m| m.starts_with(&format!(
                "[tools.bash].env_allow[{i}]: \"{name}\" can never be given"
            ))),
            "{p:?}"
        );
    }
    assert!(
        p.iter()
            .any(|m| m.starts_with("[tools.bash].env_allow[3]: \"A-B\" is not a plain")),
        "{p:?}"
    );
    let text = format!(
        "{MINIMAL}\n[tools.bash]\nenv_allow = [\"RUST_BACKTRACE\", \"NO_COLOR\"]\n[tools.files]\nenabled = true\n"
    );
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!(c.bash.policy.env_allow, ["RUST_BACKTRACE", "NO_COLOR"]);
    assert!(c.bash.policy.file_tools);
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert!(c.bash.policy.env_allow.is_empty() && !c.bash.policy.file_tools);
}

#[test]
fn a_base_url_that_is_the_chat_endpoint_is_refused_with_the_fix() {
    let text = MINIMAL.replace(
        "base_url = \"http://127.0.0.1:4000/v1\"",
        "base_url = \"http://bot:pw-secret@127.0.0.1:4000/v1/chat/completions/\"",
    );
    assert_eq!(
        problems(&text),
        vec![
            "[litellm].base_url: ends in /chat/completions, which harness appends itself: set it to \"http://bot:[redacted]@127.0.0.1:4000/v1\""
                .to_string()
        ]
    );
}

#[test]
fn network_allowlist_reads_its_egress_section() {
    let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
    assert_eq!((c.bash.network, c.bash.egress.is_none()), (false, true));
    let text = MINIMAL.to_string()
        + "[tools.bash]\nnetwork = \"allowlist\"\n[tools.bash.egress]\nallow = [\"PyPI.org.\", \"*.crates.io\", \"pypi.org\"]\npresets = [\"@python\"]\nhosts = \"test-hosts\"\nca_file = \"ca.pem\"\n";
    let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
    assert!(
        !c.bash.network,
        "the allowlist keeps every confinement of no network"
    );
    let e = c.bash.egress.unwrap();
    assert_eq!(
        e.describe(),
        "pypi.org, *.crates.io, files.pythonhosted.org"
    );
    assert!(e.deny_private);
    assert_eq!(e.max_bytes, 512 * 1024 * 1024);
    assert_eq!(e.hosts, Some(PathBuf::from("/etc/h/test-hosts")));
    assert_eq!(e.ca_file, Some(PathBuf::from("/etc/h/ca.pem")));
    let bare = MINIMAL.to_string() + "[tools.bash]\nnetwork = \"allowlist\"\n";
    let e = parse(&bare, Path::new("/etc/h/harness.toml"))
        .unwrap()
        .bash
        .egress
        .unwrap();
    assert_eq!(e.describe(), "no host (the allow list is empty)");
}

#[test]
fn egress_problems_name_the_key_and_the_presets() {
    let text = MINIMAL.to_string()
        + "[tools.bash]\nnetwork = \"allowlist\"\n[tools.bash.egress]\nallow = [\"a.*.com\", \"bücher.de\"]\npresets = [\"@go\"]\nmax_bytes = 10\n";
    assert_eq!(
        parse(&text, Path::new("/etc/h/harness.toml")).unwrap_err().to_string(),
        "config /etc/h/harness.toml: 4 problems\n  - [tools.bash.egress].allow[0]: \"a.*.com\": a wildcard is only allowed as a leading \"*.\"\n  - [tools.bash.egress].allow[1]: \"bücher.de\": only ASCII names are allowed (write an internationalised name in its xn-- form)\n  - [tools.bash.egress].presets[0]: unknown preset \"@go\"; the presets are @python, @rust, @node, @debian\n  - [tools.bash.egress].max_bytes: must be between 1024 and 9223372036854775807, got 10"
    );
    for network in ["false", "true"] {
        let text = MINIMAL.to_string()
            + &format!(
                "[tools.bash]\nnetwork = {network}\n[tools.bash.egress]\nallow = [\"pypi.org\"]\n"
            );
        let problems = problems(&text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("[tools.bash.egress]: only applies with network = \"allowlist\""),
            "{problems:?}"
        );
    }
}

#[test]
fn an_upstream_is_read_and_credentials_refused() {
    let base = MINIMAL.to_string() + "[tools.bash]\nnetwork = \"allowlist\"\n[tools.bash.egress]\n";
    let c = parse(
        &(base.clone() + "upstream = \"http://proxy.corp:3128\"\n"),
        Path::new("/etc/h/harness.toml"),
    )
    .unwrap();
    assert_eq!(
        c.bash.egress.unwrap().upstream,
        Some(("proxy.corp".to_string(), 3128))
    );
    assert_eq!(
        problems(&(base + "upstream = \"http://me:pw@proxy.corp:3128\"\n")),
        vec!["[tools.bash.egress].upstream: \"http://me:pw@proxy.corp:3128\": credentials are not supported (the proxy never adds any)"]
    );
}

#[test]
fn attachment_bounds_and_vision_tiers_are_validated_by_key() {
    let c = parse(
        &format!("{MINIMAL}\n[models.vision]\ntiers = [\"mopac-primary\"]\n[intake]\nmax_attachments = 3\nattachments_dir = \"./in/\"\n"),
        Path::new("/etc/h/harness.toml"),
    )
    .unwrap();
    assert_eq!(c.models.vision, ["mopac-primary".to_string()].into());
    assert_eq!(
        c.attachments,
        AttachmentsConfig {
            max_count: 3,
            dir: "in".into(),
            ..AttachmentsConfig::default()
        }
    );
    assert_eq!(c.bash.attachments.as_deref(), Some("in"));
    // A vision tier is a tier like any other: a model name or a fallback chain.
    let chain = MINIMAL.replace(
        "default_tier",
        "mopac-vision = [\"glm-4.6v\", \"glm-4.5v\"]\ndefault_tier",
    );
    let c = parse(
        &format!("{chain}\n[models.vision]\ntiers = [\"mopac-vision\"]\n"),
        Path::new("/etc/h/harness.toml"),
    )
    .unwrap();
    assert_eq!(c.models.tiers["mopac-vision"], ["glm-4.6v", "glm-4.5v"]);
    assert_eq!(c.models.vision, ["mopac-vision".to_string()].into());
    assert_eq!(
        problems(&format!(
            "{MINIMAL}\n[models.vision]\ntiers = [\"mopac-primary\", \"nope\"]\n[intake]\nmax_attachments = 101\nmax_attachment_bytes = 0\nmax_attachments_total_bytes = 268435457\nattachments_dir = \"../up\"\n"
        )),
        vec![
            "[models.vision].tiers[1]: names tier \"nope\", which [models] does not define",
            "[intake].max_attachments: must be between 0 and 100, got 101",
            "[intake].max_attachment_bytes: must be between 1 and 67108864, got 0",
            "[intake].max_attachments_total_bytes: must be between 1 and 268435456, got 268435457",
            "[intake].attachments_dir: must be a directory relative to the work root, without `..`, got \"../up\"",
        ]
    );
}
