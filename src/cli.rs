//! CLI stage, PURE: the command line in, a parsed [`Cli`] out. The help text here is the CLI
//! reference. Single-dash long flags of the original Go tool (`-config`, `-dry-run`, ...) are
//! rewritten to their double-dash spelling before clap sees them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Flags for `harness once`:
  --config PATH    config file (default $HARNESS_CONFIG, then ./harness.toml)
  --dry-run        intake + routing + plan only: no LLM call, no REPORT
  --demo           run the [demo] issue instead of the task sources (Redmine, inbox)
  --task-id ID     run only the task/issue with this id
  --replay FILE    serve model replies from a recorded cassette (no network, no key)
  --record FILE    save this run's model replies as a cassette
  --force          with --task-id: run the issue even when it is out of scope
  --fresh          ignore the task's stored session and start a new conversation
  --resume RUN_ID  continue the task's session from that run (unknown run: exit 2)
  --events PATH    append the run's JSONL event stream to PATH (`-`: stdout, which then
                   carries only events; the REPORT path is in the last one, run.completed)
  --output FORMAT  path (default): the REPORT path on stdout; json: one JSON object on every
                   way the run ends (run_id, outcome, exit_code, report, result, pr_url,
                   tokens, cost_usd); not with --dry-run or --events -
  (the single-dash spellings -config, -dry-run, -demo, -task-id are accepted too)

`harness test [--config PATH] [CASES...]` runs declarative cases (`*.case.toml`; default
  tests/ beside the config) offline: each case's task, workspace files and scripted model
  replies (a cassette) go through `harness once --demo --replay` in a temp dir, and its
  [[assert]] list (exit_code, stop_reason, finish_status, check_passed, report_contains,
  tool_called, command_denied, stage_reached) is checked from the exit code, the events and
  the REPORT. One line per case (`ok   NAME` / `FAIL NAME: ...`), then a summary; exit 0
  when every case passed, 1 when one failed or a case file is malformed.

Exit codes:
  0  ok (including \"no tasks in scope\", nothing new on a finished task, and finish
     needs_input; `gate`: command allowed)
  1  usage / config / routing / writeback error; also a result that cannot be written to
     stdout (not a closed pipe), a REPORT that cannot be written (its text goes to stderr),
     `gate` with an empty command, `writeback` with an invalid REPORT
  2  intake error (also --resume with an unknown run)
  3  `gate`: command denied
  4  llm / turn error (a partial REPORT is written when the model was reached)
  5  task not accomplished: finish blocked/failed, the success check never passed, the
     last round's finish result did not match [finish] result_schema (result_invalid), or
     a workflow stage failed to the end (stage_failed); the REPORT and the write-back are done
  129, 130, 131, 143  interrupted by SIGHUP / SIGINT / SIGQUIT / SIGTERM: during the turn a
     partial REPORT is written; before the turn nothing is claimed, posted or written

Results go to stdout (the REPORT path, the PLAN, a gate verdict); narration and logs go to
stderr (-v for debug, or RUST_LOG). harness never reads stdin.";

/// `harness`: one bounded turn of an LLM agent per invocation.
#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "Runs ONE bounded turn of an LLM agent: intake -> routing -> turn -> REPORT, then exits",
    after_help = AFTER_HELP,
    arg_required_else_help = true,
    propagate_version = true
)]
pub struct Cli {
    /// More narration on stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run ONE conductor iteration (intake, routing, one bounded turn, REPORT), then exit.
    Once(OnceArgs),
    /// Judge a bash command under the config's [tools.bash] rules (exit 0 allowed, 3 denied).
    Gate(GateArgs),
    /// Retry what an existing REPORT file still owes: its pending pull request (`[forge]`),
    /// then its Redmine write-back (note + status); idempotent.
    Writeback(WritebackArgs),
    /// Run every no-cost check (config, key refs, report dir, gate, proxy and models,
    /// Redmine) and print a checklist (exit 0 all ok, 1 otherwise). Sends no completion.
    Check(CheckArgs),
    /// List the tasks in scope of every configured source, routed; nothing is claimed.
    Scope(ScopeArgs),
    /// Run declarative test cases (`*.case.toml`) offline through the real `once` path and
    /// check their assertions (exit 0 all passed, 1 otherwise).
    Test(TestArgs),
    /// Print the version.
    Version,
}

/// Flags of `harness scope`.
#[derive(Debug, Args, Clone)]
pub struct ScopeArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print one JSON object (`count`, `tasks`) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `harness test`.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Case files or directories of `*.case.toml` (default: `tests/` beside the config).
    #[arg(value_name = "CASES")]
    pub cases: Vec<PathBuf>,
}

/// Flags of `harness check`.
#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Flags of `harness writeback`.
#[derive(Debug, Args, Clone)]
pub struct WritebackArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The REPORT file to post.
    #[arg(value_name = "REPORT_FILE")]
    pub report: PathBuf,
}

