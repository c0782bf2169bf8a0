//! Tools stage, filesystem adapter: the files at the top of the work root that an
//! interpreter loads before the operator's check code and so can fake its verdict
//! (`pytest.py` shadows `python3 -m pytest`, a root `conftest.py` is a pytest plugin,
//! `sitecustomize.py`/`usercustomize.py` run at every Python start), and the check's own
//! files (a `check.sh` that did not exist before the turn is the model's). Work root in; a
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

/// The shadow files and `also` (the check's own files, relative paths) as they are now,
/// read beneath the work root without following a symlink out of it.
pub fn snapshot(work_root: &Path, also: &[String]) -> Snapshot {
    let names = NAMES
        .iter()
        .map(|n| n.to_string())
        .chain(also.iter().cloned());
    names
        .map(|n| {
            let bytes = match crate::tools::files::jail::read_beneath(
                work_root,
                &n,
                MAX_BYTES as usize + 1,
            ) {
                Ok(None) => None,
                Ok(Some((data, size))) if size <= MAX_BYTES => Some(data),
                // A directory, a symlink out, a FIFO or a huge file: recorded as something
                // unreadable, so its appearance or any change to it shows.
                _ => match std::fs::symlink_metadata(work_root.join(&n)) {
                    Ok(m) if m.is_dir() => Some(b"\0directory".to_vec()),
                    Ok(_) => Some(b"\0unreadable".to_vec()),
                    Err(_) => None,
                },
            };
            (n, bytes)
        })
        .collect()
}

/// Why the check cannot vouch for the work root: the shadow files the turn created or
/// changed between `before` and `now`; `None` when it wrote none. PURE.
pub fn written(before: &Snapshot, now: &Snapshot) -> Option<String> {
    let changed: Vec<&str> = now
        .iter()
        .filter(|(n, b)| {
            let was = before.iter().find(|(m, _)| m == n).map(|(_, a)| a);
            let shadow = NAMES.contains(&n.as_str());
            // A shadow file counts when it is there and new or changed; the check's own files
            // whenever they differ (created, changed or removed).
            (b.is_some() || !shadow) && was != Some(b)
        })
        .map(|(n, _)| n.as_str())
        .collect();
    if changed.is_empty() {
        return None;
    }
    Some(format!(
        "the check was not run: this turn wrote {}, which the check runs or its interpreter loads before the operator's code (it could fake the verdict); put it back as it was, or put fixtures in a tests/ directory ([prompt] writable = true lets a task write it)",
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
        let before = snapshot(d.path(), &[]);
        assert_eq!(written(&before, &snapshot(d.path(), &[])), None);
        std::fs::write(d.path().join("pytest.py"), "import sys; sys.exit(0)\n").unwrap();
        std::fs::write(
            d.path().join("conftest.py"),
            "def pytest_runtest_call(): pass\n",
        )
        .unwrap();
        let why = written(&before, &snapshot(d.path(), &[])).unwrap();
        assert!(why.contains("wrote pytest.py, conftest.py, which"), "{why}");
        // Removing one is no shadow.
        std::fs::remove_file(d.path().join("pytest.py")).unwrap();
        std::fs::remove_file(d.path().join("conftest.py")).unwrap();
        assert_eq!(written(&before, &snapshot(d.path(), &[])), None);
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("sitecustomize.py")).unwrap();
        assert!(written(&before, &snapshot(d.path(), &[]))
            .unwrap()
            .contains("sitecustomize.py"));
    }

    #[test]
    fn a_check_file_the_turn_created_or_changed_is_named() {
        let d = tempfile::tempdir().unwrap();
        let also = ["check.sh".to_string(), "t/run.py".to_string()];
        std::fs::create_dir(d.path().join("t")).unwrap();
        std::fs::write(d.path().join("t/run.py"), "assert False\n").unwrap();
        let before = snapshot(d.path(), &also);
        assert_eq!(written(&before, &snapshot(d.path(), &also)), None);
        std::fs::write(d.path().join("check.sh"), "exit 0\n").unwrap();
        let why = written(&before, &snapshot(d.path(), &also)).unwrap();
        assert!(why.contains("wrote check.sh,"), "{why}");
        std::fs::remove_file(d.path().join("check.sh")).unwrap();
        std::fs::remove_file(d.path().join("t/run.py")).unwrap();
        let why = written(&before, &snapshot(d.path(), &also)).unwrap();
        assert!(why.contains("wrote t/run.py,"), "{why}");
    }
}
