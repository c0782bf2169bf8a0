//! Secrets, PURE: a secret's common encodings and a masker that finds them in text, the
//! second line behind the kernel (a command should never get to read a key at all).
//!
//! Each secret is looked for, besides its exact text (masked by the caller), as: its reverse
//! (`rev`); its hex, lower or upper case (`xxd -p`, `od -An -tx1`); its base64 at each of the
//! three alignments, so a key inside a longer base64 stream is found too (`base64`, also the
//! URL-safe alphabet); the reverse of each of those; and all of them with anything but
//! letters and digits between the characters (`od -c` prints `s   k   -   c`; `a-b-c`,
//! spaces, line breaks, `od`/`xxd`/`hexdump` offsets at the start of a line).
//!
//! How: both the text and every form are "squeezed" to their ASCII letters and digits, case
//! folded, plus every non-ASCII byte; a line's leading offset (6 to 8 hex digits then a colon
//! or a blank) is dropped from the text. One Aho-Corasick pass finds every form in the
//! squeezed text; each match maps back to a span of the original, which is masked whole. Time
//! and memory are linear in the text.
//!
//! Not found: other encodings (`od -x` swaps byte pairs, URL-encoding, compression,
//! encryption, any transformation a program can invent) and keys cut into pieces by
//! something other than separators (the ASCII column of `xxd` or `hexdump -C`). A command
//! that can read a key can leak it; only the read set stops that.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

/// Forms shorter than this once squeezed are not looked for: they would mask ordinary text.
pub const MIN_FORM: usize = 10;

