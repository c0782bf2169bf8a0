//! Intake stage, PURE: a task's attachments (a Redmine issue's files, the files of an inbox
//! task's `<stem>.files/` directory) as offered, the `[intake]` bounds, and their contents in;
//! which are taken and which refused (with why), what kind each is (an image by its magic
//! bytes, text, or neither), the names they are placed under, the listing the task message
//! carries and the image parts a vision tier is sent, out. The adapter that downloads, reads
//! and places them is [`place`].

pub(crate) mod place;

use crate::config::AttachmentsConfig;
use crate::llm::wire::{Content, ImageUrl, Message, Part};

/// Bytes looked at for a NUL byte (as git does) to tell text from binary.
const TEXT_SNIFF: usize = 8000;
/// Longest name an attachment is placed under (bytes).
const NAME_MAX: usize = 100;
/// Lines past which the listing and the REPORT name only the placed attachments (at most
/// `[intake].max_attachments`, itself at most 100); the refused rest are counted, so an
/// issue or a files directory with thousands of them cannot swell the request.
const LISTED_MAX: usize = 100;

/// One attachment as its source offers it, before anything is downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Offered {
    /// Its file name as the source gives it (never trusted as a path).
    pub name: String,
    /// The content type the source declares (`None`: it declares none).
    pub content_type: Option<String>,
    /// Its size in bytes, as the source declares it.
    pub size: u64,
    /// Where its bytes are (Redmine: the `content_url`, checked against the tracker).
    pub at: Option<String>,
}

/// An image format harness sends to a vision model, recognised by magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Image {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// GIF (87a or 89a).
    Gif,
    /// WebP.
    Webp,
}

impl Image {
    /// Its MIME type.
    pub(crate) fn mime(self) -> &'static str {
        match self {
            Image::Png => "image/png",
            Image::Jpeg => "image/jpeg",
            Image::Gif => "image/gif",
            Image::Webp => "image/webp",
        }
    }
}

/// What a file's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One of the image formats, by its magic bytes (whatever its name says).
    Image(Image),
    /// Text: no NUL byte in its first 8000 bytes.
    Text,
    /// Anything else.
    Binary,
}

/// The image format of `bytes`, by their magic bytes.
pub(crate) fn sniff_image(bytes: &[u8]) -> Option<Image> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Image::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(Image::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(Image::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(Image::Webp)
    } else {
        None
    }
}

/// What `bytes` are: an image, text or binary.
pub(crate) fn kind(bytes: &[u8]) -> Kind {
    match sniff_image(bytes) {
        Some(image) => Kind::Image(image),
        None if bytes[..bytes.len().min(TEXT_SNIFF)].contains(&0) => Kind::Binary,
        None => Kind::Text,
    }
}

/// The MIME type `bytes` show: an image's, `text/plain` or `application/octet-stream`.
pub(crate) fn type_of(bytes: &[u8]) -> &'static str {
    match kind(bytes) {
        Kind::Image(image) => image.mime(),
        Kind::Text => "text/plain",
        Kind::Binary => "application/octet-stream",
    }
}

/// Why an image cannot go to the model or the work root, when its bytes hold a secret the
/// run masks (a key in a PNG `tEXt` chunk or EXIF comment, as written or in an encoding
/// the Redactor knows): text is masked, but an image cannot be, so it is refused whole.
pub(crate) fn secret_in_image(
    bytes: &[u8],
    redactor: &crate::secrets::Redactor,
) -> Option<&'static str> {
    if redactor.is_empty() {
        return None;
    }
    // Lossy: every run of printable bytes (where metadata sits) is kept as it is.
    let text = String::from_utf8_lossy(bytes);
    (redactor.redact(&text) != text).then_some(
        "an image whose bytes hold a secret harness masks (an image cannot be masked, so it is neither placed nor shown)",
    )
}

/// An image as an OpenAI `image_url` content part (a base64 `data:` URL).
pub(crate) fn image_part(image: Image, bytes: &[u8]) -> Part {
    Part::ImageUrl {
        image_url: ImageUrl {
            url: format!(
                "data:{};base64,{}",
                image.mime(),
                crate::secrets::encodings::base64(bytes)
            ),
        },
    }
}

/// For each offered attachment, in order: `Ok(())` to take it, or why it is refused. The
/// first `max_count` are considered; one larger than `max_bytes`, or that would take the
/// total past `max_total_bytes`, or whose bytes are not on the tracker (`on_tracker` says
/// of its `at`), is refused, never downloaded.
pub(crate) fn admit(
    offered: &[Offered],
    cfg: &AttachmentsConfig,
    on_tracker: &dyn Fn(&str) -> bool,
) -> Vec<Result<(), String>> {
    let mut total: u64 = 0;
    let mut taken = 0;
    offered
        .iter()
        .map(|o| {
            if let Some(at) = o.at.as_deref().filter(|at| !on_tracker(at)) {
                return Err(format!(
                    "refused: its content_url {at:?} is not on the tracker, and nothing is downloaded from any other host"
                ));
            }
            if taken >= cfg.max_count {
                return Err(format!(
                    "refused: more attachments than [intake].max_attachments ({})",
                    cfg.max_count
                ));
            }
            if o.size > cfg.max_bytes {
                return Err(format!(
                    "refused: larger than [intake].max_attachment_bytes ({} bytes)",
                    cfg.max_bytes
                ));
            }
            if total.saturating_add(o.size) > cfg.max_total_bytes {
                return Err(format!(
                    "refused: with it the attachments would pass [intake].max_attachments_total_bytes ({} bytes)",
                    cfg.max_total_bytes
                ));
            }
            total += o.size;
            taken += 1;
            Ok(())
        })
        .collect()
}

