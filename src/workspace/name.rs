//! Workspace stage, PURE: the names a task's worktree gets. The branch template rendered
//! for a task, git's rules for a branch name (the subset `git check-ref-format --branch`
//! enforces), a remote name, and the worktree directory a branch lives in.

/// The default `[workspace] branch` template.
pub(crate) const DEFAULT_BRANCH: &str = "harness/{vertical}-{task_id}";

/// The placeholders a branch template may use.
const PLACEHOLDERS: &[&str] = &["{vertical}", "{task_id}"];

/// The branch of a task: `template` with `{vertical}` and `{task_id}` filled in; characters
/// a ref cannot hold in the task id become `-`.
pub(crate) fn branch(template: &str, vertical: &str, task_id: &str) -> String {
    let safe: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    template
        .replace("{vertical}", vertical)
        .replace("{task_id}", &safe)
}

/// Why `template` cannot name branches: an unknown placeholder, or a name git refuses even
/// with a plain task id filled in.
pub(crate) fn check_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let tail = &rest[start..];
        let end = tail
            .find('}')
            .ok_or_else(|| format!("{template:?} has a `{{` without `}}`"))?;
        let placeholder = &tail[..=end];
        if !PLACEHOLDERS.contains(&placeholder) {
            return Err(format!(
                "{template:?} uses {placeholder}; the placeholders are {{vertical}} and {{task_id}}"
            ));
        }
        rest = &tail[end + 1..];
    }
    check_branch(&branch(template, "v", "1"))
        .map_err(|e| format!("{template:?} does not make a valid branch name: {e}"))
}

/// Why git would refuse `name` as a branch name, if it would (git-check-ref-format(1)).
pub(crate) fn check_branch(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{name:?} {why}"));
    if name.is_empty() {
        return bad("is empty");
    }
    if name == "@" || name == "HEAD" {
        return bad("is reserved");
    }
    if name.starts_with('-') {
        return bad("starts with `-`");
    }
    if name.ends_with('/') || name.ends_with('.') {
        return bad("ends with `/` or `.`");
    }
    if name.contains("..") || name.contains("//") || name.contains("@{") {
        return bad("holds `..`, `//` or `@{`");
    }
    if name
        .chars()
        .any(|c| c.is_ascii_control() || c == '\u{7f}' || " ~^:?*[\\".contains(c))
    {
        return bad("holds a space, a control character or one of ~ ^ : ? * [ \\");
    }
    if name
        .split('/')
        .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        return bad("has a part that starts with `.` or ends with `.lock`");
    }
    Ok(())
}

/// Why `name` cannot be a remote to push to: it must be a plain remote name, not a URL or
/// an option.
pub(crate) fn check_remote(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a remote name (A-Z a-z 0-9 . _ -, as `git remote` lists them)"
        ))
    }
}

/// The directory under the work root that holds the worktree of `branch`: one path part,
/// `/` turned into `-`.
pub(crate) fn worktree_dir(branch: &str) -> String {
    branch.replace('/', "-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_template_fills_vertical_and_a_ref_safe_task_id() {
        assert_eq!(branch(DEFAULT_BRANCH, "code", "42"), "harness/code-42");
        assert_eq!(
            branch("t/{task_id}/{vertical}", "v", "a b:c~1"),
            "t/a-b-c-1/v"
        );
        assert_eq!(worktree_dir("harness/code-42"), "harness-code-42");
    }

    #[test]
    fn templates_use_only_known_placeholders_and_make_valid_names() {
        assert_eq!(check_template(DEFAULT_BRANCH), Ok(()));
        assert_eq!(check_template("fix-{task_id}"), Ok(()));
        for bad in ["x-{id}", "x-{task_id", "x..{task_id}", "x {task_id}", ""] {
            assert!(check_template(bad).is_err(), "{bad:?}");
        }
    }

    /// The same verdicts as `git check-ref-format --branch`, the program this re-implements
    /// (stricter on one name: a lone `@`, which `--branch` lets through as HEAD's shorthand).
    #[test]
    fn branch_names_are_judged_as_git_judges_them() {
        let names = [
            "main",
            "harness/code-42",
            "a.b_c-d",
            "-x",
            "x/",
            "x.",
            "a..b",
            "a//b",
            "a@{b",
            "a b",
            "a~b",
            "a^b",
            "a:b",
            "a?b",
            "a*b",
            "a[b",
            "a\\b",
            ".hidden",
            "a/.b",
            "a.lock",
            "a/b.lock/c",
            "HEAD",
            "",
            "a\tb",
        ];
        for name in names {
            let git = std::process::Command::new("git")
                .args(["check-ref-format", "--branch", name])
                .output()
                .unwrap()
                .status
                .success();
            assert_eq!(check_branch(name).is_ok(), git, "{name:?}");
        }
    }

    #[test]
    fn remotes_are_plain_names() {
        assert_eq!(check_remote("origin"), Ok(()));
        for bad in ["", "-f", "https://x/y", "a b", "../r"] {
            assert!(check_remote(bad).is_err(), "{bad:?}");
        }
    }
}
