//! Prompt stage, filesystem adapter: the project's instructions. The work root, `[prompt]` and
//! the redactor in; the system prompt with the work root's `AGENTS.md` and the list of skills
//! (`[prompt] skills_dir`: name and one-line description each; bodies read on demand) out.
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
pub(crate) const AGENTS_FILE: &str = "AGENTS.md";

/// `system` with the project's `AGENTS.md` appended when there is one and the cap allows.
pub(crate) fn with_project_instructions(
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

/// The most skills listed; more are counted, not named.
const MAX_SKILLS: usize = 100;
/// Bytes of a skill file read to find its description.
const SKILL_HEAD_BYTES: usize = 4096;
/// Characters of a description shown.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// `system` with the skills of `[prompt] skills_dir` listed, when set: one line per `*.md`
/// file (name, path, description), sorted by name, so the model reads a skill's file only
/// when its description fits the task. Files are read beneath the work root (a symlink that
/// leads out is left out); a missing or unreadable directory is narrated, never a failure.
pub(crate) fn with_skills(
    system: String,
    work_root: &Path,
    config: &PromptConfig,
    redactor: &Redactor,
) -> String {
    let Some(dir) = config.skills_dir.as_deref() else {
        return system;
    };
    let names = match skill_files(work_root, dir) {
        Ok(names) => names,
        Err(e) => {
            warn!("prompt: skills in {dir} left out: {e}");
            return system;
        }
    };
    let mut skills = Vec::new();
    for name in names.iter().take(MAX_SKILLS) {
        let rel = format!("{dir}/{name}");
        match jail::read_beneath(work_root, &rel, SKILL_HEAD_BYTES) {
            Ok(Some((head, _))) => {
                let stem = name.trim_end_matches(".md");
                skills.push((
                    stem.to_string(),
                    rel,
                    description(&String::from_utf8_lossy(&head)),
                ));
            }
            Ok(None) => {}
            Err(e) => warn!("prompt: skill {rel} left out: {e}"),
        }
    }
    info!("prompt: {} skills from {dir}", skills.len());
    list_skills(
        system,
        dir,
        &skills,
        names.len().saturating_sub(MAX_SKILLS),
        redactor,
    )
}

/// The `*.md` file names directly in `dir` beneath `work_root`, sorted; the directory must
/// resolve inside the work root.
fn skill_files(work_root: &Path, dir: &str) -> Result<Vec<String>, String> {
    let root = work_root
        .canonicalize()
        .map_err(|e| format!("cannot resolve the work root ({e})"))?;
    let path = root
        .join(dir)
        .canonicalize()
        .map_err(|e| format!("cannot open it ({e})"))?;
    if !path.starts_with(&root) {
        return Err("it leads out of the work root".to_string());
    }
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .map_err(|e| format!("cannot list it ({e})"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md") && !n.starts_with('.') && n.len() > 3)
        .collect();
    names.sort();
    Ok(names)
}

/// PURE: a skill's one-line description: the front matter's `description:`, else its first
/// non-empty line with any heading marks dropped; capped.
fn description(head: &str) -> String {
    let mut lines = head.lines().map(str::trim);
    let mut first = None;
    if head.starts_with("---") {
        lines.next();
        for line in lines.by_ref() {
            if line == "---" {
                break;
            }
            if let Some(d) = line.strip_prefix("description:") {
                first = Some(d.trim().trim_matches(['"', '\'']).to_string());
            }
        }
    }
    let text = first.unwrap_or_else(|| {
        lines
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .trim_start_matches('#')
            .trim()
            .to_string()
    });
    let mut out: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_DESCRIPTION_CHARS)
        .collect();
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        out.push_str("...");
    }
    out
}

/// PURE: the system prompt with the list of skills (name, path, description) appended.
fn list_skills(
    system: String,
    dir: &str,
    skills: &[(String, String, String)],
    more: usize,
    redactor: &Redactor,
) -> String {
    if skills.is_empty() {
        return system;
    }
    let mut text = format!(
        "{system}\n\nSkills: task-specific instructions in {dir}/, one file each. When a skill's description fits the task, read its file (read_file) and follow it:"
    );
    for (name, path, description) in skills {
        text.push_str(&format!("\n- {name} ({path}): {description}"));
    }
    if more > 0 {
        text.push_str(&format!("\n- ... and {more} more in {dir}/"));
    }
    redactor.redact(&text)
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
            ..PromptConfig::default()
        };
        let out = with_project_instructions("S".into(), &work, &small, &r);
        assert!(
            out.ends_with("xxxxxxxxxx\n[AGENTS.md cut: 10 of 100 bytes shown]"),
            "{out}"
        );
        let off = PromptConfig {
            agents_max_bytes: 0,
            ..PromptConfig::default()
        };
        assert_eq!(with_project_instructions("S".into(), &work, &off, &r), "S");
    }

    #[test]
    fn a_description_comes_from_the_front_matter_or_the_first_line() {
        assert_eq!(
            description("---\nname: x\ndescription: \"Release a crate\"\n---\n# Body\n"),
            "Release a crate"
        );
        assert_eq!(
            description("\n\n## Fix a flaky test\nsteps"),
            "Fix a flaky test"
        );
        assert_eq!(description(""), "");
        let long = "x".repeat(300);
        assert_eq!(description(&long).len(), MAX_DESCRIPTION_CHARS + 3);
    }

    #[test]
    fn skills_are_listed_by_name_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("skills")).unwrap();
        std::fs::write(work.join("skills/release.md"), "# Cut a release\nsteps").unwrap();
        std::fs::write(
            work.join("skills/debug.md"),
            "---\ndescription: Debug a crash\n---\n",
        )
        .unwrap();
        std::fs::write(work.join("skills/notes.txt"), "not a skill").unwrap();
        std::fs::write(dir.path().join("outside.md"), "# secret").unwrap();
        std::os::unix::fs::symlink("../../outside.md", work.join("skills/link.md")).unwrap();
        let cfg = PromptConfig {
            skills_dir: Some("skills".into()),
            ..PromptConfig::default()
        };
        let out = with_skills("S".into(), &work, &cfg, &Redactor::default());
        assert_eq!(
            out,
            "S\n\nSkills: task-specific instructions in skills/, one file each. When a skill's description fits the task, read its file (read_file) and follow it:\n- debug (skills/debug.md): Debug a crash\n- release (skills/release.md): Cut a release"
        );
        // A directory that leads out of the work root is left out.
        std::os::unix::fs::symlink("..", work.join("up")).unwrap();
        let up = PromptConfig {
            skills_dir: Some("up".into()),
            ..PromptConfig::default()
        };
        assert_eq!(
            with_skills("S".into(), &work, &up, &Redactor::default()),
            "S"
        );
        assert_eq!(
            with_skills(
                "S".into(),
                &work,
                &PromptConfig::default(),
                &Redactor::default()
            ),
            "S"
        );
    }
}
