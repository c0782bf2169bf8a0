//! Tools adapter: runs an allowed plain pipeline ([`harness_gate::Judgement::plain_argv`])
//! without bash: the very argv the gate judged, each stage `execve`d by harness with the pipes
//! set up here, under the same environment, work dir, sandbox, process group,
//! timeout and output capture as `bash -c`. I/O: PATH look-ups, pipes, process spawns.
//!
//! Only what bash would `execve` as it is comes here: [`plan`] sends to bash every stage whose
//! program is not an ELF file or a `#!` script (bash runs those as scripts itself) and every
//! stage bash would refuse with a message of its own, except a command PATH does not hold at
//! all, which gets bash's `command not found` and status 127.
//!
//! bash runs `echo`, `true`, `false` and `:` as builtins, starting nothing; so does harness
//! ([`Stage::Builtin`]), with bash's reading of `echo`'s options (`-n`, `-e`, `-E`, clustered;
//! a word with anything else is printed). `echo -e` over a backslash goes to bash: its escapes
//! are bash's to decode.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::bash::{supervise, Capture, Ending, Finished, Setting};
use super::spawner::{Child, Job, StageSpec};
use crate::process::{on_path, resolve};

/// What harness does for one stage of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Executes `path` with this argv (`argv[0]` as the gate read it).
    Run { path: PathBuf, argv: Vec<String> },
    /// Starts nothing: prints `message` on the command's stderr and ends with `code`.
    Fails { message: String, code: i32 },
    /// A bash builtin run by harness: writes `stdout` and ends with `code`.
    Builtin { stdout: Vec<u8>, code: i32 },
}

/// `argv` run as bash's builtin of that name, `None` when it is not one harness runs (or a
/// form of it harness does not read: bash runs it).
fn builtin(argv: &[String]) -> Option<Option<Stage>> {
    let done = |stdout: Vec<u8>, code| Some(Some(Stage::Builtin { stdout, code }));
    match argv.first()?.as_str() {
        "true" | ":" => done(Vec::new(), 0),
        "false" => done(Vec::new(), 1),
        "echo" => Some(echo(&argv[1..]).map(|stdout| Stage::Builtin { stdout, code: 0 })),
        _ => None,
    }
}

/// What bash's `echo` (without `xpg_echo`) prints for `words`; `None` for `-e` over a
/// backslash. Leading words of `-` and only `n`, `e`, `E` are options, up to the first that
/// is not; `--` is printed.
fn echo(words: &[String]) -> Option<Vec<u8>> {
    let (mut newline, mut escapes) = (true, false);
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        let Some(flags) = first.strip_prefix('-') else {
            break;
        };
        if flags.is_empty() || !flags.chars().all(|c| matches!(c, 'n' | 'e' | 'E')) {
            break;
        }
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        rest = tail;
    }
    if escapes && rest.iter().any(|w| w.contains('\\')) {
        return None;
    }
    let mut out = rest.join(" ").into_bytes();
    if newline {
        out.push(b'\n');
    }
    Some(out)
}

/// How each stage of `argvs` runs with `path_var` in `work_root`, or `None` when bash must run
/// the command (see the module doc).
pub fn plan(argvs: &[Vec<String>], path_var: &str, work_root: &Path) -> Option<Vec<Stage>> {
    argvs
        .iter()
        .map(|argv| {
            if let Some(stage) = builtin(argv) {
                return stage;
            }
            let name = argv.first()?;
            match resolve(name, path_var, work_root) {
                Some(path) => runnable(&path).then(|| Stage::Run {
                    path,
                    argv: argv.clone(),
                }),
                None if name.contains('/') || on_path(name, path_var, work_root) => None,
                None => Some(Stage::Fails {
                    message: format!("bash: line 1: {name}: command not found\n"),
                    code: 127,
                }),
            }
        })
        .collect()
}

/// Is `path` a program the kernel starts itself: an ELF file or a `#!` script?
fn runnable(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == *b"\x7fELF" || head.starts_with(b"#!"))
}

