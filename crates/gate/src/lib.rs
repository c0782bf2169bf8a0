//! tools stage, PURE: judges a bash command string against [tools.bash] rules; no I/O.
//!
//! In: a [`Policy`] and the exact string the model wants `bash -c` to run. Out: a
//! [`Judgement`] with one verdict per segment and the reason for each. The gate fails closed:
//! its own tokenizer follows bash's lexical rules for the subset it understands (plain simple
//! commands, quoting, redirections, heredocs) and denies everything else; `brush-parser` then
//! has to agree on the shape of every command before anything is allowed.
//!
//! Layout, bottom up (a file imports only from files below it):
//! - `rule.rs`, `shell/lex.rs`, `shell/words.rs`, `paths.rs`, `programs/argv.rs`,
//!   `programs/registry.rs` (rows in `programs/families.rs`): vocabulary (verdicts, rules, words, path facts, argv helpers, the
//!   program registry).
//! - `programs/*.rs`: one file per program family; each takes words and returns findings.
//! - `shell/brush.rs`, `redirect.rs`: the parser cross-check and redirection rules.
//! - `hints.rs`: the "try instead" of a denial.
//! - `judge.rs`: the only file that recurses into inner commands.
//! - `lint.rs`, `render.rs`: warnings about rules and the human rendering.
//! - `pipeline.rs`: the argv of an allowed plain pipeline, which harness runs without bash.
//! - `presets.rs`: the named rule sets `preset = "..."` starts a policy from.

#[cfg(test)]
mod differential;
mod hints;
mod judge;
mod lint;
mod paths;
mod pipeline;
pub mod presets;
mod programs;
mod redirect;
mod render;
mod rule;
mod shell;
#[cfg(test)]
mod tests;

pub use judge::{judge, judge_in};
pub use lint::lint;
pub use pipeline::MAX_STAGES;
pub use programs::registry::{denied_env, exec_helpers, ExecHelpers};
pub use redirect::write_refusal;
pub use render::render_human;
pub use rule::{Judgement, Policy, Rule, Runs, SegmentJudgement, Verdict, SYSTEM_DIRS};
