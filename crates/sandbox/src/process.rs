//! Processes, for every stage that starts programs (the commands, the spawner, git, a key
//! store's program): THE reading of PATH (its value in a command environment, its
//! directories as bash searches them, where a name runs from) and the one way a whole process
//! group is stopped. File look-ups and one syscall; nothing else.

use std::path::{Path, PathBuf};

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

/// PATH for a command when the harness itself has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The PATH of a command environment: its `PATH`, else [`DEFAULT_PATH`].
pub fn path_in(env: &[(String, String)]) -> &str {
    env.iter()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str())
}

/// The PATH commands will get, read before their environment is built (`check`, the PLAN):
/// harness's own, else [`DEFAULT_PATH`], as the scrubbed environment keeps it.
pub(crate) fn own_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string())
}

/// PATH's directories as bash searches them (an empty entry is the current directory).
pub(crate) fn path_dirs(path_var: &str, work_root: &Path) -> Vec<PathBuf> {
    path_var
        .split(':')
        .map(|d| {
            if d.is_empty() {
                work_root.to_path_buf()
            } else {
                work_root.join(d)
            }
        })
        .collect()
}

/// Every executable file `name` can mean: a path (against the work root), or each PATH
/// directory's entry of that name.
pub(crate) fn executables(name: &str, dirs: &[PathBuf], work_root: &Path) -> Vec<PathBuf> {
    if name.contains('/') {
        let p = work_root.join(name);
        return if is_executable(&p) { vec![p] } else { vec![] };
    }
    dirs.iter()
        .map(|d| d.join(name))
        .filter(|p| is_executable(p))
        .collect()
}

/// Where `name` runs from for bash: the first executable regular file on PATH, or the path
/// itself when it holds a `/`. PURE but for the file system look-ups.
pub fn resolve(name: &str, path_var: &str, work_root: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        return executables(name, &[], work_root).into_iter().next();
    }
    // The first hit ends the search (each miss is a stat, once per command).
    path_dirs(path_var, work_root)
        .iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// Does any PATH directory hold an entry `name` (executable or not: bash then says why)?
pub fn on_path(name: &str, path_var: &str, work_root: &Path) -> bool {
    path_dirs(path_var, work_root)
        .iter()
        .any(|dir| dir.join(name).symlink_metadata().is_ok())
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
