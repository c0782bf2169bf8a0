//! The one integration-test binary (issue 23): every subject is a module, so the suite links
//! once, the test-support code in `common` (the scripted model, workspaces, the real
//! servers) is compiled once, and process-wide guards (one real Redmine at a time, each
//! skip said once) hold across subjects. `cargo test --test all SUBJECT::` runs one subject.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;
mod stub;

mod allowed;
mod artefacts;
mod attachments;
mod cli;
mod code;
mod commitments;
mod egress;
mod events;
mod everyday;
mod faults;
mod files;
mod finish;
mod forge;
mod gate;
mod gate_corpus;
mod gate_programs;
mod hardening;
mod harness_test;
mod hostile;
mod inbox;
mod keyrefs;
mod layout;
mod litellm;
mod llm;
mod long_keys;
mod metrics;
mod once;
mod poison;
mod preflight;
mod properties;
mod protect;
mod readme;
mod redmine;
mod redmine_attachments;
mod redmine_concurrency;
mod redmine_sessions;
mod redmine_workflows;
mod reliability;
mod results;
mod sandbox;
mod scope;
mod secrets;
mod session;
mod unix_sockets;
mod workflows;
