//! Processes, a leaf: THE reading of PATH and the one process-group kill live in the sandbox
//! crate (`harness_sandbox::process`), beside the spawner that needs them; re-exported here
//! for the stages that start programs of their own (git, a key store's program, signals).
//! No code of its own.

pub(crate) use harness_sandbox::process::*;
