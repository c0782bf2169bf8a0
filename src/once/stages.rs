//! `harness once`, a workflow task: where the task stands (the session's last mark), then
//! one stage (`per_run = "stage"`) or every stage left (`"all"`), each attempt its own
//! bounded turn on the stage's tier with the skill's prompt, judged by the stage's check or
//! the model's verdict, retried with the reason, and the step the workflow takes next.
//! Events `stage.started` / `stage.completed` out; one [`Talked`] for the REPORT.

use serde_json::{json, Value};

use super::talk::{Talk, Talked};
use crate::attachments;
use crate::config::{PerRun, Workflow, Workflows};
use crate::events::Event;
use crate::intake::Task;
use crate::llm::wire::Message;
use crate::llm::Backend;
use crate::routing::Route;
use crate::session::history::Opening;
use crate::session::Opened;
use crate::turn::{Turn, TurnOutcome};
use crate::workflow::prompt;
use crate::workflow::route::Choice;
use crate::workflow::state::{self, Mark, Outcome, Step};

/// The most of a failure's text a retry and the REPORT quote, in bytes.
const REASON_MAX: usize = 4096;

/// How the stages of this run went, attempt by attempt.
struct Ran {
    turns: Vec<Turn>,
    attempts: Vec<Value>,
    last_system: String,
}

/// The conversation of this run: the workflow's stages, or one turn.
pub(super) async fn converse(
    talk: &Talk<'_>,
    backend: &mut Backend,
    task: &Task,
    opened: Option<&Opened>,
) -> Talked {
    let chosen = talk.route.workflow.as_ref().and_then(|c| {
        let flows = talk.cfg.workflows.as_ref()?;
        Some((c, flows, flows.named.get(&c.workflow)?))
    });
    match chosen {
        Some((choice, flows, flow)) => run(talk, flows, flow, choice, backend, task, opened).await,
        None => super::talk::one_turn(talk, backend, task, opened).await,
    }
}

/// Runs the stages of this run of `choice`'s workflow.
pub(super) async fn run(
    talk: &Talk<'_>,
    workflows: &Workflows,
    workflow: &Workflow,
    choice: &Choice,
    backend: &mut Backend,
    task: &Task,
    opened: Option<&Opened>,
) -> Talked {
    let last = opened.and_then(|o| {
        o.stored
            .runs
            .iter()
            .rev()
            .find_map(|r| r.workflow.as_deref())
    });
    let at = state::position(workflow, last);
    let mut walk = Walk {
        carried_from: last
            .filter(|m| m.workflow == workflow.name && m.next == Some(at.index))
            .map(|m| m.stage.clone()),
        index: at.index,
        loops: at.loops,
        carried: at.carried,
        news: opened.and_then(news_of),
    };
    let mut ran = Ran {
        turns: Vec::new(),
        attempts: Vec::new(),
        last_system: String::new(),
    };
    let (step, stage_index, outcome, reason) = walk
        .stages(talk, workflows, workflow, backend, task, &mut ran)
        .await;
    let stage = &workflow.stages[stage_index];
    let mark = Mark {
        workflow: workflow.name.clone(),
        stage: stage.name.clone(),
        index: stage_index,
        outcome,
        loops: walk.loops,
        next: next_of(&step, stage_index),
        carried: match &step {
            Step::Next { .. } => walk.carried.clone(),
            // the same stage runs again: with the input it had
            _ => at_input(last, workflow, stage_index),
        },
    };
    let record = record(workflows, workflow, choice, &mark, opened, &ran.attempts);
    let last_system = std::mem::take(&mut ran.last_system);
    let turn = merge(
        ran.turns,
        &step,
        reason.as_deref(),
        stage,
        opened,
        &last_system,
        talk.route,
    );
    Talked {
        turn,
        system_hash: crate::session::history::fingerprint(&last_system),
        workflow: Some((record, mark)),
    }
}

/// Where this run is in the workflow, stage to stage.
struct Walk {
    index: usize,
    loops: u32,
    carried: Option<String>,
    carried_from: Option<String>,
    /// What is new on the task: for the first stage of this run only.
    news: Option<String>,
}

