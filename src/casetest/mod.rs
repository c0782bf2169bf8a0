//! `harness test`, orchestration: the operator's config and the case files (`*.case.toml`)
//! in, one line per case and a summary on stdout out; exit 0 when every case passed.
//!
//! Every case file is read and checked first (PURE [`case::parse`], and the config it makes
//! through [`crate::config::parse_reading`]), so a malformed one is a config error naming the
//! file and the key before any case runs. Each case then runs offline in a temp dir of its
//! own ([`run`]): the real `harness once` path, replies from the case's cassette.

pub(crate) mod case;
pub(crate) mod derive;
pub(crate) mod run;
pub(crate) mod verdict;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::cli::TestArgs;
use crate::emit;
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::secrets::Redactor;
use case::Case;

/// Most cases one `harness test` runs.
pub(crate) const CASES_MAX: usize = 200;
/// What a case file's name ends with.
const SUFFIX: &str = ".case.toml";

/// `harness test [--config F] [CASES...]`.
pub(crate) async fn test_command(
    args: TestArgs,
    redactor: &mut Redactor,
) -> Result<Success, Failure> {
    let config_path = crate::config::config_path(args.config);
    crate::config::load(Some(config_path.clone()), redactor).stage(Stage::Config)?;
    let operator: toml::Table = crate::bounded::read_text(&config_path, crate::bounded::CONFIG_MAX)
        .and_then(|t| t.parse().map_err(anyhow::Error::from))
        .with_context(|| format!("cannot read config {}", config_path.display()))
        .stage(Stage::Config)?;
    let dir = run::case_dir(&config_path);
    let files = discover(&args.cases, &dir).stage(Stage::Usage)?;
    let cases = load_all(&files, &operator, &dir).stage(Stage::Config)?;
    tracing::info!(
        "test: {} under {}, offline",
        counted(cases.len()),
        config_path.display()
    );
    let exe = std::env::current_exe()
        .context("cannot find the harness binary to run the cases with")
        .stage(Stage::Usage)?;
    let mut failed = 0;
    for (file, case) in &cases {
        let line = match run::run(&exe, &operator, &dir, file, case).await {
            Ok(ran) => outcome(case, &ran),
            Err(e) => Some(format!("cannot run: {e:#}")),
        };
        let line = match line {
            None => format!("ok   {}\n", case.name),
            Some(why) => {
                failed += 1;
                format!("FAIL {}: {why}\n", case.name)
            }
        };
        emit(&redactor.redact(&line))?;
    }
    let total = cases.len();
    emit(&format!(
        "{}: {} passed, {failed} failed\n",
        counted(total),
        total - failed
    ))?;
    match failed {
        0 => Ok(Success::Done),
        n => Err(anyhow!("test: {n} of {total} cases failed")).stage(Stage::Config),
    }
}

/// `1 case`, `3 cases`.
fn counted(n: usize) -> String {
    format!("{n} case{}", if n == 1 { "" } else { "s" })
}

/// The failure line of a case's run (`None`: every assertion held); the run's stderr goes
/// to narration when it failed.
fn outcome(case: &Case, ran: &run::Run) -> Option<String> {
    let failures: Vec<String> = match &ran.ran {
        run::Ran::TimedOut => vec![format!(
            "timeout_secs = {}: expected the run to end in time, got still running (stopped)",
            case.timeout_secs
        )],
        run::Ran::Ended(seen) => case
            .asserts
            .iter()
            .filter_map(|a| verdict::check(a, seen))
            .collect(),
    };
    let first = failures.first()?;
    for more in &failures[1..] {
        tracing::warn!("{}: also failed: {more}", case.name);
    }
    if !ran.stderr_tail.is_empty() {
        tracing::info!(
            "{}: the run's stderr ended:\n{}",
            case.name,
            ran.stderr_tail
        );
    }
    Some(match failures.len() {
        1 => first.clone(),
        n => format!("{first} (and {} more)", n - 1),
    })
}

/// The case files: each of `cases` (a file, or a directory's `*.case.toml`), else
/// `tests/*.case.toml` beside the config; sorted within a directory; at most [`CASES_MAX`].
fn discover(cases: &[PathBuf], config_dir: &Path) -> Result<Vec<PathBuf>> {
    let default = [config_dir.join("tests")];
    let named = if cases.is_empty() {
        &default[..]
    } else {
        cases
    };
    let mut out = Vec::new();
    for path in named {
        let meta = std::fs::metadata(path).with_context(|| {
            format!("harness test: no case file or directory {}", path.display())
        })?;
        if meta.is_dir() {
            let mut found = Vec::new();
            for entry in std::fs::read_dir(path)
                .with_context(|| format!("cannot list {}", path.display()))?
            {
                let entry = entry.with_context(|| format!("cannot list {}", path.display()))?;
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.ends_with(SUFFIX))
                {
                    found.push(entry.path());
                }
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(path.clone());
        }
        if out.len() > CASES_MAX {
            bail!("harness test: more than {CASES_MAX} case files; name fewer");
        }
    }
    if out.is_empty() {
        bail!(
            "harness test: no *{SUFFIX} file in {}",
            named
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out)
}

/// Reads and checks every case file, the config it makes and its cassette file; every
/// problem of every file at once.
fn load_all(files: &[PathBuf], operator: &toml::Table, dir: &Path) -> Result<Vec<(PathBuf, Case)>> {
    let mut cases = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        match load_one(file, operator, dir) {
            Ok(case) => cases.push((file.clone(), case)),
            Err(list) => problems.push(format!(
                "case {}:\n  - {}",
                file.display(),
                list.join("\n  - ")
            )),
        }
    }
    if problems.is_empty() {
        Ok(cases)
    } else {
        bail!("{}", problems.join("\n"))
    }
}

fn load_one(file: &Path, operator: &toml::Table, dir: &Path) -> Result<Case, Vec<String>> {
    let text = crate::bounded::read_text(file, case::CASE_MAX)
        .map_err(|e| vec![format!("cannot read: {e:#}")])?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.strip_suffix(SUFFIX).unwrap_or(name);
    let case = case::parse(&text, stem)?;
    if let Some(from) = &case.files_from {
        let dir = run::case_dir(file).join(from);
        if !dir.is_dir() {
            return Err(vec![format!(
                "files_from: {} is not a directory",
                dir.display()
            )]);
        }
    }
    if let case::Replies::File(name) = &case.replies {
        let path = run::case_dir(file).join(name);
        crate::llm::cassette::Replayer::load(&path)
            .map_err(|e| vec![format!("cassette: {e:#}")])?;
    }
    // The config the case's run reads, checked now with stand-in paths: an override that
    // breaks it is this file's problem, named before any case runs.
    let stand_in = derive::Paths {
        work_root: PathBuf::from("/harness-test/work"),
        report_dir: PathBuf::from("/harness-test/reports"),
        cassette: PathBuf::from("/harness-test/cassette.json"),
    };
    let derived = derive::config(operator, dir, &case.config, &case.task, &stand_in)
        .map_err(|e| vec![format!("config: {e:#}")])?;
    let text = toml::to_string(&derived).map_err(|e| vec![format!("config: {e}")])?;
    let read = |p: &Path| crate::bounded::read_text(p, crate::result_schema::SCHEMA_MAX);
    crate::config::parse_reading(&text, &dir.join("harness.toml"), &read).map_err(|e| {
        e.problems
            .iter()
            .map(|p| format!("config (the operator's with this case's [config]): {p}"))
            .collect::<Vec<_>>()
    })?;
    Ok(case)
}