/// The environment bash gives a program it runs: the scrubbed `env` plus `PWD` (the work
/// dir), `SHLVL` (0 when bash would exec the program itself, 1 in a pipeline) and `_` (the
/// command word when it is a path, else where PATH found it).
fn stage_env(
    env: &[(String, String)],
    work_root: &Path,
    word: &str,
    path: &Path,
    pipeline: bool,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "PWD" | "SHLVL" | "_"))
        .cloned()
        .collect();
    let pwd = work_root
        .canonicalize()
        .unwrap_or_else(|_| work_root.to_path_buf());
    out.push(("PWD".to_string(), pwd.display().to_string()));
    out.push((
        "SHLVL".to_string(),
        if pipeline { "1" } else { "0" }.to_string(),
    ));
    let underscore = if word.contains('/') {
        word.to_string()
    } else {
        path.display().to_string()
    };
    out.push(("_".to_string(), underscore));
    out
}

/// One stage that is started, with the pipe ends it gets.
struct Planned<'a> {
    path: &'a Path,
    argv: &'a [String],
    env: Vec<(String, String)>,
    stdin: Option<OwnedFd>,
    /// `None`: the output pipe.
    stdout: Option<OwnedFd>,
    last: bool,
}

/// Runs `stages` as one pipeline in `work_root` (see the module doc). The ending is the last
/// stage's, as bash's without `pipefail`.
pub async fn run(stages: &[Stage], at: &Setting<'_>) -> Result<Finished> {
    use std::io::Write;
    if let [Stage::Builtin { stdout, code }] = stages {
        let mut output = Capture::new(at.max_output);
        output.push(stdout);
        return Ok(Finished {
            ending: Ending::Exited(*code),
            output,
        });
    }
    let (reader, writer) = std::io::pipe().context("cannot create the output pipe")?;
    let (planned, mut last_failed) = pipe_stages(stages, at, &writer)?;
    let started = start(&planned, &writer, at).await?;
    let mut children = Vec::with_capacity(started.len());
    let mut pgid: Option<i32> = None;
    for (p, outcome) in planned.iter().zip(started) {
        match outcome {
            Ok(child) => {
                pgid.get_or_insert(child.id());
                children.push(child);
            }
            Err(e) => {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                };
                let msg = format!("bash: line 1: {}: {}\n", p.argv[0], strerror(&e));
                let _ = (&writer).write_all(msg.as_bytes());
                if p.last {
                    last_failed = Some(code);
                }
            }
        }
    }
    // Only the children may hold the pipes now, or the read side never sees EOF.
    drop(planned);
    drop(writer);
    supervise(children, pgid, last_failed, reader, at).await
}

/// The stages to start, each with its pipe ends, in order; a stage that starts nothing
/// (`Fails`, `Builtin`) is done here, writing to the output pipe `writer` or the next stage's
/// pipe. Also the ending when the last stage is one of those.
fn pipe_stages<'a>(
    stages: &'a [Stage],
    at: &Setting<'_>,
    // `&PipeWriter` writes through a shared reference; `mut` rebinds only that reference.
    mut writer: &std::io::PipeWriter,
) -> Result<(Vec<Planned<'a>>, Option<i32>)> {
    use std::io::Write;
    let mut planned = Vec::with_capacity(stages.len());
    let mut stdin: Option<OwnedFd> = None;
    let mut last_failed = None;
    let pipeline = stages.len() > 1;
    for (i, stage) in stages.iter().enumerate() {
        let last = i + 1 == stages.len();
        let (next_stdin, stdout) = if last {
            (None, None)
        } else {
            let (r, w) = std::io::pipe().context("cannot create a pipe between commands")?;
            (Some(OwnedFd::from(r)), Some(OwnedFd::from(w)))
        };
        let input = stdin.take();
        stdin = next_stdin;
        match stage {
            Stage::Run { path, argv } => planned.push(Planned {
                path,
                argv,
                env: stage_env(at.env, at.work_root, &argv[0], path, pipeline),
                stdin: input,
                stdout,
                last,
            }),
            Stage::Fails { message, code } => {
                // The pipe holds far more than one line: nobody needs to read it yet.
                let _ = writer.write_all(message.as_bytes());
                if last {
                    last_failed = Some(*code);
                }
            }
            // It reads nothing: the stage before it finds its reader gone, as under bash.
            Stage::Builtin {
                stdout: bytes,
                code,
            } => {
                let to = match stdout {
                    Some(pipe) => pipe,
                    None => {
                        OwnedFd::from(writer.try_clone().context("cannot share the output pipe")?)
                    }
                };
                feed(to, bytes)?;
                if last {
                    last_failed = Some(*code);
                }
            }
        }
    }
    Ok((planned, last_failed))
}

