//! Tools stage: one tool call of the model in, one tool result out. The gate ([`gate`],
//! pure) judges the command, the runner executes what it allows (a plain pipeline directly,
//! [`direct`], the rest with [`bash`]); the file tools
//! ([`files`]) run in-process in a kernel-enforced jail. A denial, a refusal or a bad call is
//! a result for the model, never a failure of the turn.

pub mod bash;
pub mod direct;
pub mod egress;
pub mod files;
pub use harness_gate as gate;
pub mod sandbox;
pub mod shadows;
pub use harness_sandbox::spawner;

use std::path::{Path, PathBuf};

use anyhow::Context;

use serde::Serialize;

use crate::config::{BashConfig, FilesConfig};
use crate::llm::wire::{bash_tool_spec, ToolCall};
use crate::secrets::Redactor;
use crate::signals::Interrupt;
use gate::Verdict;

/// What the bash tool needs to run calls.
#[derive(Debug)]
pub struct BashTool {
    /// `[tools.bash]`.
    pub config: BashConfig,
    /// The directory commands run in.
    pub work_root: PathBuf,
    /// The scrubbed environment commands get.
    pub env: Vec<(String, String)>,
    /// Masks secrets in what commands print.
    pub redactor: Redactor,
    /// The Landlock ruleset every command applies to itself, when the run is confined.
    pub landlock: Option<sandbox::Landlock>,
    /// The ruleset of the operator's success check: the same, but any program may run.
    pub check_landlock: Option<sandbox::Landlock>,
    /// The run's private temp dir (the commands' `TMPDIR`), removed when the tool is dropped.
    pub tmp: tempfile::TempDir,
    /// `read_file`, `write_file`, `edit_file`, when `[tools.files] enabled`.
    pub files: Option<files::FileTools>,
    /// Starts every command's processes.
    pub spawner: spawner::Spawner,
    /// Under an exec set: the thread that keeps commands from running the dynamic loader as
    /// a program (stopped when the tool is dropped).
    pub loader_guard: Option<sandbox::loader::Guard>,
    /// The interpreter shadow files at the top of the work root before the turn (`None`
    /// with `[prompt] writable`): the check refuses to run over ones the turn wrote.
    pub shadows: Option<shadows::Snapshot>,
    /// `network = "allowlist"`: the run's egress proxy (stopped when the tool is dropped).
    pub egress: Option<egress::proxy::Proxy>,
}

/// One handled tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolRun {
    /// The text sent back to the model as the tool result.
    pub result: String,
    /// What happened, for narration and the REPORT.
    pub event: ToolEvent,
    /// What the egress proxy refused while the command ran (`tool.egress_denied`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress_denied: Vec<egress::proxy::Refusal>,
    /// The image `read_image` returned, sent in a user message after the tool results.
    #[serde(skip)]
    pub image: Option<crate::llm::wire::Part>,
}

/// What happened to one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolEvent {
    /// The command ran.
    Ran {
        /// The command as the model sent it.
        command: String,
        /// How it ended (shown as `exit 0`, `signal 9`, `timeout`, `interrupted`).
        ending: bash::Ending,
        /// Bytes the command printed.
        output_bytes: u64,
    },
    /// The gate refused the command.
    Denied {
        /// The command as the model sent it.
        command: String,
        /// Why.
        reason: String,
    },
    /// A file tool did its work.
    File {
        /// `read_file`, `write_file` or `edit_file`.
        tool: String,
        /// The path as the model gave it.
        path: String,
        /// What was done: lines read, bytes written, replacements and the match level.
        summary: String,
    },
    /// A file tool refused the call (the jail, a protected place, an ambiguous, missing or
    /// stale edit, bad arguments); nothing was changed.
    FileRefused {
        /// `read_file`, `write_file` or `edit_file`.
        tool: String,
        /// The path as the model gave it.
        path: String,
        /// Why.
        reason: String,
    },
    /// The call could not be understood (bad JSON, unknown tool) or could not start.
    Invalid {
        /// What was wrong.
        reason: String,
    },
    /// The model ended the turn with `finish`.
    Finished {
        /// `done`, `needs_input`, `blocked` or `failed`.
        status: String,
    },
}

