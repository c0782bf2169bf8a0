//! Workflow stage: a task class run as stages of skills, each its own bounded turn with
//! its own tier, bound and check. [`route`] picks the workflow (PURE), [`state`] says where
//! a task stands and goes (PURE), [`skill`] reads a skill (PURE), [`prompt`] builds a
//! stage's messages (PURE); `once` runs the stages.

pub mod prompt;
pub mod route;
pub mod skill;
pub mod state;
pub mod words;
