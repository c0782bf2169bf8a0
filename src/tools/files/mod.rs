//! Tools stage, filesystem adapter: the file tools `read_file`, `write_file` and `edit_file`.
//! One call (tool name and JSON arguments) in, one [`FileCall`] out. They run in-process,
//! with no shell and no gate: the [`jail`] confines every path to the work root with the
//! kernel's `openat2(RESOLVE_BENEATH)` and keeps the gate's protected places protected.
//!
//! A refusal (a path out of the jail, a protected file, an ambiguous or stale edit, bad
//! arguments) is a result the model reads, never a failure of the turn.

pub mod jail;
pub mod ladder;
pub mod page;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::FilesConfig;
use crate::secrets::Redactor;
use harness_gate::Policy;
use jail::Jail;

/// The names of the file tools, as offered to the model.
pub const NAMES: [&str; 3] = ["read_file", "write_file", "edit_file"];
/// The tool that shows the model an image file, offered to a vision tier only.
pub const READ_IMAGE: &str = "read_image";

/// Bytes looked at for a NUL byte, as git does, to call a file binary.
const BINARY_SNIFF: usize = 8000;

/// The file tools of one run.
#[derive(Debug)]
pub struct FileTools {
    config: FilesConfig,
    jail: Jail,
    /// Only to cut a long line where no half of a secret is left; the caller masks results.
    redactor: Redactor,
    /// Resolved path -> hash of its content when the model last read or wrote it: an edit of
    /// a file changed since (by a bash command, say) is refused.
    seen: Mutex<HashMap<String, u64>>,
    /// `read_image`'s bound in bytes, when it is offered (a vision tier).
    images: Option<u64>,
}

/// One handled file tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCall {
    /// The path as the model gave it (empty when the arguments did not parse).
    pub path: String,
    /// The text for the model.
    pub result: String,
    /// `Ok(summary)` when the tool did its work, `Err(reason)` when it refused.
    pub outcome: Result<String, String>,
    /// The image `read_image` read, as a content part.
    pub image: Option<crate::llm::wire::Part>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageArgs {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// The file tools as OpenAI function tools.
pub fn specs() -> Vec<Value> {
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false
                }
            }
        })
    };
    let path = json!({"type": "string", "description": "Path relative to the work root."});
    vec![
        tool(
            "read_file",
            "Read a text file in the work root. Returns numbered lines (number, tab, text); long files come in pages, and the last line says how to get the next one.",
            json!({
                "path": path,
                "offset": {"type": "integer", "description": "First line to show, 1-based (default 1)."},
                "limit": {"type": "integer", "description": "Most lines to show (default: as many as fit in one page)."}
            }),
            &["path"],
        ),
        tool(
            "write_file",
            "Create a file in the work root, or replace its whole content. Missing parent directories are created.",
            json!({
                "path": path,
                "content": {"type": "string", "description": "The complete new content."}
            }),
            &["path", "content"],
        ),
        tool(
            "edit_file",
            "Replace text in a file in the work root. old_string must match exactly one place (copy it from read_file without the line numbers) unless replace_all is true. If the exact text is absent, looser matches are tried (line endings, trailing whitespace, indentation, Unicode punctuation) and the result says which matched. A file changed since you last read it is refused: read it again.",
            json!({
                "path": path,
                "old_string": {"type": "string", "description": "The text to replace."},
                "new_string": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every match (default false)."}
            }),
            &["path", "old_string", "new_string"],
        ),
    ]
}

/// `read_image` as an OpenAI function tool.
pub fn image_spec() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": READ_IMAGE,
            "description": "Look at an image file (png, jpeg, gif or webp) in the work root, such as a task attachment. The image itself comes in the next user message, right after the tool results.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work root."}
                },
                "required": ["path"],
                "additionalProperties": false
            }
        }
    })
}

fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: &str, form: &str) -> Result<T, String> {
    serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(arguments)).map_err(|e| {
        format!("the arguments are not valid JSON of the form {form} ({e}); nothing was done")
    })
}