impl ToolEvent {
    /// The event with its command and reason cut to `max` bytes each (head and tail kept),
    /// as the REPORT quotes it: a huge command makes a bounded REPORT.
    pub fn clipped(&self, max: usize) -> ToolEvent {
        use crate::bounded::clip;
        match self {
            ToolEvent::Ran {
                command,
                ending,
                output_bytes,
            } => ToolEvent::Ran {
                command: clip(command, max),
                ending: *ending,
                output_bytes: *output_bytes,
            },
            ToolEvent::Denied { command, reason } => ToolEvent::Denied {
                command: clip(command, max),
                reason: clip(reason, max),
            },
            ToolEvent::File {
                tool,
                path,
                summary,
            } => ToolEvent::File {
                tool: tool.clone(),
                path: clip(path, max),
                summary: clip(summary, max),
            },
            ToolEvent::FileRefused { tool, path, reason } => ToolEvent::FileRefused {
                tool: tool.clone(),
                path: clip(path, max),
                reason: clip(reason, max),
            },
            ToolEvent::Invalid { reason } => ToolEvent::Invalid {
                reason: clip(reason, max),
            },
            ToolEvent::Finished { status } => ToolEvent::Finished {
                status: status.clone(),
            },
        }
    }

    /// Whether the command was interrupted by a signal to the harness.
    pub fn interrupted(&self) -> bool {
        matches!(
            self,
            ToolEvent::Ran {
                ending: bash::Ending::Interrupted,
                ..
            }
        )
    }
}

/// Prefix of the commands' private temp dirs: `harness-tmp-<pid>-<random>`.
const TEMP_DIR_PREFIX: &str = "harness-tmp-";

/// Removes private temp dirs left by runs that were killed (SIGKILL, a second signal): the
/// owning pid is gone and the dir has not changed for ten minutes.
fn sweep_dead_temp_dirs(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let cutoff = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(TEMP_DIR_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let dead = !Path::new(&format!("/proc/{pid}")).exists();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < cutoff);
        if dead && old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The Landlock rulesets of a confined run (`status` says whether it is): the commands', and
/// the success check's, which is another only when the first confines execution.
fn rulesets(
    config: &BashConfig,
    work_root: &Path,
    tmp: &Path,
    tcp: Option<sandbox::unix::supervisor::TcpGuard>,
    status: sandbox::Status,
) -> anyhow::Result<(Option<sandbox::Landlock>, Option<sandbox::Landlock>)> {
    match status {
        sandbox::Status::Landlock { .. } => {
            let config = &sandbox::Settings::from(config);
            let commands = sandbox::Landlock::build(config, work_root, tmp, tcp.clone())?;
            // A second ruleset only when the first confines execution.
            let check = if sandbox::exec::unrestricted_reason(config).is_some() {
                commands.clone()
            } else {
                sandbox::Landlock::build_for_check(config, work_root, tmp, tcp)?
            };
            Ok((Some(commands), Some(check)))
        }
        sandbox::Status::Off | sandbox::Status::Unavailable => Ok((None, None)),
    }
}

/// Under an exec set that names dynamic loaders, what keeps commands from running one as a
/// program: the Unix-socket supervisor's pass, or else a guard thread of its own.
fn loader_guard(
    landlock: Option<&sandbox::Landlock>,
    spawner: &spawner::Spawner,
) -> anyhow::Result<Option<sandbox::loader::Guard>> {
    match landlock {
        Some(l) if !l.loaders().is_empty() => match l.supervised_exec_pass() {
            // The Unix-socket supervisor guards the loader in each command's own filter.
            Some(pass) => {
                spawner
                    .set_pass(pass)
                    .context("cannot keep commands from running the dynamic loader")?;
                Ok(None)
            }
            None => {
                let pass = sandbox::loader::pass();
                let listener = spawner
                    .guard(&sandbox::loader::filter(pass), pass)
                    .context("cannot keep commands from running the dynamic loader")?;
                Ok(Some(sandbox::loader::Guard::start(listener, l.loaders())?))
            }
        },
        _ => Ok(None),
    }
}

/// One call to a tool of a [`BashTool`] (`bash`, a file tool), read from its JSON once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `bash`: the command and the directory to run it in (relative, `` for the root).
    Bash {
        /// The command as the model sent it.
        command: String,
        /// `workdir`, without a trailing `/`.
        workdir: String,
    },
    /// A file tool, whose arguments the file tools read.
    File {
        /// `read_file`, `write_file` or `edit_file`.
        name: String,
        /// Its JSON arguments.
        arguments: String,
    },
}