impl Walk {
    /// The stages of this run: one, or with `per_run = "all"` every stage until the
    /// workflow ends. Returns the last step, the stage it followed, how that stage ended
    /// and why.
    async fn stages(
        &mut self,
        talk: &Talk<'_>,
        workflows: &Workflows,
        workflow: &Workflow,
        backend: &mut Backend,
        task: &Task,
        ran: &mut Ran,
    ) -> (Step, usize, Outcome, Option<String>) {
        loop {
            let inputs = prompt::Inputs {
                carried: self.carried.as_deref(),
                carried_from: self.carried_from.as_deref(),
                retry_reason: None,
                news: self.news.as_deref(),
            };
            let (outcome, reason) =
                stage(talk, backend, workflow, self.index, task, &inputs, ran).await;
            self.news = None;
            let step = state::step(
                workflow,
                self.index,
                outcome,
                self.loops,
                workflows.max_loops,
            );
            let Step::Next {
                index: next,
                looped,
            } = step
            else {
                return (step, self.index, outcome, reason);
            };
            self.loops += u32::from(looped);
            self.carried = ran.turns.last().map(|t| state::carried(&summary(t)));
            self.carried_from = Some(workflow.stages[self.index].name.clone());
            let done = std::mem::replace(&mut self.index, next);
            if workflows.per_run == PerRun::Stage {
                return (step, done, outcome, reason);
            }
        }
    }
}

/// The stage the next run starts with after `step`; `None` when the workflow ended.
fn next_of(step: &Step, index: usize) -> Option<usize> {
    match step {
        Step::Next { index, .. } => Some(*index),
        Step::Parked | Step::Stopped => Some(index),
        Step::Done | Step::Failed => None,
    }
}

/// The input a stage that runs again had: the carried summary of the mark it started from.
fn at_input(last: Option<&Mark>, workflow: &Workflow, index: usize) -> Option<String> {
    last.filter(|m| m.workflow == workflow.name && m.next == Some(index))
        .and_then(|m| m.carried.clone())
}

/// What every attempt of a stage runs with.
struct Prepared {
    route: Route,
    limits: crate::turn::Limits,
    system: String,
    /// The listing for every stage; the images only for a stage whose tier sees them.
    attached: attachments::Attached,
}

/// The stage's tier, bounds, check and system prompt.
fn prepare(talk: &Talk<'_>, workflow: &Workflow, index: usize) -> Prepared {
    let spec = &workflow.stages[index];
    let route = talk.route.for_tier(&talk.cfg.models, spec.tier.as_deref());
    let last_stage = index + 1 == workflow.stages.len();
    let limits = crate::turn::Limits {
        max_rounds: spec.max_rounds.unwrap_or(talk.limits.max_rounds),
        check: spec.check.clone(),
        // The workflow's result is its last stage's.
        result: talk.limits.result.clone().filter(|_| last_stage),
        ..talk.limits.clone()
    };
    let system = prompt::system(&talk.system(limits.max_rounds), workflow, index);
    let attached = attachments::Attached {
        listed: talk.attached.listed.clone(),
        images: if route.vision {
            talk.attached.images.clone()
        } else {
            Vec::new()
        },
    };
    Prepared {
        route,
        limits,
        system,
        attached,
    }
}