/// Starts every `planned` stage in one request to the spawner (their stderr, and the last
/// one's stdout, on `writer`): each stage's child, or why it did not start.
async fn start(
    planned: &[Planned<'_>],
    writer: &std::io::PipeWriter,
    at: &Setting<'_>,
) -> Result<Vec<std::io::Result<Child>>> {
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let job = Job {
        cwd: at.work_root,
        timeout: at.timeout,
        confine: at.landlock,
        stages: planned
            .iter()
            .map(|p| {
                StageSpec::new(
                    p.path,
                    p.argv.iter().map(|a| a.as_bytes()),
                    &p.env,
                    [
                        p.stdin.as_ref().map(|f| f.as_fd()),
                        Some(p.stdout.as_ref().map_or(writer.as_fd(), |f| f.as_fd())),
                        Some(writer.as_fd()),
                    ],
                )
            })
            .collect(),
    };
    at.spawner
        .spawn(job)
        .await
        .with_context(|| format!("cannot start {}", planned[0].argv[0]))
}

/// Writes a builtin's output into its pipe and closes it; more than the pipe surely holds at
/// once is written by a thread, so the stages after it can start and read.
fn feed(to: OwnedFd, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut pipe = std::fs::File::from(to);
    if bytes.len() <= 512 {
        // A reader gone early is the builtin's SIGPIPE under bash: not the command's ending.
        let _ = pipe.write_all(bytes);
        return Ok(());
    }
    let bytes = bytes.to_vec();
    std::thread::Builder::new()
        .name("builtin-output".to_string())
        .spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
        .context("cannot start a thread for a builtin's output")?;
    Ok(())
}

/// An OS error as bash words it (`Permission denied`), without Rust's `(os error 13)`.
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::Redactor;
    use crate::signals::Interrupt;
    use crate::tools::bash::{self, scrubbed_env, Ending};
    use harness_gate::{judge, Policy, Rule, Verdict};
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    fn env() -> Vec<(String, String)> {
        scrubbed_env(std::env::vars())
    }

    fn path_var(env: &[(String, String)]) -> String {
        env.iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Runs `command` through `bash -c` and, when it is a plain pipeline, directly; returns
    /// both (output, ending), the direct one `None` when bash must run it.
    async fn both(command: &str, dir: &Path) -> ((String, Ending), Option<(String, Ending)>) {
        let env = env();
        let t = Duration::from_secs(20);
        let r = Redactor::default();
        let i = Interrupt::default();
        let spawner = crate::tools::spawner::Spawner::start_here();
        let at = Setting::plain(dir, t, &env, &i, &spawner);
        let b = bash::run(command, &at).await.unwrap();
        let policy = Policy {
            default: Verdict::Allow,
            allow: vec![Rule::parse("*").unwrap()],
            deny: vec![],
            write_redirects: false,
            env_allow: Vec::new(),
            file_tools: false,
            work_root: None,
        };
        let argv = judge(&policy, command).plain_argv();
        let stages = argv.and_then(|a| plan(&a, &path_var(&env), dir));
        let d = match stages {
            Some(stages) => {
                let f = run(&stages, &at).await.unwrap();
                Some((f.output.render(&r), f.ending))
            }
            None => None,
        };
        ((b.output.render(&r), b.ending), d)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn direct_runs_match_bash() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a b.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(
            dir.path().join("run.sh"),
            "#!/bin/sh\necho script \"$@\"\nenv | sort\nexit 4\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("plain.sh"), "echo no shebang\n").unwrap();
        for f in ["run.sh", "plain.sh"] {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.path().join(f);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for (command, direct) in [
            ("cat 'a b.txt'", true),
            ("wc -l 'a b.txt'", true),
            ("ls", true),
            ("ls no-such-file", true),
            ("cat 'a b.txt' | sort | head -n 2", true),
            ("grep -c o \"a b.txt\"", true),
            ("env | sort", true),
            ("sh -c 'echo $0 \"$1\"; exit 3' x y", false),
            ("sh -c 'echo in sh; false'", true),
            ("grep nothing 'a b.txt'", true),
            ("head -c 5 'a b.txt'", true),
            ("sort -r 'a b.txt' | tr a-z A-Z", true),
            ("cat missing-file", true),
            ("/bin/false", true),
            ("env -u HOME sh -c 'echo in env'", true),
            ("yes | head -n 3", true),
            ("ls -la | wc -l", true),
            ("wc -l < 'a b.txt'", false),
            ("false", true),
            ("true x | false", true),
            (": a b", true),
            ("false | true", true),
            ("yes | echo hi", true),
            ("echo hi | cat", true),
            ("true | cat", true),
            ("echo - a", true),
            ("echo -- a", true),
            ("echo -x a", true),
            ("echo -nE 'a\\tb'", true),
            ("echo -e 'a\\tb'", false),
            ("echo -ne x", true),
            ("echo '' -n", true),
            ("X=1 env", false),
            ("no-such-command-xyz arg", true),
            ("no-such-command-xyz | cat", true),
            ("cat 'a b.txt' | no-such-command-xyz", true),
            ("./run.sh a 'b c'", true),
            ("./plain.sh", false),
            ("./no-such-file", false),
            ("echo hi 'a  b'", true),
            ("echo round-1 | wc -c", true),
            ("echo -n hi", true),
            ("echo 'a\\nb'", true),
            ("cd /", false),
            ("pwd", false),
            ("type ls", false),
            ("ls *.txt", false),
        ] {
            let (b, d) = both(command, dir.path()).await;
            assert_eq!(d.is_some(), direct, "{command}");
            if let Some(d) = d {
                assert_eq!(d, b, "{command}");
            }
        }
    }

    /// bash's `echo` against harness's, over seeded random argument lists (options, near
    /// options, backslashes, empty words), alone and in pipelines.
    #[tokio::test(flavor = "multi_thread")]
    async fn echo_is_bash_s_echo() {
        let dir = tempfile::tempdir().unwrap();
        let words = [
            "-n", "-e", "-E", "-", "--", "-nE", "-en", "-neE", "-x", "-nx", "-n-", "--n", "a",
            "'a  b'", "'a\\tb'", "'\\c'", "''", "-N", "'-n '", "' -n'", "é", "'\\'",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut direct = 0;
        for _ in 0..150 {
            let len = next(5);
            let mut command = "echo".to_string();
            for _ in 0..len {
                command.push(' ');
                command.push_str(words[next(words.len())]);
            }
            match next(3) {
                0 => command.push_str(" | od -c"),
                1 => command = format!("printf x | {command} | cat"),
                _ => {}
            }
            let (b, d) = both(&command, dir.path()).await;
            if let Some(d) = d {
                assert_eq!(d, b, "{command}");
                direct += 1;
            }
        }
        assert!(direct > 100, "only {direct} of 150 ran directly");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_builtin_s_long_output_reaches_the_next_stage_whole() {
        let dir = tempfile::tempdir().unwrap();
        let command = format!("echo {} | wc -c", "word ".repeat(20_000));
        let (b, d) = both(&command, dir.path()).await;
        assert_eq!(b.0.trim(), "100000");
        assert_eq!(d, Some(b));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_timeout_kills_every_stage() {
        let dir = tempfile::tempdir().unwrap();
        let env = env();
        let argv = vec![
            vec!["sleep".to_string(), "30".to_string()],
            vec!["cat".to_string()],
        ];
        let stages = plan(&argv, &path_var(&env), dir.path()).unwrap();
        let start = std::time::Instant::now();
        let spawner = crate::tools::spawner::Spawner::start_here();
        let f = run(
            &stages,
            &Setting::plain(
                dir.path(),
                Duration::from_millis(300),
                &env,
                &Interrupt::default(),
                &spawner,
            ),
        )
        .await
        .unwrap();
        assert_eq!(f.ending, Ending::TimedOut);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_command_not_on_path_fails_with_127_without_starting() {
        let dir = tempfile::tempdir().unwrap();
        let stages = plan(
            &[vec!["no-such-command-xyz".to_string()]],
            "/usr/bin:/bin",
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            stages,
            vec![Stage::Fails {
                message: "bash: line 1: no-such-command-xyz: command not found\n".to_string(),
                code: 127
            }]
        );
    }
}