/// The names the attachments are placed under: each name's last path component, every
/// byte but `A-Z a-z 0-9 . _ -` made `_`, no leading dot, at most 100 bytes, and a repeat
/// made unique with `-2`, `-3`, ...
pub(crate) fn safe_names(names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
        let mut safe: String = last
            .chars()
            .map(|c| match c {
                'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
                _ => '_',
            })
            .collect();
        safe = safe.trim_start_matches('.').to_string();
        safe.truncate(NAME_MAX);
        if safe.is_empty() {
            safe = "attachment".to_string();
        }
        let mut unique = safe.clone();
        let mut n = 2;
        while out.contains(&unique) {
            let (stem, ext) = match safe.rsplit_once('.') {
                Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
                _ => (safe.as_str(), String::new()),
            };
            unique = format!("{stem}-{n}{ext}");
            n += 1;
        }
        out.push(unique);
    }
    out
}

/// What became of one attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// A text file, masked, placed at this path (relative to the work root).
    Text(String),
    /// An image placed at this path; `Ok` when it is sent to the model, else why not.
    Image(String, Result<(), String>),
    /// Not placed, and why.
    Refused(String),
}

/// One attachment as the task message lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The name the source gave it.
    pub name: String,
    /// The declared content type, else what its bytes are.
    pub content_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// What became of it.
    pub fate: Fate,
}

/// A task's attachments, placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attached {
    /// Each attachment and what became of it.
    pub listed: Vec<Listed>,
    /// The image parts for the opening message (empty unless the tier sees images).
    pub images: Vec<Part>,
}

impl Attached {
    /// The listing the opening message carries (empty: no attachments).
    pub(crate) fn listing(&self) -> String {
        listing(&self.listed)
    }
}

/// The listing the task message carries: one line per attachment with its name, type, size
/// and what became of it. Empty when the task has no attachments.
pub(crate) fn listing(listed: &[Listed]) -> String {
    if listed.is_empty() {
        return String::new();
    }
    let s = if listed.len() == 1 { "" } else { "s" };
    let out = format!("[harness] The task has {} attachment{s}:\n", listed.len());
    (out + &lines(listed)).trim_end().to_string()
}

/// The REPORT's **Attachments** section: the same lines as the listing (`None`: the task
/// had none).
pub(crate) fn section(listed: &[Listed]) -> Option<String> {
    if listed.is_empty() {
        return None;
    }
    Some(format!("## Attachments\n\n{}", lines(listed)))
}

/// The attachments' lines: every one placed, and refused ones while fewer than
/// [`LISTED_MAX`] lines are out; then how many refused ones were left out.
fn lines(listed: &[Listed]) -> String {
    let (mut out, mut shown, mut more) = (String::new(), 0, 0);
    for l in listed {
        if shown >= LISTED_MAX && matches!(l.fate, Fate::Refused(_)) {
            more += 1;
            continue;
        }
        out.push_str(&line(l));
        shown += 1;
    }
    if more > 0 {
        out.push_str(&format!("- ... and {more} more, refused and not listed\n"));
    }
    out
}

/// One attachment's line: name, type, size and what became of it.
fn line(l: &Listed) -> String {
    let name = crate::bounded::one_line(&l.name, NAME_MAX * 2);
    let what = match &l.fate {
        Fate::Text(path) => {
            format!("text, placed read-only at {path} (secrets masked): read it with read_file")
        }
        Fate::Image(path, Ok(())) => {
            format!("image, shown to you with this message; also at {path}")
        }
        Fate::Image(path, Err(why)) => format!("image at {path}, not shown: {why}"),
        Fate::Refused(why) => why.clone(),
    };
    format!(
        "- {name} ({}, {} bytes): {what}\n",
        crate::bounded::one_line(&l.content_type, 100),
        l.size
    )
}

/// The first request's messages with the attachments joined to their last user message
/// (the one that opens this run): the listing after its text, then the image parts. No
/// attachments: the messages as they were.
pub(crate) fn into_opening(mut messages: Vec<Message>, attached: &Attached) -> Vec<Message> {
    let (listing, images) = (attached.listing(), &attached.images);
    if listing.is_empty() && images.is_empty() {
        return messages;
    }
    if let Some(Message::User { content }) = messages.last_mut() {
        let text = match content.text() {
            t if t.is_empty() => listing,
            t => format!("{t}\n\n{listing}"),
        };
        *content = if images.is_empty() {
            Content::Text(text)
        } else {
            let mut parts = vec![Part::Text { text }];
            parts.extend(images.iter().cloned());
            Content::Parts(parts)
        };
    }
    messages
}

#[cfg(test)]
mod tests;