/// Every encoded form of `secret`, squeezed (see the module doc), without duplicates and
/// without forms shorter than [`MIN_FORM`].
pub fn forms(secret: &str) -> Vec<Vec<u8>> {
    let reversed: String = secret.chars().rev().collect();
    let mut raw: Vec<String> = Vec::new();
    for base in [secret.to_string(), reversed] {
        let bytes = base.as_bytes();
        let mut encoded = vec![hex(bytes)];
        encoded.extend((0..3).map(|k| base64_core(bytes, k)));
        for e in &encoded {
            raw.push(e.chars().rev().collect());
        }
        raw.push(base);
        raw.extend(encoded);
    }
    let mut out: Vec<Vec<u8>> = Vec::new();
    for r in raw {
        let s = squeeze_form(&r);
        if s.len() >= MIN_FORM && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Builds the matcher for these squeezed forms; `None` when there are none.
pub fn matcher(forms: &[Vec<u8>]) -> Option<AhoCorasick> {
    if forms.is_empty() {
        return None;
    }
    // A contiguous NFA, never the DFA the crate picks for few patterns: the DFA's table is
    // states x byte classes and took seconds to build for one 4 KiB key (a minute at 8 KiB);
    // the NFA is built and searched in time linear in the forms' length and the text's.
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(forms)
        .ok()
}

/// `text` with every span where `matcher` finds a form replaced by `mask`.
pub fn mask(text: &str, matcher: &AhoCorasick, mask: &str) -> String {
    let (squeezed, offsets) = squeeze_text(text);
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for m in matcher.find_iter(&squeezed) {
        let mut start = offsets[m.start()];
        let mut end = offsets[m.end() - 1] + 1;
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        match spans.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => spans.push((start, end)),
        }
    }
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        out.push_str(&text[at..start]);
        out.push_str(mask);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

fn kept(b: u8) -> Option<u8> {
    if b.is_ascii_alphanumeric() {
        Some(b.to_ascii_lowercase())
    } else if b >= 0x80 {
        Some(b)
    } else {
        None
    }
}

fn squeeze_form(form: &str) -> Vec<u8> {
    form.bytes().filter_map(kept).collect()
}

/// The squeezed text and, for each of its bytes, its offset in `text`.
fn squeeze_text(text: &str) -> (Vec<u8>, Vec<usize>) {
    let bytes = text.as_bytes();
    let mut squeezed = Vec::with_capacity(bytes.len());
    let mut offsets = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut line_start = true;
    while i < bytes.len() {
        if line_start {
            line_start = false;
            i = skip_offset(bytes, i);
            continue;
        }
        let b = bytes[i];
        if b == b'\n' {
            line_start = true;
        } else if let Some(k) = kept(b) {
            squeezed.push(k);
            offsets.push(i);
        }
        i += 1;
    }
    (squeezed, offsets)
}

/// Past a dump's offset column at `i` (`0000020   `, `00000010: `), or `i` itself.
fn skip_offset(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
        j += 1;
    }
    let digits = bytes[j..]
        .iter()
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    let after = bytes.get(j + digits).copied();
    if (6..=8).contains(&digits) && matches!(after, Some(b':' | b' ' | b'\t')) {
        j + digits
    } else {
        i
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The base64 characters that depend on `bytes` alone when they sit `k` bytes past a
/// 3-byte boundary of a longer stream (k = 0, 1, 2).
fn base64_core(bytes: &[u8], k: usize) -> String {
    let mut data = vec![0u8; k];
    data.extend_from_slice(bytes);
    let full = base64(&data);
    let first = (8 * k).div_ceil(6);
    let last = 8 * (k + bytes.len()) / 6;
    full.get(first..last).unwrap_or("").to_string()
}

/// Standard base64 (RFC 4648, padded): also the `data:` URLs of images sent to a model.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const KEY: &str = "sk-canary-7f3a9c1e5b2d4f60";

    fn masked(text: &str) -> String {
        mask(text, &matcher(&forms(KEY)).unwrap(), "[redacted]")
    }

    /// A real program's output, to compare against what the masker knows.
    fn run(cmd: &str) -> String {
        let out = std::process::Command::new("bash")
            .args(["-c", cmd])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn base64_matches_the_real_tool() {
        for s in ["", "a", "ab", "abc", "abcd", KEY] {
            assert_eq!(
                base64(s.as_bytes()),
                run(&format!("printf %s '{s}' | base64 -w0"))
            );
        }
    }

    #[test]
    fn each_encoding_from_real_programs_is_masked() {
        let cases = [
            format!("printf '%s\\n' {KEY}"),
            format!("printf '%s\\n' {KEY} | rev"),
            format!("printf '%s\\n' {KEY} | base64"),
            format!("printf 'x%s' {KEY} | base64"),
            format!("printf 'xy%s\\n' {KEY} | base64"),
            format!("printf 'a long prefix that wraps the line: %s and more text after it to wrap again' {KEY} | base64 -w 20"),
            format!("printf '%s' {KEY} | base64 | rev"),
            format!("printf '%s' {KEY} | rev | base64"),
            format!("printf '%s' {KEY} | base64 | tr '+/' '-_'"),
            format!("printf '%s\\n' {KEY} | od -c"),
            format!("printf '%s\\n' {KEY} | od -An -c"),
            format!("printf '%s\\n' {KEY} | rev | od -c"),
            format!("printf '%s' {KEY} | xxd -p"),
            format!("printf '%s' {KEY} | xxd -p | tr a-f A-F"),
            format!("printf '%s' {KEY} | od -An -tx1"),
            format!("printf '%s' {KEY} | od -tx1"),
            format!("printf '%s' {KEY} | xxd -p | rev"),
            format!("printf '%s' {KEY} | sed 's/./&-/g'"),
            format!("printf '%s' {KEY} | fold -w 3"),
        ];
        for cmd in cases {
            let out = run(&cmd);
            assert!(!out.is_empty(), "{cmd}");
            let m = masked(&out);
            assert!(m.contains("[redacted]"), "{cmd}:\n{out}\n->\n{m}");
            // What is left must not hold a long run of the key's characters in any form.
            for form in forms(KEY) {
                let (sq, _) = squeeze_text(&m);
                let probe = &form[..MIN_FORM];
                assert!(
                    !sq.windows(probe.len()).any(|w| w == probe),
                    "{cmd}: a piece survived:\n{m}"
                );
            }
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "ls -l\n0000000   h   e   l   l   o\ncargo build --release\nsk-other-key\n";
        assert_eq!(masked(text), text);
        let dump = run("printf 'hello world, nothing secret here' | od -c");
        assert_eq!(masked(&dump), dump);
    }

    #[test]
    fn only_the_span_is_masked() {
        assert_eq!(
            masked("before s k - c a n a r y - 7 f 3 a 9 c 1 e 5 b 2 d 4 f 6 0 after"),
            "before [redacted] after"
        );
        assert_eq!(masked("é 06f4d2b5e1c9a3f7-yranac-ks é"), "é [redacted] é");
    }

    #[test]
    fn forms_skip_short_ones() {
        assert!(forms("abcd").iter().all(|f| f.len() >= MIN_FORM));
        assert_eq!(forms("ab-cd-ef-gh").len(), forms("ab-cd-ef-gh").len());
        assert!(!forms(KEY).is_empty());
    }
}
