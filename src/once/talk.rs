//! `harness once`, the conversation: the system prompt built from the config and the work
//! root's instructions, then one turn (a plain task) or the stages of a workflow
//! ([`super::stages`]); what the rest of the run reads is one [`Talked`].

use std::path::Path;

use crate::config::Config;
use crate::events::Events;
use crate::intake::Task;
use crate::llm::Backend;
use crate::routing::Route;
use crate::secrets::Redactor;
use crate::session::Opened;
use crate::signals::Interrupt;
use crate::tools::BashTool;
use crate::workflow::state::Mark;
use crate::{prompt, session, turn};

/// What every turn of this run is built from.
pub(super) struct Talk<'a> {
    pub(super) cfg: &'a Config,
    pub(super) route: &'a Route,
    pub(super) limits: &'a turn::Limits,
    pub(super) bash: Option<&'a BashTool>,
    pub(super) interrupt: &'a Interrupt,
    pub(super) events: &'a Events,
    /// Where `AGENTS.md` and the skills dir are read from.
    pub(super) instructions: &'a Path,
    pub(super) world: turn::rules::World,
    pub(super) redactor: &'a Redactor,
}

impl Talk<'_> {
    /// harness's system prompt for a turn of `max_rounds`, with the project's instructions
    /// and skills.
    pub(super) fn system(&self, max_rounds: u32) -> String {
        let cfg = self.cfg;
        let system =
            turn::system_prompt(&cfg.vertical, max_rounds, self.bash, cfg.finish, self.world);
        let system = prompt::with_project_instructions(
            system,
            self.instructions,
            &cfg.prompt,
            self.redactor,
        );
        prompt::with_skills(system, self.instructions, &cfg.prompt, self.redactor)
    }

    /// One bounded turn from `start`.
    pub(super) async fn turn(
        &self,
        start: Vec<crate::llm::wire::Message>,
        route: &Route,
        limits: &turn::Limits,
        backend: &mut Backend,
    ) -> turn::Turn {
        turn::run(
            start,
            route,
            limits,
            backend,
            self.bash,
            self.interrupt,
            self.events,
        )
        .await
    }
}

/// The conversation of a run, as the REPORT and the session take it.
pub(super) struct Talked {
    /// The turn; for a workflow, every attempt's rounds and spend in one, ending as the
    /// workflow did.
    pub(super) turn: turn::Turn,
    /// The fingerprint of the (last) system prompt.
    pub(super) system_hash: String,
    /// A workflow run: the REPORT's `workflow:` and where the task stands for the session.
    pub(super) workflow: Option<(serde_json::Value, Mark)>,
}

/// A plain task: one turn, continuing the task's session.
pub(super) async fn one_turn(
    talk: &Talk<'_>,
    backend: &mut Backend,
    task: &Task,
    opened: Option<&Opened>,
) -> Talked {
    let system =
        turn::check::with_note(talk.system(talk.cfg.max_rounds), talk.limits.check.as_ref());
    let system_hash = session::history::fingerprint(&system);
    let start = session::start(opened, system, &task.prompt);
    Talked {
        turn: talk.turn(start, talk.route, talk.limits, backend).await,
        system_hash,
        workflow: None,
    }
}
