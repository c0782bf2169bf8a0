//! Tools stage, filesystem adapter: the files at the top of the work root that an
//! interpreter loads before the operator's check code and so can fake its verdict
//! (`pytest.py` shadows `python3 -m pytest`, a root `conftest.py` is a pytest plugin,
//! `sitecustomize.py`/`usercustomize.py` run at every Python start). Work root in; a
//! snapshot taken before the turn ([`snapshot`]) and, when the check runs, what the turn
//! wrote among them ([`written`], PURE on the two snapshots) out.

use std::path::Path;

/// The shadowing names, at the top of the work root.
pub const NAMES: &[&str] = &[
    "pytest.py",
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
];

/// Largest shadow file compared by content; a larger one counts as changed whenever it
/// exists (no check should need one).
const MAX_BYTES: u64 = 1024 * 1024;

/// Each shadowing name with its content (`None`: absent).
pub type Snapshot = Vec<(String, Option<Vec<u8>>)>;

/// The shadow files as they are now, read without following a symlink out of the root.
pub fn snapshot(work_root: &Path) -> Snapshot {
    let dir = crate::beneath::Dir::open(work_root).ok();
    NAMES
        .iter()
        .map(|n| {
            let bytes = dir.as_ref().and_then(|d| match d.stat(n) {
                Ok(None) => None,
                // A symlink, a FIFO or a huge file: recorded as something unreadable, so any
                // change to it (or its mere presence when new) shows.
                _ => Some(
                    d.open_file(n)
                        .ok()
                        .filter(|f| f.metadata().is_ok_and(|m| m.len() <= MAX_BYTES))
                        .and_then(|f| {
                            let mut v = Vec::new();
                            std::io::Read::read_to_end(
                                &mut std::io::Read::take(f, MAX_BYTES),
                                &mut v,
                            )
                            .ok()
                            .map(|_| v)
                        })
                        .unwrap_or_else(|| b"\0unreadable".to_vec()),
                ),
            });
            (n.to_string(), bytes)
        })
        .collect()
}

/// Why the check cannot vouch for the work root: the shadow files the turn created or
/// changed between `before` and `now`; `None` when it wrote none. PURE.
pub fn written(before: &Snapshot, now: &Snapshot) -> Option<String> {
    let changed: Vec<&str> = now
        .iter()
        .filter(|(n, b)| {
            b.is_some() && before.iter().find(|(m, _)| m == n).map(|(_, a)| a) != Some(b)
        })
        .map(|(n, _)| n.as_str())
        .collect();
    if changed.is_empty() {
        return None;
    }
    Some(format!(
        "the check was not run: this turn wrote {} at the top of the work tree, which the check's interpreter would load before the operator's code (it could fake the verdict); remove it, or put fixtures in a tests/ directory ([prompt] writable = true lets a task write it)",
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shadow_file_the_turn_wrote_is_named_one_that_was_there_is_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("conftest.py"), "fixtures\n").unwrap();
        let before = snapshot(d.path());
        assert_eq!(written(&before, &snapshot(d.path())), None);
        std::fs::write(d.path().join("pytest.py"), "import sys; sys.exit(0)\n").unwrap();
        std::fs::write(
            d.path().join("conftest.py"),
            "def pytest_runtest_call(): pass\n",
        )
        .unwrap();
        let why = written(&before, &snapshot(d.path())).unwrap();
        assert!(
            why.contains("wrote pytest.py, conftest.py at the top"),
            "{why}"
        );
        // Removing one is no shadow.
        std::fs::remove_file(d.path().join("pytest.py")).unwrap();
        std::fs::remove_file(d.path().join("conftest.py")).unwrap();
        assert_eq!(written(&before, &snapshot(d.path())), None);
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("sitecustomize.py")).unwrap();
        assert!(written(&before, &snapshot(d.path()))
            .unwrap()
            .contains("sitecustomize.py"));
    }
}