/// Every attempt of stage `index` in this run: until it passes, parks, stops, or has no
/// retry left. Returns how it ended and why, when it did not pass.
async fn stage(
    talk: &Talk<'_>,
    backend: &mut Backend,
    workflow: &Workflow,
    index: usize,
    task: &Task,
    inputs: &prompt::Inputs<'_>,
    ran: &mut Ran,
) -> (Outcome, Option<String>) {
    let spec = &workflow.stages[index];
    let Prepared {
        route,
        limits,
        system,
        attached,
    } = prepare(talk, workflow, index);
    let mut reason: Option<String> = None;
    let mut outcome = Outcome::Stopped;
    for attempt in 1..=spec.retries + 1 {
        talk.events.emit(Event::StageStarted {
            workflow: workflow.name.clone(),
            stage: spec.name.clone(),
            index: index + 1,
            stages: workflow.stages.len(),
            attempt,
            tier: route.tier.clone(),
            model: route.model().to_string(),
        });
        let user = prompt::user(
            &task.prompt,
            workflow,
            index,
            attempt,
            &prompt::Inputs {
                retry_reason: reason.as_deref(),
                ..inputs.clone()
            },
        );
        let start = vec![
            Message::System {
                content: system.clone(),
            },
            Message::User {
                content: user.into(),
            },
        ];
        let start = attachments::into_opening(start, &attached);
        let turn = talk.turn(start, &route, &limits, backend).await;
        let (ended, why) = judge(&turn, limits.max_rounds);
        let why = why.map(|w| crate::bounded::clip(&talk.redactor.redact(&w), REASON_MAX));
        talk.events.emit(Event::StageCompleted {
            workflow: workflow.name.clone(),
            stage: spec.name.clone(),
            index: index + 1,
            attempt,
            outcome: ended.as_str().to_string(),
            reason: why.clone(),
        });
        ran.attempts.push(attempt_record(
            &spec.name,
            index,
            attempt,
            ended,
            why.as_deref(),
            (&route.tier, limits.max_rounds),
            &turn,
        ));
        ran.turns.push(turn);
        ran.last_system = system.clone();
        outcome = ended;
        reason = why;
        if outcome != Outcome::Failed {
            break;
        }
    }
    (outcome, reason.filter(|_| outcome != Outcome::Passed))
}

/// How an attempt's turn ended, for its stage, and why when it did not pass.
fn judge(turn: &Turn, max_rounds: u32) -> (Outcome, Option<String>) {
    match &turn.outcome {
        TurnOutcome::Completed => (Outcome::Passed, None),
        TurnOutcome::NeedsInput => (Outcome::NeedsInput, None),
        TurnOutcome::AgentFailed { status } => (
            Outcome::Failed,
            Some(format!(
                "the model ended the stage with `finish` {}: {}",
                status.as_str(),
                summary(turn)
            )),
        ),
        TurnOutcome::MaxRounds => (
            Outcome::Failed,
            Some(format!(
                "the stage used its {max_rounds} rounds without calling `finish`"
            )),
        ),
        TurnOutcome::CheckFailed => (
            Outcome::Failed,
            Some(turn.check.as_ref().map_or_else(
                || "the check failed".to_string(),
                |c| {
                    format!(
                        "the check `{}` ended with {}; its output:\n```\n{}\n```",
                        c.command,
                        c.last_ending,
                        c.last_output.trim_end()
                    )
                },
            )),
        ),
        TurnOutcome::ResultInvalid { errors } => (
            Outcome::Failed,
            Some(format!(
                "the `finish` result does not match [finish].result_schema: {}",
                errors.join("; ")
            )),
        ),
        other => (
            Outcome::Stopped,
            Some(format!(
                "the run stopped under the stage ({})",
                other.stop_reason()
            )),
        ),
    }
}

/// What a stage said it did: its `finish` summary, else its last text.
fn summary(turn: &Turn) -> String {
    turn.finish
        .as_ref()
        .map(|f| f.summary.clone())
        .or_else(|| turn.reply.clone())
        .unwrap_or_default()
}

/// What is new on the task since the last run, without harness's "continue" note (a stage
/// starts its own conversation).
fn news_of(opened: &Opened) -> Option<String> {
    let Opening::Send(text) = &opened.opening else {
        return None;
    };
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("[harness] The previous run"))
        .collect();
    let kept = kept.join("\n").trim().to_string();
    (!kept.is_empty()).then_some(kept)
}

/// One attempt, for the REPORT's `workflow.attempts`.
fn attempt_record(
    stage: &str,
    index: usize,
    attempt: u32,
    outcome: Outcome,
    reason: Option<&str>,
    (tier, max_rounds): (&str, u32),
    turn: &Turn,
) -> Value {
    json!({
        "stage": stage,
        "index": index + 1,
        "attempt": attempt,
        "outcome": outcome.as_str(),
        "reason": reason,
        "tier": tier,
        "model": turn.model,
        "rounds": turn.rounds,
        "max_rounds": max_rounds,
        "total_tokens": turn.usage.total_tokens,
        "cost_usd": turn.cost_usd,
        "check": turn.check.as_ref().map(|c| json!({"command": c.command, "passed": c.passed, "ending": c.last_ending})),
    })
}

