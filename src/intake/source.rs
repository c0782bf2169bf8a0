//! Intake stage, PURE vocabulary: the one trait every task source implements ([`Source`]:
//! take one task, claiming it; list the tasks in scope, claiming nothing) and the values it
//! trades in. A new tracker is one module that implements it; `intake::sources` lists the
//! configured ones in `[intake] order`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use super::{TakeError, Task};
use crate::signals::Interrupt;

/// A boxed future: the trait's methods are async and the sources sit in one list.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Routing, asked by a source for the task it chose (before or right after claiming it).
pub(crate) type RouteFn<'a, R> = &'a dyn Fn(&Task) -> anyhow::Result<R>;

/// What this run asks intake for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Want<'a> {
    /// A signal stops intake before a claim is taken.
    pub interrupt: &'a Interrupt,
    /// This run's id (claims carry it).
    pub run_id: &'a str,
    /// `--task-id`: only this task.
    pub task_id: Option<&'a str>,
    /// `--force`: the task even when out of scope (where the source can tell).
    pub force: bool,
    /// Claim the task (false for a dry run, or where claiming is off).
    pub claim: bool,
    /// A directory for local locks (the report dir).
    pub lock_dir: &'a Path,
}

/// What a run holds on its task until the run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// A Redmine issue claimed by a note.
    Redmine(u64),
    /// An inbox file renamed into `claimed/`.
    Inbox(Claimed),
}

/// An inbox task file this run holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// The inbox directory.
    pub dir: PathBuf,
    /// The task id (the file's stem).
    pub stem: String,
    /// The claimed file, `claimed/<stem>--<run_id>.md`.
    pub path: PathBuf,
}

/// The task a source chose, routed, and its claim.
#[derive(Debug, Clone)]
pub(crate) struct Picked<R> {
    /// The task.
    pub task: Task,
    /// Its route.
    pub route: R,
    /// The claim this run holds (`None`: nothing claimed).
    pub claim: Option<Claim>,
    /// The Redmine issue as intake read it last (its journals say what is new).
    pub issue: Option<crate::redmine::issue::Issue>,
}

/// A task in scope, and its route or why it has none.
#[derive(Debug, Clone)]
pub(crate) struct Scoped<R> {
    /// The task.
    pub task: Task,
    /// Its route, or the routing error.
    pub route: Result<R, String>,
}

/// A task source.
pub(crate) trait Source<R> {
    /// Chooses this run's task and, with `want.claim`, claims it; `None` when the source
    /// has nothing for this run.
    fn take<'a>(
        &'a self,
        want: &'a Want<'a>,
        route: RouteFn<'a, R>,
    ) -> BoxFuture<'a, Result<Option<Picked<R>>, TakeError>>;

    /// The tasks in scope, each routed; nothing claimed, nothing moved.
    fn scope<'a>(&'a self, route: RouteFn<'a, R>) -> BoxFuture<'a, anyhow::Result<Vec<Scoped<R>>>>;
}
