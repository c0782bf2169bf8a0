//! Signals adapter: SIGINT, SIGTERM, SIGHUP and SIGQUIT in, an [`Interrupt`] that the turn and
//! the bash runner await. The first signal asks the run to stop and write its partial REPORT;
//! a second one exits at once. All four are handled alike: a closed terminal (SIGHUP) or a
//! quit key (SIGQUIT, which would otherwise dump core and skip the REPORT) end the run as
//! cleanly as a SIGTERM, with 128 + the signal.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Shared flag set by the first handled signal.
#[derive(Debug, Default)]
pub struct Interrupt {
    signal: AtomicI32,
    notify: Notify,
    /// Process group of the command running now (0: none). A second signal exits at once,
    /// skipping the runner's own kill, so it kills this group first.
    child_group: AtomicI32,
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

    /// SIGKILLs the recorded command's process group, if one is running.
    fn kill_child_group(&self) {
        let pgid = self.child_group.swap(0, Ordering::SeqCst);
        if pgid > 1 {
            // SAFETY: killpg only sends a signal; a group that is already gone gives ESRCH.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
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

/// Installs the handlers: the first of [`HANDLED`] triggers `interrupt`, a second one exits
/// the process immediately with 128 + signal.
pub fn install(interrupt: Arc<Interrupt>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut quit = signal(SignalKind::quit())?;
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
}
