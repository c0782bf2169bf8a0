//! Binary entry: parses the CLI, starts stderr logging, runs [`harness::run`] and maps the
//! outcome to the process exit code. Never reads stdin.

use std::process::ExitCode;

use clap::Parser;
use harness::cli::{normalize_args, Cli};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::{format::Writer, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// `eprintln!` that never panics: a stderr that cannot be written (full, closed) must not
/// turn a run's exit code into a panic's 101.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    // First of all, before any key is read: no other process of this user may read our
    // memory or environment.
    if let Err(e) = harness::secrets::forbid_dumping() {
        say!("harness: warning: cannot mark the process non-dumpable: {e}");
    }
    let args = normalize_args(std::env::args_os());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                // Usage errors are exit 1 here: clap's default 2 means "intake" in this tool.
                _ => 1,
            };
            let _ = e.print();
            if code != 0 {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                harness::usage_error(&args, &e.to_string());
            }
            return ExitCode::from(code);
        }
    };
    // The command spawner is forked now, while the process is small and single-threaded and
    // holds neither config nor key (tools/spawner): only `once` runs commands, and not with
    // `--dry-run`.
    let spawner = matches!(&cli.command, harness::cli::Command::Once(a) if !a.dry_run)
        .then(harness::tools::spawner::start);
    // A file-size limit (`ulimit -f`, a full quota) must fail a write with EFBIG, which the
    // REPORT writer handles (the reply goes to stderr, exit 1), not kill the run with
    // SIGXFSZ (exit 153, no REPORT, a temp file left). Set after the spawner is forked, so
    // the commands it starts keep the default.
    // SAFETY: setting a signal's disposition to SIG_IGN, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let spawner_pid = spawner
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .map(|(_, pid)| *pid);
    // One redactor for the run and its narration: every stderr line passes it.
    let redactor = harness::secrets::Redactor::default();
    init_logging(cli.verbose, redactor.clone());
    quiet_parser_panics();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say!("harness: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async {
        let interrupt = harness::signals::Interrupt::new();
        if let Err(e) = harness::signals::install(interrupt.clone()) {
            say!("harness: cannot install signal handlers: {e}");
            return 1;
        }
        use harness::tools::spawner::Spawner;
        let spawner = match spawner {
            Some(Ok((fd, _))) => Spawner::connect(fd),
            Some(Err(e)) => Spawner::unavailable(format!("cannot start the command spawner: {e}")),
            None => Spawner::unavailable("no command spawner: this run starts no command"),
        };
        match harness::run(cli, interrupt, redactor.clone(), spawner).await {
            Ok(success) => success.code(),
            Err(failure) => {
                // Masked already; masked again here, as every stderr line is.
                say!(
                    "harness: {}",
                    redactor.redact(&format!("{:#}", failure.error))
                );
                failure.stage.code()
            }
        }
    });
    // Don't wait for blocking tasks (a stuck DNS lookup) on the way out.
    runtime.shutdown_background();
    // The runtime's tasks went with it, and with them the last handle on the spawner's
    // socket: the spawner exits now; waiting for it leaves no process of the run behind.
    if let Some(pid) = spawner_pid {
        harness::tools::spawner::reap(pid);
    }
    ExitCode::from(code)
}

/// The gate catches panics inside the shell parser and denies the command; the default hook
/// would still print them. Only those are silenced: any other panic prints as usual.
fn quiet_parser_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let from_parser = info
            .location()
            .is_some_and(|l| l.file().contains("brush-parser"));
        if !from_parser {
            default(info);
        }
    }));
}

fn init_logging(verbose: u8, redactor: harness::secrets::Redactor) {
    let default = match verbose {
        0 => "harness=info",
        1 => "harness=debug",
        _ => "harness=trace,reqwest=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A stderr that cannot be written (`2>/dev/full`) loses narration, nothing else:
        // the subscriber's own complaint about it would panic (exit 101) printing to it.
        .log_internal_errors(false)
        .with_ansi(false)
        .event_format(Narration { redactor })
        .try_init();
}

/// `harness: message` for narration; level and target only where they help. Every line is
/// masked by the run's redactor, whatever stage wrote it.
struct Narration {
    redactor: harness::secrets::Redactor,
}

impl<S, N> FormatEvent<S, N> for Narration
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut visitor = MessageVisitor::default();
        event.record(&mut visitor);
        let meta = event.metadata();
        let prefix = match *meta.level() {
            Level::ERROR => "error: ".to_string(),
            Level::WARN => "warning: ".to_string(),
            Level::INFO => String::new(),
            Level::DEBUG | Level::TRACE => format!(
                "{}: {}: ",
                meta.level().as_str().to_lowercase(),
                meta.target()
            ),
        };
        let line = format!("harness: {prefix}{}{}", visitor.message, visitor.fields);
        writeln!(writer, "{}", self.redactor.redact(&line))
    }
}

#[derive(Default)]
struct MessageVisitor {
    message: String,
    fields: String,
}

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields
                .push_str(&format!(" {}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields
                .push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}
