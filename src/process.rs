//! Process groups, for every stage that starts programs (the commands, the spawner, git, a
//! key store's program): the one way a whole group is stopped. A thin syscall adapter.

/// SIGKILLs the process group `pgid`, every process in it at once. Ids 0 and 1 (and below)
/// never name a group harness started (`killpg(0)` would be harness's own group, 1 init's),
/// so they are ignored; a group that is already gone is not an error.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: killpg only sends a signal; a group that is already gone gives ESRCH.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}
