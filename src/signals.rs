//! Signals adapter: SIGINT, SIGTERM, SIGHUP and SIGQUIT in, an [`Interrupt`] that the turn and
//! the bash runner await. The first signal asks the run to stop and write its partial REPORT;
//! a second one exits at once. All four are handled alike: a closed terminal (SIGHUP) or a
//! quit key (SIGQUIT, which would otherwise dump core and skip the REPORT) end the run as
//! cleanly as a SIGTERM, with 128 + the signal.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Shared flag set by the first handled signal.
#[derive(Default)]
pub struct Interrupt {
    signal: AtomicI32,
    notify: Notify,
    /// Process group of the command running now (0: none). A second signal exits at once,
    /// skipping the runner's own kill, so it kills this group first.
    child_group: AtomicI32,
    /// Run before a second signal exits at once: the event stream's last line.
    last_words: std::sync::Mutex<Option<LastWords>>,
}

/// What runs before a hard exit, with the signal number.
pub type LastWords = Box<dyn Fn(i32) + Send + Sync>;

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt")
            .field("signal", &self.signal)
            .finish_non_exhaustive()
    }
}

impl Interrupt {
    /// A flag that no signal has set yet.
    pub fn new() -> Arc<Interrupt> {
        Arc::new(Interrupt::default())
    }

    /// The signal that was received, if any.
    pub fn received(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Records `signal` and wakes every waiter.
    pub fn trigger(&self, signal: i32) {
        if self
            .signal
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.notify.notify_waiters();
        }
    }

    /// Records the process group of the command now running (`None` once it has ended).
    pub fn set_child_group(&self, pgid: Option<i32>) {
        self.child_group.store(pgid.unwrap_or(0), Ordering::SeqCst);
    }

    /// Sets what runs before a second signal exits the process at once.
    pub fn on_hard_exit(&self, f: LastWords) {
        if let Ok(mut slot) = self.last_words.lock() {
            *slot = Some(f);
        }
    }

    /// Runs the hard-exit hook, if one is set.
    fn say_last_words(&self, signal: i32) {
        if let Ok(slot) = self.last_words.lock() {
            if let Some(f) = slot.as_ref() {
                f(signal);
            }
        }
    }

    /// SIGKILLs the recorded command's process group, if one is running.
    fn kill_child_group(&self) {
        crate::process::kill_group(self.child_group.swap(0, Ordering::SeqCst));
    }

    /// Runs `stage` unless a signal comes first: `Err(signal)` when one was received before
    /// or while it ran (the stage's future is dropped then). The stages before the turn run
    /// under this, so a signal there is honoured at once.
    pub async fn or_signal<F: std::future::Future>(&self, stage: F) -> Result<F::Output, i32> {
        tokio::select! {
            biased;
            signal = self.wait() => Err(signal),
            out = stage => Ok(out),
        }
    }

    /// Resolves with the signal number once one has been received.
    pub async fn wait(&self) -> i32 {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(s) = self.received() {
                return s;
            }
            notified.await;
        }
    }
}

/// The signals that stop a run: each exits with 128 + its number.
pub const HANDLED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The first handled signal, stored by the low-level handler itself (0: none yet).
static ARRIVED: AtomicI32 = AtomicI32::new(0);

/// How many handled signals reached the process, counted by the low-level handler.
static ARRIVALS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How many handled signals have reached the process so far: a synchronous step that
/// started after one (the git steps after an interrupted turn) stops at the next.
pub fn arrivals() -> u32 {
    ARRIVALS.load(Ordering::SeqCst)
}

/// The first handled signal that reached the process, seen at once: the low-level handler
/// stores it, so code that blocks the runtime's one thread (a `cmd:` key ref's program, a
/// synchronous stage) can stop without waiting for the [`Interrupt`] task to run.
pub fn arrived() -> Option<i32> {
    match ARRIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Installs the handlers: the first of [`HANDLED`] triggers `interrupt`, a second one exits
/// the process immediately with 128 + signal.
pub fn install(interrupt: Arc<Interrupt>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut quit = signal(SignalKind::quit())?;
    for sig in HANDLED {
        // SAFETY: the action only does an atomic compare-exchange, which is
        // async-signal-safe; tokio's handler for the same signal still runs (the registry
        // chains them).
        unsafe {
            signal_hook_registry::register(sig, move || {
                let _ = ARRIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                ARRIVALS.fetch_add(1, Ordering::SeqCst);
            })
        }?;
    }
    tokio::spawn(async move {
        loop {
            let sig = tokio::select! {
                _ = int.recv() => libc::SIGINT,
                _ = term.recv() => libc::SIGTERM,
                _ = hup.recv() => libc::SIGHUP,
                _ = quit.recv() => libc::SIGQUIT,
            };
            if interrupt.received().is_some() {
                interrupt.kill_child_group();
                interrupt.say_last_words(sig);
                std::process::exit(128 + sig);
            }
            tracing::warn!(
                "received signal {sig}; stopping the turn (send it again to exit at once)"
            );
            interrupt.trigger(sig);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_sees_a_signal_sent_before_or_after() {
        let i = Interrupt::new();
        let j = i.clone();
        let waiter = tokio::spawn(async move { j.wait().await });
        tokio::task::yield_now().await;
        i.trigger(15);
        i.trigger(2);
        assert_eq!(waiter.await.unwrap(), 15);
        assert_eq!(i.wait().await, 15);
    }

    #[tokio::test]
    async fn or_signal_drops_a_stage_that_a_signal_overtakes() {
        let i = Interrupt::new();
        assert_eq!(i.or_signal(async { 7 }).await, Ok(7));
        let j = i.clone();
        tokio::spawn(async move { j.trigger(1) });
        let never = std::future::pending::<()>();
        assert_eq!(i.or_signal(never).await, Err(1));
        // A signal already received stops even a stage that is ready at once.
        assert_eq!(i.or_signal(async { 7 }).await, Err(1));
    }
}