/// Flags of `harness once`.
#[derive(Debug, Args, Clone, Default)]
pub struct OnceArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Intake, routing and the PLAN only: no LLM call, no REPORT.
    #[arg(long)]
    pub dry_run: bool,
    /// Run the [demo] issue instead of the task sources ([redmine], [inbox]).
    #[arg(long)]
    pub demo: bool,
    /// Run only the task/issue with this id.
    #[arg(long, value_name = "ID")]
    pub task_id: Option<String>,
    /// With --task-id: run the issue even when it is not in the released scope.
    #[arg(long, requires = "task_id")]
    pub force: bool,
    /// Serve model replies from this cassette instead of HTTP (overrides [litellm].replay).
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub replay: Option<PathBuf>,
    /// Save this run's model replies as a cassette that --replay can serve.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Ignore the task's stored session: start the conversation fresh (it is replaced).
    #[arg(long, conflicts_with = "resume")]
    pub fresh: bool,
    /// Continue the task's session from this run (a run id from a REPORT); later runs are
    /// left out. An id the session does not have is an intake error (exit 2).
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,
    /// Append the JSONL event stream to PATH (`-`: stdout, which then carries only events).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
    /// What stdout carries: `path` (the REPORT path) or `json` (one JSON object: run id,
    /// outcome, exit code, REPORT path, result, PR URL, tokens, cost).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value_t,
        conflicts_with = "dry_run"
    )]
    pub output: Output,
}

/// `harness once --output`: what stdout carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Output {
    /// The REPORT path (none when no REPORT is written).
    #[default]
    Path,
    /// One JSON object, on every way the run ends (the keys: docs/cli.md#output-json).
    Json,
}

/// Flags of `harness gate`.
#[derive(Debug, Args, Clone)]
pub struct GateArgs {
    /// Config file (default $HARNESS_CONFIG, then ./harness.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// A `[tools.bash]` preset (python-dev, rust-dev, node-dev, read-only): print its rules,
    /// or judge COMMAND under the preset alone; no config is read.
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    pub preset: Option<String>,
    /// The command, as one argument, exactly as a model would send it (put it after `--`).
    #[arg(value_name = "COMMAND", required_unless_present = "preset")]
    pub command: Option<String>,
}

/// The single-dash long flags the original tool accepted.
const SINGLE_DASH: &[&str] = &[
    "config", "dry-run", "demo", "task-id", "replay", "record", "events", "json", "help", "version",
];

/// Rewrites `-config X` / `-config=X` style flags to `--config`, up to a `--`.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    for arg in args {
        if passthrough {
            out.push(arg);
            continue;
        }
        let rewritten = arg.to_str().and_then(|s| {
            if s == "--" {
                return None;
            }
            let rest = s.strip_prefix('-').filter(|r| !r.starts_with('-'))?;
            let name = rest.split_once('=').map_or(rest, |(n, _)| n);
            SINGLE_DASH
                .contains(&name)
                .then(|| OsString::from(format!("-{s}")))
        });
        if arg == "--" {
            passthrough = true;
        }
        out.push(rewritten.unwrap_or(arg));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from))
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    #[test]
    fn single_dash_flags_become_double_dash() {
        assert_eq!(
            norm(&[
                "harness",
                "once",
                "-config",
                "h.toml",
                "-dry-run",
                "-demo",
                "-task-id=7"
            ]),
            vec![
                "harness",
                "once",
                "--config",
                "h.toml",
                "--dry-run",
                "--demo",
                "--task-id=7"
            ]
        );
    }

    #[test]
    fn short_flags_and_after_double_dash_are_untouched() {
        assert_eq!(
            norm(&["harness", "-v", "gate", "--", "-demo"]),
            vec!["harness", "-v", "gate", "--", "-demo"]
        );
    }

    #[test]
    fn parses_once() {
        let cli = Cli::try_parse_from(norm(&["harness", "once", "-demo", "--dry-run"])).unwrap();
        match cli.command {
            Command::Once(a) => assert!(a.demo && a.dry_run),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gate_takes_the_command_after_double_dash() {
        let cli =
            Cli::try_parse_from(["harness", "gate", "--json", "--", "ls -la | wc -l"]).unwrap();
        match cli.command {
            Command::Gate(g) => {
                assert!(g.json);
                assert_eq!(g.command.as_deref(), Some("ls -la | wc -l"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gate_needs_a_command_unless_a_preset_is_named() {
        assert!(Cli::try_parse_from(["harness", "gate", "--json"]).is_err());
        let cli = Cli::try_parse_from(["harness", "gate", "--preset", "read-only"]).unwrap();
        match cli.command {
            Command::Gate(g) => {
                assert_eq!(g.preset.as_deref(), Some("read-only"));
                assert_eq!(g.command, None);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["harness", "gate", "--preset", "x", "--config", "c", "--", "ls"])
                .is_err(),
            "a preset is judged alone: no config with it"
        );
    }

    #[test]
    fn test_takes_cases_after_the_config() {
        let cli = Cli::try_parse_from([
            "harness",
            "test",
            "--config",
            "h.toml",
            "a.case.toml",
            "tests",
        ])
        .unwrap();
        match cli.command {
            Command::Test(t) => {
                assert_eq!(t.config, Some(PathBuf::from("h.toml")));
                assert_eq!(
                    t.cases,
                    vec![PathBuf::from("a.case.toml"), PathBuf::from("tests")]
                );
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["harness", "test"]).unwrap();
        assert!(
            matches!(cli.command, Command::Test(t) if t.cases.is_empty() && t.config.is_none())
        );
    }

    #[test]
    fn unknown_flags_are_errors() {
        assert!(Cli::try_parse_from(["harness", "once", "--bogus"]).is_err());
        assert!(Cli::try_parse_from(["harness", "twice"]).is_err());
    }
}