/// The `path` of arguments that did not parse as a whole, for the log.
fn path_of(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| v.get("path").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

impl FileTools {
    /// Opens the jail at `work_root`. `policy` is the bash tool's: a directory its path rules
    /// run programs from is not writable here either.
    pub fn open(
        config: FilesConfig,
        work_root: &Path,
        policy: Policy,
        redactor: Redactor,
    ) -> anyhow::Result<Self> {
        let jail = Jail::open(work_root, config.protect.clone(), policy)?;
        Ok(FileTools {
            config,
            jail,
            redactor,
            seen: Mutex::new(HashMap::new()),
            images: None,
        })
    }

    /// Offers `read_image`, reading images of at most `max_bytes`.
    pub fn images(&mut self, max_bytes: u64) {
        self.images = Some(max_bytes);
    }

    /// Whether `name` is one of the file tools offered (`read_image` only to a vision tier).
    pub fn offers(&self, name: &str) -> bool {
        NAMES.contains(&name) || (name == READ_IMAGE && self.images.is_some())
    }

    /// Refuses writes to these paths (relative to the work root, with what they are).
    pub fn read_only(&mut self, paths: Vec<(String, String)>) {
        self.jail.read_only(paths);
    }

    /// Lets the file tools read the task's attachments at `rel`, and never write there.
    pub fn attachments(&mut self, rel: String) {
        self.jail.attachments(rel);
    }

    /// Refuses these paths (relative to the work root, with what they are) for every tool:
    /// the config, the report dir, key files, a cassette being recorded.
    pub fn hide(&mut self, hidden: Vec<(String, String)>) {
        self.jail.hide(hidden);
    }

    /// Handles one call to the tool `name`.
    pub fn call(&self, name: &str, arguments: &str) -> FileCall {
        if name == READ_IMAGE {
            return self.call_image(arguments);
        }
        let done = match name {
            "read_file" => parse::<ReadArgs>(arguments, r#"{"path": "...", "offset"?: 1, "limit"?: 100}"#)
                .and_then(|a| self.read(&a).map(|r| (a.path, r))),
            "write_file" => parse::<WriteArgs>(arguments, r#"{"path": "...", "content": "..."}"#)
                .and_then(|a| self.write(&a).map(|r| (a.path, r))),
            "edit_file" => parse::<EditArgs>(
                arguments,
                r#"{"path": "...", "old_string": "...", "new_string": "...", "replace_all"?: false}"#,
            )
            .and_then(|a| self.edit(&a).map(|r| (a.path, r))),
            other => Err(format!("{other:?} is not a file tool")),
        };
        match done {
            Ok((path, (result, summary))) => FileCall {
                path,
                result,
                outcome: Ok(summary),
                image: None,
            },
            Err(reason) => refused(arguments, reason),
        }
    }

    /// `read_image`: an image file beneath the work root (jailed as `read_file` is), at
    /// most the bound, recognised by its magic bytes.
    fn call_image(&self, arguments: &str) -> FileCall {
        let Some(max) = self.images else {
            return refused(
                arguments,
                format!("{READ_IMAGE:?} is not offered in this turn"),
            );
        };
        let read = parse::<ImageArgs>(arguments, r#"{"path": "..."}"#).and_then(|a| {
            let opened = self.jail.open_read(&a.path)?;
            let mut bytes = Vec::new();
            (&opened.file)
                .take(max + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("{:?} cannot be read ({e})", opened.rel))?;
            if bytes.len() as u64 > max {
                return Err(format!(
                    "{:?} is larger than [intake].max_attachment_bytes ({max} bytes)",
                    opened.rel
                ));
            }
            let Some(image) = crate::attachments::sniff_image(&bytes) else {
                return Err(format!(
                    "{:?} is not a png, jpeg, gif or webp image (by its first bytes)",
                    opened.rel
                ));
            };
            if let Some(why) = crate::attachments::secret_in_image(&bytes, &self.redactor) {
                return Err(format!("{:?} is not shown: {why}", opened.rel));
            }
            Ok((a.path, opened.rel, image, bytes))
        });
        match read {
            Ok((path, rel, image, bytes)) => {
                let summary = format!("{}, {} bytes", image.mime(), bytes.len());
                FileCall {
                    path,
                    result: format!("{rel:?} ({summary}): the image follows in the next message"),
                    outcome: Ok(summary),
                    image: Some(crate::attachments::image_part(image, &bytes)),
                }
            }
            Err(reason) => refused(arguments, reason),
        }
    }

    fn remember(&self, rel: &str, hash: u64) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert(rel.to_string(), hash);
        }
    }

    /// Refuses when the model read or wrote `rel` before and its content has changed since.
    fn fresh(&self, rel: &str, now: Option<u64>) -> Result<(), String> {
        let before = self.seen.lock().ok().and_then(|s| s.get(rel).copied());
        match before {
            Some(b) if Some(b) != now => Err(format!(
                "{rel:?} has changed since you last read it; read it again before changing it"
            )),
            Some(_) | None => Ok(()),
        }
    }

    /// The whole content of an open file, refused past `max_write_bytes` (what an edit may
    /// produce) or when binary.
    fn slurp(&self, opened: &mut jail::Opened) -> Result<Vec<u8>, String> {
        let cap = self.config.max_write_bytes;
        let mut data = Vec::new();
        (&mut opened.file)
            .take(cap as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("{:?} cannot be read ({e})", opened.rel))?;
        if data.len() > cap {
            return Err(format!(
                "{:?} is larger than [tools.files] max_write_bytes ({cap} bytes)",
                opened.rel
            ));
        }
        Ok(data)
    }

    fn read(&self, a: &ReadArgs) -> Result<(String, String), String> {
        let mut opened = self.jail.open_read(&a.path)?;
        let size = opened.file.metadata().map(|m| m.len()).unwrap_or(0);
        let offset = a.offset.unwrap_or(1);
        let limit = a.limit.filter(|&l| l > 0);
        let max = self.config.max_read_bytes;
        let dangling = |s: &str| self.redactor.dangling_prefix_len(s);
        let page = if size <= self.config.max_write_bytes as u64 {
            let data = self.slurp(&mut opened)?;
            if data[..data.len().min(BINARY_SNIFF)].contains(&0) {
                return Err(binary(&opened.rel, data.len() as u64));
            }
            // Only a file read whole can be compared later; larger ones cannot be edited.
            self.remember(&opened.rel, content_hash(&data));
            page::read(&data[..], offset, limit, max, &dangling)
        } else {
            let mut reader = std::io::BufReader::new(&opened.file);
            let head = std::io::BufRead::fill_buf(&mut reader).map_err(|e| e.to_string())?;
            if head[..head.len().min(BINARY_SNIFF)].contains(&0) {
                return Err(binary(&opened.rel, size));
            }
            page::read(reader, offset, limit, max, &dangling)
        };
        let page = page.map_err(|e| format!("{:?} cannot be read ({e})", opened.rel))??;
        let lines = if page.shown == 1 { "line" } else { "lines" };
        Ok((page.text, format!("{} {lines}", page.shown)))
    }

    fn write(&self, a: &WriteArgs) -> Result<(String, String), String> {
        let cap = self.config.max_write_bytes;
        if a.content.len() > cap {
            return Err(format!(
                "the content is {} bytes, more than [tools.files] max_write_bytes ({cap})",
                a.content.len()
            ));
        }
        let target = self.jail.target(&a.path)?;
        let now = match target.existing_mode {
            Some(_) => {
                let mut opened = self.jail.open_read(&target.rel)?;
                self.slurp(&mut opened).ok().map(|d| content_hash(&d))
            }
            None => None,
        };
        self.fresh(&target.rel, now)?;
        self.jail.write(&target, a.content.as_bytes())?;
        self.remember(&target.rel, content_hash(a.content.as_bytes()));
        let verb = if target.existing_mode.is_some() {
            "replaced"
        } else {
            "created"
        };
        let lines = a.content.lines().count();
        let s = if lines == 1 { "" } else { "s" };
        Ok((
            format!(
                "{verb} {:?}: {} bytes, {lines} line{s}",
                target.rel,
                a.content.len()
            ),
            format!("{verb}, {} bytes", a.content.len()),
        ))
    }

    fn edit(&self, a: &EditArgs) -> Result<(String, String), String> {
        let mut opened = self.jail.open_read(&a.path)?;
        let data = self.slurp(&mut opened)?;
        let rel = opened.rel.clone();
        if data[..data.len().min(BINARY_SNIFF)].contains(&0) {
            return Err(binary(&rel, data.len() as u64));
        }
        self.fresh(&rel, Some(content_hash(&data)))?;
        let text = String::from_utf8(data)
            .map_err(|_| format!("{rel:?} is not UTF-8 text; the file tools edit text only"))?;
        let edit = ladder::apply(&text, &a.old_string, &a.new_string, a.replace_all)?;
        let cap = self.config.max_write_bytes;
        if edit.text.len() > cap {
            return Err(format!(
                "the edited file would be {} bytes, more than [tools.files] max_write_bytes ({cap})",
                edit.text.len()
            ));
        }
        let target = self.jail.target(&a.path)?;
        if target.rel != rel {
            return Err(format!(
                "{:?} changed while it was being edited (it now leads to {:?}); read it again",
                a.path, target.rel
            ));
        }
        self.jail.write(&target, edit.text.as_bytes())?;
        self.remember(&rel, content_hash(edit.text.as_bytes()));
        let n = edit.lines.len();
        let at: Vec<String> = edit.lines.iter().map(usize::to_string).collect();
        let summary = format!(
            "{n} replacement{} at line{} {} (match: {})",
            if n == 1 { "" } else { "s" },
            if n == 1 { "" } else { "s" },
            at.join(", "),
            edit.level.describe()
        );
        Ok((format!("edited {rel:?}: {summary}"), summary))
    }
}

/// A refused call: its path as far as the arguments tell, the reason as its result.
fn refused(arguments: &str, reason: String) -> FileCall {
    FileCall {
        path: path_of(arguments),
        result: format!("error: {reason}"),
        outcome: Err(reason),
        image: None,
    }
}

fn binary(rel: &str, size: u64) -> String {
    format!("{rel:?} is a binary file ({size} bytes); the file tools read text only")
}

#[cfg(test)]
mod tests;
