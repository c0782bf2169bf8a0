//! Intake stage, inbox replies (PURE): a file `<stem>.reply.md` answers task `<stem>` after
//! its run ended (a question in its REPORT, `needs_input`). It is the same task: the same
//! id, class, subject and worktree, and it continues the session of the original's text,
//! with the reply as the news that opens the run. The original is found by the inbox adapter
//! in `done/` or `failed/`; what is decided from it is here.

use super::{Reply, Task};

/// What a reply file's stem ends in.
pub(crate) const SUFFIX: &str = ".reply";

/// The task a reply file's stem answers (`fix-login.reply` -> `fix-login`); `None` for a
/// task file that is not a reply.
pub(crate) fn base(stem: &str) -> Option<&str> {
    stem.strip_suffix(SUFFIX).filter(|b| !b.is_empty())
}

/// Whether `name`, an entry of `done/` or `failed/`, is a copy of task `base`'s own file:
/// `<base>.md`, or `<base>--<run id>.md` when that name was taken. A REPORT, an error file,
/// another task (`<base>--x.md` whose rest is no run id) and a reply are not.
pub(crate) fn is_original(name: &str, base: &str) -> bool {
    let Some(rest) = name.strip_prefix(base).and_then(|r| r.strip_suffix(".md")) else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let Some(run) = rest.strip_prefix("--") else {
        return false;
    };
    !run.ends_with(".REPORT")
        && chrono::NaiveDateTime::parse_from_str(run.get(..15).unwrap_or(""), "%Y%m%dT%H%M%S")
            .is_ok()
}

/// The id an inbox task's session is kept under: its stem and its text's hash, so the same
/// name dropped again with new text is a new task with a fresh session.
pub(crate) fn session_id(stem: &str, prompt: &str) -> String {
    let hash = crate::sha256::hex(prompt.as_bytes());
    format!("{stem}.{}", &hash[..12])
}

/// The message that opens a run for a reply: the model reads whose words these are.
pub(crate) fn news(file: &str, text: &str) -> String {
    format!("[harness] A reply to your last run on this task, dropped in the inbox as {file}:\n\n{text}")
}

/// The task a reply file makes, from the original task it answers and the reply as parsed
/// (its own front matter may name a class; the subject stays the original's). Its prompt,
/// sent where there is no session to continue (sessions off, `--fresh`), holds both texts.
pub(crate) fn task(original: &Task, reply: &Task, file: &str) -> Task {
    let news = news(file, &reply.prompt);
    Task {
        id: original.id.clone(),
        source: original.source,
        subject: original.subject.clone(),
        class: reply.class.clone().or_else(|| original.class.clone()),
        prompt: format!("{}\n\n{news}", original.prompt),
        reply: Some(Reply {
            session_id: session_id(&original.id, &original.prompt),
            news,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::Source;
    use pretty_assertions::assert_eq;

    fn t(id: &str, class: Option<&str>, prompt: &str) -> Task {
        Task {
            id: id.into(),
            source: Source::Inbox,
            subject: format!("subject of {id}"),
            class: class.map(String::from),
            prompt: prompt.into(),
            reply: None,
        }
    }

    #[test]
    fn a_reply_names_its_task_by_its_stem() {
        assert_eq!(base("fix-login.reply"), Some("fix-login"));
        assert_eq!(base("a.b.reply"), Some("a.b"));
        assert_eq!(base(".reply"), None);
        assert_eq!(base("fix-login"), None);
        assert_eq!(base("fix-login.replyx"), None);
    }

    #[test]
    fn only_the_task_s_own_file_is_its_original() {
        assert!(is_original("t.md", "t"));
        assert!(is_original("t--20261202T135200Z-1-0abc.md", "t"));
        assert!(!is_original("t.REPORT.md", "t"));
        assert!(!is_original("t--20261202T135200Z-1-0abc.REPORT.md", "t"));
        assert!(!is_original("t.reply.md", "t"));
        assert!(!is_original("t--other.md", "t"), "another task's name");
        assert!(!is_original("tt.md", "t"));
        assert!(!is_original("t.error.txt", "t"));
    }

    #[test]
    fn a_reply_is_the_original_task_continued() {
        let original = t("t", Some("code"), "Fix the login.");
        let got = task(&original, &t("t.reply", None, "Use a.txt."), "t.reply.md");
        let news = "[harness] A reply to your last run on this task, dropped in the inbox as t.reply.md:\n\nUse a.txt.";
        assert_eq!(
            got,
            Task {
                id: "t".into(),
                source: Source::Inbox,
                subject: "subject of t".into(),
                class: Some("code".into()),
                prompt: format!("Fix the login.\n\n{news}"),
                reply: Some(Reply {
                    session_id: session_id("t", "Fix the login."),
                    news: news.into(),
                }),
            }
        );
        let reclassed = task(&original, &t("t.reply", Some("study"), "x"), "t.reply.md");
        assert_eq!(reclassed.class.as_deref(), Some("study"));
        assert_eq!(session_id("t", "Fix the login.").len(), "t.".len() + 12);
    }
}