impl Request {
    /// The command of a `bash` call (the `tool.started` event names it).
    pub fn command(&self) -> Option<&str> {
        match self {
            Request::Bash { command, .. } => Some(command),
            Request::File { .. } => None,
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    /// The directory to run in, relative to the work root (judged like a leading `cd`).
    #[serde(default)]
    workdir: Option<String>,
}

impl BashTool {
    /// Sets the tool up for one run: a private temp dir as `TMPDIR` in the scrubbed `env`
    /// and, when `status` says so, the Landlock ruleset (writes under the work root, the temp
    /// dir and `write_roots`). Fails when the temp dir or the ruleset cannot be made.
    pub fn prepare(
        mut config: BashConfig,
        work_root: PathBuf,
        mut env: Vec<(String, String)>,
        status: sandbox::Status,
        redactor: Redactor,
        spawner: spawner::Spawner,
    ) -> anyhow::Result<BashTool> {
        // The root commands run in (a task's worktree under [workspace]), as `pwd` shows it.
        let real_root = work_root
            .canonicalize()
            .unwrap_or_else(|_| work_root.clone());
        config.policy.work_root = Some(real_root.display().to_string());
        sweep_dead_temp_dirs(&std::env::temp_dir());
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{TEMP_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .context("cannot create the commands' private temp dir")?;
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".to_string(), tmp.path().display().to_string()));
        // The private temp dir is the commands' home too: the operator's is hidden anyway.
        let env = bash::command_env(env, tmp.path(), |k| std::env::var(k).ok(), Path::is_dir);
        let proxy = match &config.egress {
            Some(egress) => Some(egress::start(egress, &status)?),
            None => None,
        };
        let env = match &proxy {
            Some(p) => egress::with_proxy(
                env,
                p.addr(),
                config.egress.as_ref().and_then(|e| e.ca_file.as_deref()),
            ),
            None => env,
        };
        let tcp = proxy.as_ref().map(egress::guard);
        let (landlock, check_landlock) = rulesets(&config, &work_root, tmp.path(), tcp, status)?;
        let loader_guard = loader_guard(landlock.as_ref(), &spawner)?;
        let check_files: Vec<String> = config
            .inputs
            .iter()
            .filter(|(_, what)| what.contains("[check]"))
            .map(|(p, _)| p.clone())
            .collect();
        let shadows =
            (!config.inputs.is_empty()).then(|| shadows::snapshot(&work_root, &check_files));
        Ok(BashTool {
            config,
            work_root,
            env,
            redactor,
            landlock,
            check_landlock,
            tmp,
            files: None,
            spawner,
            loader_guard,
            shadows,
            egress: proxy,
        })
    }

    /// Adds the file tools when `[tools.files] enabled`, jailed in the work root and
    /// protecting what the gate's rules protect. Fails when the work root cannot be opened.
    pub fn with_files(mut self, config: &FilesConfig) -> anyhow::Result<BashTool> {
        if config.enabled {
            let mut tools = files::FileTools::open(
                config.clone(),
                &self.work_root,
                self.config.policy.clone(),
                self.redactor.clone(),
            )?;
            // What commands may never read, the file tools may not either (sandbox or not).
            tools.hide(sandbox::reads::inside_work_root(
                &self.work_root,
                &self.config.never_read,
            ));
            tools.read_only(self.config.inputs.clone());
            if let Some(dir) = &self.config.attachments {
                tools.attachments(dir.clone());
            }
            self.files = Some(tools);
        }
        Ok(self)
    }

    /// Offers `read_image` (images of at most `max_bytes`) beside the file tools, when they
    /// are on: for a tier that sees images.
    pub fn with_images(mut self, max_bytes: u64) -> BashTool {
        if let Some(f) = &mut self.files {
            f.images(max_bytes);
        }
        self
    }

    /// The tools offered to the model: `bash`, then the file tools when enabled.
    pub fn specs(&self) -> Vec<serde_json::Value> {
        let mut specs = vec![bash_tool_spec()];
        if let Some(f) = &self.files {
            specs.extend(files::specs());
            if f.offers(files::READ_IMAGE) {
                specs.push(files::image_spec());
            }
        }
        specs
    }

    /// The system prompt's sentence about the tools.
    pub fn contract(&self, finish: bool) -> String {
        let tools = if self.files.is_some() {
            "You have tools: `bash` runs a single command line in the task's working directory and returns its output and exit status; commands are checked against an allow-list, and a denied command is not run and you get the reason instead. `read_file`, `write_file` and `edit_file` read and change files under the working directory (paths relative to it; dotfiles and .git are off limits, build files are read-only). Prefer the file tools for reading and changing files, and small, read-only commands."
        } else if finish {
            "You have two tools. `bash` runs a single command line in the task's working directory and returns its output and exit status; commands are checked against an allow-list, and a denied command is not run and you get the reason instead. Prefer small, read-only commands."
        } else {
            "You have one tool, `bash`, which runs a single command line in the task's working directory and returns its output and exit status. Commands are checked against an allow-list; a denied command is not run and you get the reason instead. Prefer small, read-only commands."
        };
        if finish {
            format!("{tools} `finish` ends the turn.")
        } else {
            tools.to_string()
        }
    }

    /// Handles one file tool call; its path, result and reason are redacted like bash output.
    fn dispatch_file(&self, files: &files::FileTools, name: &str, arguments: &str) -> ToolRun {
        let done = files.call(name, arguments);
        let (tool, path) = (name.to_string(), self.redactor.redact(&done.path));
        let event = match done.outcome {
            Ok(summary) => ToolEvent::File {
                tool,
                path,
                summary: self.redactor.redact(&summary),
            },
            Err(reason) => ToolEvent::FileRefused {
                tool,
                path,
                reason: self.redactor.redact(&reason),
            },
        };
        ToolRun {
            result: self.redactor.redact(&done.result),
            event,
            egress_denied: Vec::new(),
            image: done.image,
        }
    }

    /// The PATH the commands get.
    fn path_var(&self) -> String {
        crate::process::path_in(&self.env).to_string()
    }

    /// Handles one call: read, gate, run, render the result.
    pub async fn dispatch(&self, call: &ToolCall, interrupt: &Interrupt) -> ToolRun {
        match self.read(call) {
            Ok(request) => self.run(request, interrupt).await,
            Err(reason) => invalid(reason),
        }
    }

    /// Reads a call to one of these tools, its JSON parsed once; `Err` is why it cannot run
    /// (an unknown tool, arguments of the wrong form), for [`invalid`].
    pub fn read(&self, call: &ToolCall) -> Result<Request, String> {
        if self
            .files
            .as_ref()
            .is_some_and(|f| f.offers(&call.function.name))
        {
            return Ok(Request::File {
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            });
        }
        if call.function.name != "bash" {
            let reason = if self.files.is_some() {
                format!(
                    "unknown tool {:?}; the tools are `bash` with arguments {{\"command\": \"...\"}} and {}",
                    call.function.name,
                    files::NAMES.join(", ")
                )
            } else {
                format!(
                    "unknown tool {:?}; the only tool is `bash` with arguments {{\"command\": \"...\"}}",
                    call.function.name
                )
            };
            return Err(reason);
        }
        let arguments = crate::jsontext::lone_surrogates_replaced(&call.function.arguments);
        match serde_json::from_str::<BashArgs>(&arguments) {
            Ok(a) => Ok(Request::Bash {
                command: a.command,
                workdir: a
                    .workdir
                    .unwrap_or_default()
                    .trim_end_matches('/')
                    .to_string(),
            }),
            Err(e) => Err(format!(
                "the arguments are not valid JSON of the form {{\"command\": \"...\"}} ({e}); the command was not run"
            )),
        }
    }

    /// Runs a call [`read`](Self::read) accepted.
    pub async fn run(&self, request: Request, interrupt: &Interrupt) -> ToolRun {
        let (command, workdir) = match request {
            Request::File { name, arguments } => match &self.files {
                Some(files) => return self.dispatch_file(files, &name, &arguments),
                None => return invalid(format!("unknown tool {name:?}")),
            },
            Request::Bash { command, workdir } => (command, workdir),
        };
        let workdir = workdir.as_str();
        let judgement = gate::judge_in(&self.config.policy, workdir, &command);
        // The command as narrated and recorded in the REPORT: a model that echoes a key
        // must not put it into stderr or the round log.
        let shown = self.redactor.redact(&command);
        if let Err(reason) = self.admit(&judgement) {
            return denied(shown, self.redactor.redact(&reason));
        }
        // Unconfined, `/tmp` is the real one: nothing hides it, so nothing is rewritten.
        let run = if self.landlock.is_some() {
            judgement.with_private_tmp(
                &self.tmp.path().display().to_string(),
                &self.real_tmp_places(),
            )
        } else {
            judgement.command.clone()
        };
        let cwd = if workdir.is_empty() {
            self.work_root.clone()
        } else {
            self.work_root.join(workdir)
        };
        let (finished, egress_denied) = self.execute(&judgement, &run, &cwd, interrupt).await;
        match finished {
            Ok(f) => self.ran(f, shown, egress_denied),
            Err(e) => invalid(self.redactor.redact(&format!("{e:#}"))),
        }
    }

    /// Why the command may not run although the gate read it, if it may not (unredacted): the
    /// gate denied it (with its hint), a directory it runs in is no plain directory under the
    /// work root, or a symlink leads a path out of its rule's directory.
    fn admit(&self, judgement: &gate::Judgement) -> Result<(), String> {
        if judgement.verdict == Verdict::Deny {
            return Err(match &judgement.hint {
                Some(h) => format!("{}; try instead: {h}", judgement.reason),
                None => judgement.reason.clone(),
            });
        }
        for dir in &judgement.workdirs {
            real_subdir(&self.work_root, dir)?;
        }
        for (path, prefix) in &judgement.runtime_path_checks {
            // `/tmp/x` (rewritten below) and `$TMPDIR/x` land in the private temp dir.
            match path.strip_prefix("/tmp/").filter(|_| prefix == "/tmp") {
                Some(rest) => stays_under(self.tmp.path(), rest, "."),
                None => stays_under(&self.work_root, path, prefix),
            }?;
        }
        Ok(())
    }

    /// Runs the command line `run` the gate judged, in `cwd`; with what the egress proxy
    /// refused while it ran.
    async fn execute(
        &self,
        judgement: &gate::Judgement,
        run: &str,
        cwd: &Path,
        interrupt: &Interrupt,
    ) -> (anyhow::Result<bash::Finished>, Vec<egress::proxy::Refusal>) {
        // A plain pipeline runs as the gate read it; everything else bash reads again.
        let direct = judgement
            .plain_argv_of(run)
            .and_then(|argv| direct::plan(&argv, &self.path_var(), cwd));
        let at = bash::Setting {
            work_root: cwd,
            timeout: self.config.timeout,
            max_output: self.config.max_output_bytes,
            env: &self.env,
            landlock: self.landlock.as_ref(),
            interrupt,
            spawner: &self.spawner,
        };
        let refused_before = self.egress.as_ref().map_or(0, |p| p.refusal_count());
        let finished = match direct {
            Some(stages) => direct::run(&stages, &at).await,
            None => bash::run(run, &at).await,
        };
        let egress_denied = self
            .egress
            .as_ref()
            .map(|p| p.refusals_from(refused_before))
            .unwrap_or_default();
        (finished, egress_denied)
    }

    /// The result of a command that ran: its output (redacted), a hint when the sandbox
    /// refused it something, each egress refusal, then its status line.
    fn ran(
        &self,
        f: bash::Finished,
        shown: String,
        egress_denied: Vec<egress::proxy::Refusal>,
    ) -> ToolRun {
        let output = f.output.render(&self.redactor);
        let ending = f.ending;
        let status_line = self.status_line(f.ending);
        // A refusal of the sandbox's gets one line saying which root would let it
        // through (or that the path is hidden on purpose), before the status.
        let hint = match (f.ending, &self.landlock) {
            (bash::Ending::Exited(c), Some(l)) => l
                .denied_hint(&output, c, &self.work_root, &self.path_var())
                .map(|h| self.redactor.redact(&h)),
            _ => None,
        };
        let mut body = if output.is_empty() {
            "(no output)\n".to_string()
        } else if output.ends_with('\n') {
            output
        } else {
            format!("{output}\n")
        };
        if let Some(hint) = hint {
            body.push_str(&hint);
            body.push('\n');
        }
        for refusal in &egress_denied {
            body.push_str(&self.redactor.redact(&refusal.line()));
            body.push('\n');
        }
        ToolRun {
            result: format!("{body}{status_line}"),
            event: ToolEvent::Ran {
                command: shown,
                ending,
                output_bytes: f.output.total(),
            },
            egress_denied,
            image: None,
        }
    }

    /// The last line of a command's result: how it ended.
    fn status_line(&self, ending: bash::Ending) -> String {
        match ending {
            bash::Ending::Exited(c) => format!("[exit status: {c}]"),
            bash::Ending::Signaled(s) => format!("[killed by signal {s}]"),
            bash::Ending::TimedOut => format!(
                "[killed: timed out after {}s]",
                self.config.timeout.as_secs()
            ),
            bash::Ending::Interrupted => "[killed: the harness was interrupted]".to_string(),
        }
    }
}

/// The result of a call that could not run: `error: <reason>`.
pub fn invalid(reason: String) -> ToolRun {
    ToolRun {
        result: format!("error: {reason}"),
        event: ToolEvent::Invalid { reason },
        egress_denied: Vec::new(),
        image: None,
    }
}

fn denied(command: String, reason: String) -> ToolRun {
    ToolRun {
        result: format!("denied by the command gate, not run: {reason}"),
        event: ToolEvent::Denied { command, reason },
        egress_denied: Vec::new(),
        image: None,
    }
}

impl BashTool {
    /// The places the operator named (sockets, read, write and exec roots), which a command's
    /// `/tmp/…` words keep naming, also where `/tmp` is the private temp dir.
    fn real_tmp_places(&self) -> Vec<String> {
        let c = &self.config;
        let sockets = c.unix_sockets.iter().filter_map(|s| match s {
            crate::config::SocketName::Path(p) => Some(p.clone()),
            crate::config::SocketName::Abstract(_) => None,
        });
        let reads = c.read_roots.iter().filter_map(|r| match r {
            crate::config::ReadRoot::Path(p) | crate::config::ReadRoot::GitDir(p) => {
                Some(p.clone())
            }
            crate::config::ReadRoot::System => None,
        });
        sockets
            .chain(reads)
            .chain(c.write_roots.iter().cloned())
            .chain(c.exec_roots.iter().cloned())
            .map(|p| p.display().to_string())
            .collect()
    }
}

/// A directory the gate judged a command to run in (`workdir`, a leading `cd DIR`): it must
/// be a directory under the work root reached without a symlink, so that the paths the gate
/// read relative to it (`../x` from it) are the paths the kernel opens.
fn real_subdir(work_root: &Path, rel: &str) -> Result<(), String> {
    let root = work_root
        .canonicalize()
        .map_err(|e| format!("the work root cannot be resolved ({e})"))?;
    let dir = work_root.join(rel);
    match dir.canonicalize() {
        Ok(real) if real == root.join(rel) && real.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{rel:?} is not a plain directory under the working directory (a symlink, or not a directory); refused"
        )),
        Err(e) => Err(format!("the directory {rel:?} cannot be used ({e})")),
    }
}

/// Path-prefix rules are judged on text; symlinks are judged here, at run time: the path
/// must resolve inside the prefix (both taken relative to the work root).
fn stays_under(work_root: &Path, path: &str, prefix: &str) -> Result<(), String> {
    let base = work_root
        .join(prefix)
        .canonicalize()
        .map_err(|e| format!("the rule's directory {prefix:?} cannot be resolved ({e})"))?;
    // A redirect target may not exist yet: then its directory must resolve inside.
    let joined = work_root.join(path);
    let target = match joined.canonicalize() {
        Ok(t) => t,
        // A dangling symlink: writing through it would create its target, wherever that is.
        Err(_)
            if joined
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return Err(format!(
                "{path:?} is a symlink to a path that does not exist yet; refused"
            ))
        }
        Err(_) => match (joined.parent(), joined.file_name()) {
            (Some(dir), Some(name)) => dir
                .canonicalize()
                .map(|d| d.join(name))
                .map_err(|e| format!("{path:?} cannot be resolved ({e})"))?,
            _ => return Err(format!("{path:?} cannot be resolved")),
        },
    };
    if let Ok(rest) = target.strip_prefix(&base) {
        // A symlink must not lead a plain-looking path into a dotfile or .git either.
        let hidden = rest
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        if hidden {
            return Err(format!(
                "{path:?} resolves to a dotfile or into a dot directory such as .git"
            ));
        }
        Ok(())
    } else {
        Err(format!(
            "{path:?} resolves outside {prefix:?} (a symlink leaves the allowed directory)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_may_not_lead_a_write_into_git_or_out_of_the_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join(".git/info")).unwrap();
        std::fs::write(r.join("plain.txt"), "x").unwrap();
        std::os::unix::fs::symlink(r.join(".git/info/exclude"), r.join("out")).unwrap();
        std::os::unix::fs::symlink("/tmp", r.join("away")).unwrap();
        assert!(stays_under(r, "plain.txt", ".").is_ok());
        assert!(stays_under(r, "new-file.txt", ".").is_ok());
        let err = stays_under(r, "out", ".").unwrap_err();
        assert!(err.contains("does not exist yet"), "{err}");
        std::fs::write(r.join(".git/info/exclude"), "").unwrap();
        let err = stays_under(r, "out", ".").unwrap_err();
        assert!(err.contains("dot directory"), "{err}");
        let err = stays_under(r, "away/x", ".").unwrap_err();
        assert!(err.contains("resolves outside"), "{err}");
    }

    #[test]
    fn dead_runs_temp_dirs_are_swept_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        let dead = parent
            .path()
            .join(format!("{TEMP_DIR_PREFIX}999999999-abc"));
        let live = parent
            .path()
            .join(format!("{TEMP_DIR_PREFIX}{}-abc", std::process::id()));
        let fresh_dead = parent
            .path()
            .join(format!("{TEMP_DIR_PREFIX}999999998-abc"));
        for d in [&dead, &live, &fresh_dead] {
            std::fs::create_dir(d).unwrap();
        }
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for d in [&dead, &live] {
            std::fs::File::open(d).unwrap().set_modified(old).unwrap();
        }
        sweep_dead_temp_dirs(parent.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(fresh_dead.exists(), "recent dirs are kept");
    }
}