/// The round cap of a workflow run, for the REPORT's `max_rounds`: the caps of its
/// attempts summed (each stage has its own); `None` for a one-turn run.
pub(super) fn max_rounds(workflow: Option<&Value>) -> Option<u32> {
    let attempts = workflow?["attempts"].as_array()?;
    let caps = attempts.iter().filter_map(|a| a["max_rounds"].as_u64());
    Some(u32::try_from(caps.sum::<u64>()).unwrap_or(u32::MAX))
}

/// The REPORT's `workflow:`: the workflow and why, this run's attempts, where it goes next,
/// and the stages earlier runs of the task went through.
fn record(
    workflows: &Workflows,
    workflow: &Workflow,
    choice: &Choice,
    mark: &Mark,
    opened: Option<&Opened>,
    attempts: &[Value],
) -> Value {
    let earlier: Vec<Value> = opened
        .map(|o| {
            o.stored
                .runs
                .iter()
                .filter_map(|r| {
                    let m = r.workflow.as_deref().filter(|m| m.workflow == workflow.name)?;
                    Some(json!({"run_id": r.run_id, "stage": m.stage, "index": m.index + 1, "outcome": m.outcome.as_str()}))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut route = serde_json::to_value(choice).unwrap_or(Value::Null);
    if let Some(obj) = route.as_object_mut() {
        obj.remove("workflow");
    }
    json!({
        "name": workflow.name,
        "route": route,
        "per_run": workflows.per_run.as_str(),
        "stage": mark.stage,
        "index": mark.index + 1,
        "stages": workflow.stages.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        "outcome": mark.outcome.as_str(),
        "next": mark.next.and_then(|i| workflow.stages.get(i)).map(|s| s.name.clone()),
        "loops": mark.loops,
        "max_loops": workflows.max_loops,
        "attempts": attempts,
        "earlier": earlier,
    })
}

/// Every attempt's turn as one: rounds numbered across the run, spend summed, the last
/// attempt's reply, `finish` and check; the outcome the workflow's step; the conversation
/// the session keeps is the last attempt's, after the stored history.
fn merge(
    turns: Vec<Turn>,
    step: &Step,
    reason: Option<&str>,
    stage: &crate::config::StageSpec,
    opened: Option<&Opened>,
    system: &str,
    route: &Route,
) -> Turn {
    let mut all = turns.into_iter();
    // `stage` runs `retries + 1 >= 1` attempts, so there is a first turn.
    let mut merged = all.next().unwrap_or_else(|| Turn::start(route));
    for t in all {
        let offset = merged.rounds;
        merged.log.extend(t.log.into_iter().map(|mut r| {
            r.round += offset;
            r
        }));
        merged.rounds += t.rounds;
        merged.usage.add(&t.usage);
        merged.cost_usd = match (merged.cost_usd, t.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        merged.recorded.extend(t.recorded);
        merged.skipped.extend(t.skipped);
        merged.model = t.model;
        merged.reply = t.reply;
        merged.finish = t.finish;
        // the last check that ran in this run (a review stage has none of its own)
        merged.check = t.check.or(merged.check);
        merged.messages = t.messages;
        merged.noted_error = t.noted_error;
        merged.outcome = t.outcome;
    }
    merged.outcome = match step {
        Step::Next { .. } => TurnOutcome::NextStage,
        Step::Done => TurnOutcome::Completed,
        Step::Parked => TurnOutcome::NeedsInput,
        Step::Failed => {
            merged.noted_error = Some(format!(
                "stage {} failed{}",
                stage.name,
                reason.map_or_else(String::new, |r| format!(": {r}"))
            ));
            TurnOutcome::StageFailed
        }
        Step::Stopped => merged.outcome,
    };
    let history = opened.map_or(&[][..], |o| &o.history[..]);
    let mut messages = vec![Message::System {
        content: system.to_string(),
    }];
    messages.extend(history.iter().cloned());
    messages.extend(merged.messages.drain(..).skip(1));
    merged.messages = messages;
    merged
}
