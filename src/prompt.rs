//! Prompt stage, filesystem adapter: the project's instructions. The work root, the cap and
//! the redactor in; the system prompt with the work root's `AGENTS.md` appended out.
//!
//! The file is read beneath the work root as the file tools read (a symlink that leads out
//! is refused), cut at the cap, and masked like tool output, since it goes to the model.
//! A missing file adds nothing; an unreadable one is narrated and left out, never a failure.

use std::path::Path;

use tracing::{info, warn};

use crate::config::PromptConfig;
use crate::secrets::Redactor;
use crate::tools::files::jail;

/// The instructions file, at the work root.
pub const AGENTS_FILE: &str = "AGENTS.md";

/// `system` with the project's `AGENTS.md` appended when there is one and the cap allows.
pub fn with_project_instructions(
    system: String,
    work_root: &Path,
    config: &PromptConfig,
    redactor: &Redactor,
) -> String {
    let cap = config.agents_max_bytes;
    if cap == 0 {
        return system;
    }
    match jail::read_beneath(work_root, AGENTS_FILE, cap) {
        Ok(Some((data, size))) => {
            info!(
                "prompt: {AGENTS_FILE} ({size} bytes{})",
                if size > data.len() as u64 {
                    format!(", cut at [prompt] agents_max_bytes = {cap}")
                } else {
                    String::new()
                }
            );
            append(system, &String::from_utf8_lossy(&data), size, redactor)
        }
        Ok(None) => system,
        Err(e) => {
            warn!("prompt: {AGENTS_FILE} left out: {e}");
            system
        }
    }
}

/// PURE: the system prompt with the instructions' text (`size` bytes in all) appended.
fn append(system: String, text: &str, size: u64, redactor: &Redactor) -> String {
    // A cut may split a character (the lossy decoding left a replacement char at the end)
    // or a secret (its first half would escape the mask): both are dropped.
    let mut text = text;
    if size > text.len() as u64 {
        text = text.trim_end_matches('\u{FFFD}');
        let keep = text.len() - redactor.dangling_prefix_len(text);
        text = text.get(..keep).unwrap_or("");
    }
    let cut = if size > text.len() as u64 {
        format!(
            "\n[{AGENTS_FILE} cut: {} of {size} bytes shown]",
            text.len()
        )
    } else {
        String::new()
    };
    format!(
        "{system}\n\nThe project's instructions, from {AGENTS_FILE} at the root of the working directory (follow them where they bear on the task):\n\n{}{cut}",
        redactor.redact(text.trim_end())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn appends_the_text_and_says_when_it_was_cut() {
        let r = Redactor::default();
        assert_eq!(
            append("S".into(), "Run make test.\n", 15, &r),
            "S\n\nThe project's instructions, from AGENTS.md at the root of the working directory (follow them where they bear on the task):\n\nRun make test."
        );
        let out = append("S".into(), "abc", 10, &r);
        assert!(
            out.ends_with("abc\n[AGENTS.md cut: 3 of 10 bytes shown]"),
            "{out}"
        );
    }

    #[test]
    fn reads_beneath_the_root_and_refuses_a_symlink_out() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let cfg = PromptConfig::default();
        let r = Redactor::default();
        assert_eq!(with_project_instructions("S".into(), &work, &cfg, &r), "S");
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink("../secret", work.join(AGENTS_FILE)).unwrap();
        assert_eq!(with_project_instructions("S".into(), &work, &cfg, &r), "S");
        std::fs::remove_file(work.join(AGENTS_FILE)).unwrap();
        std::fs::write(work.join(AGENTS_FILE), "x".repeat(100)).unwrap();
        let small = PromptConfig {
            agents_max_bytes: 10,
        };
        let out = with_project_instructions("S".into(), &work, &small, &r);
        assert!(
            out.ends_with("xxxxxxxxxx\n[AGENTS.md cut: 10 of 100 bytes shown]"),
            "{out}"
        );
        let off = PromptConfig {
            agents_max_bytes: 0,
        };
        assert_eq!(with_project_instructions("S".into(), &work, &off, &r), "S");
    }
}
