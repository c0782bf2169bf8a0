//! Tools stage, PURE over any reader: `read_file`'s pages. A reader, the first line, an
//! optional line count and a byte cap in; numbered lines and how to get the next page out.
//!
//! Lines are read one at a time with a cap on what is kept of each, so a page costs memory
//! in proportion to the cap, not to the file.

use std::io::{self, BufRead};

/// One page of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// `cat -n` style lines (number, tab, text) and a closing note in brackets.
    pub text: String,
    /// Lines shown.
    pub shown: u64,
}

/// Reads up to `max_bytes` of text starting at 1-based line `offset`, at most `limit` lines.
/// A line longer than the whole page is cut and says so; `dangling` tells how many bytes at
/// the end of a cut line may be the first half of a secret (they are dropped too, so the
/// redactor still sees no part of it). `Err` (outer) is an I/O failure; `Ok(Err)` is a
/// refusal for the model (past the end, not text).
pub fn read(
    mut reader: impl BufRead,
    offset: u64,
    limit: Option<u64>,
    max_bytes: usize,
    dangling: &dyn Fn(&str) -> usize,
) -> io::Result<Result<Page, String>> {
    let offset = offset.max(1);
    let mut line_no = 0u64;
    let mut text = String::new();
    let mut shown = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let Some(full_len) = read_line_capped(&mut reader, &mut buf, max_bytes)? else {
            // End of file.
            if line_no < offset && !(line_no == 0 && offset == 1) {
                return Ok(Err(format!(
                    "offset {offset} is past the end of the file ({line_no} lines)"
                )));
            }
            if line_no == 0 {
                text.push_str("[empty file]");
            } else {
                let s = if line_no == 1 { "" } else { "s" };
                text.push_str(&format!("[end of file: {line_no} line{s}]"));
            }
            return Ok(Ok(Page { text, shown }));
        };
        line_no += 1;
        if line_no < offset {
            continue;
        }
        if buf.contains(&0) {
            return Ok(Err(
                "the file is binary (it contains NUL bytes); the file tools read text only".into(),
            ));
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            return Ok(Err(format!(
                "line {line_no} is not UTF-8 text; the file tools read text only"
            )));
        };
        let line = line.trim_end_matches('\n').trim_end_matches('\r');
        let rendered = format!("{line_no:>6}\t{line}\n");
        let full = limit.is_some_and(|l| shown >= l)
            || (shown > 0 && text.len() + rendered.len() > max_bytes);
        if full {
            text.push_str(&format!(
                "[lines {offset}-{} shown; the file goes on: call read_file with offset={line_no} for the next page]",
                line_no - 1
            ));
            return Ok(Ok(Page { text, shown }));
        }
        if full_len > buf.len() as u64 || text.len() + rendered.len() > max_bytes {
            let mut end = max_bytes.saturating_sub(text.len()).min(line.len());
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            end -= dangling(&line[..end]);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            let cut = full_len - end as u64;
            text.push_str(&format!(
                "{line_no:>6}\t{} [... line cut: {cut} more bytes]\n",
                &line[..end]
            ));
        } else {
            text.push_str(&rendered);
        }
        shown += 1;
    }
}

/// Reads one line into `buf`, keeping at most `cap` bytes of it (cut on a UTF-8 boundary)
/// and skipping the rest. Returns the line's full length, or `None` at the end of input.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<u64>> {
    let mut total = 0u64;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len()).min(take);
        buf.extend_from_slice(&chunk[..room]);
        total += take as u64;
        reader.consume(take);
        if done {
            break;
        }
    }
    // A cut in the middle of a character would read as not UTF-8.
    if total > buf.len() as u64 {
        while !buf.is_empty() && std::str::from_utf8(buf).is_err() {
            buf.pop();
        }
    }
    Ok(Some(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn page(text: &str, offset: u64, limit: Option<u64>, max: usize) -> Result<String, String> {
        read(text.as_bytes(), offset, limit, max, &|_| 0)
            .unwrap()
            .map(|p| p.text)
    }

    #[test]
    fn numbers_lines_and_marks_the_end() {
        assert_eq!(
            page("a\r\nb\n", 1, None, 1000).unwrap(),
            "     1\ta\n     2\tb\n[end of file: 2 lines]"
        );
        assert_eq!(page("", 1, None, 1000).unwrap(), "[empty file]");
        assert_eq!(
            page("a\nb", 2, None, 1000).unwrap(),
            "     2\tb\n[end of file: 2 lines]"
        );
    }

    #[test]
    fn pages_by_bytes_and_by_limit_and_says_how_to_go_on() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let p = page(&text, 1, None, 60).unwrap();
        assert!(p.ends_with("[lines 1-4 shown; the file goes on: call read_file with offset=5 for the next page]"), "{p}");
        let p = page(&text, 10, Some(2), 10_000).unwrap();
        assert!(
            p.starts_with("    10\tline 10\n    11\tline 11\n[lines 10-11"),
            "{p}"
        );
    }

    #[test]
    fn a_long_line_is_cut_not_lost() {
        let text = format!("{}\nnext\n", "é".repeat(100));
        let p = page(&text, 1, None, 51).unwrap();
        assert!(p.contains("[... line cut:"), "{p}");
        assert!(p.contains("offset=2"), "{p}");
    }

    #[test]
    fn a_cut_never_leaves_the_first_half_of_a_secret() {
        let text = format!("{}sk-secret-value\n", "a".repeat(40));
        let half = |s: &str| if s.ends_with("sk-se") { 5 } else { 0 };
        let p = read(text.as_bytes(), 1, None, 45, &half)
            .unwrap()
            .unwrap()
            .text;
        assert!(
            p.starts_with(&format!(
                "     1\t{} [... line cut: 16 more bytes]",
                "a".repeat(40)
            )),
            "{p}"
        );
    }

    #[test]
    fn refuses_binary_and_past_the_end() {
        assert!(page("a\0b\n", 1, None, 100).unwrap_err().contains("binary"));
        assert!(read(&b"\xff\xfe\n"[..], 1, None, 100, &|_| 0)
            .unwrap()
            .unwrap_err()
            .contains("not UTF-8"));
        assert!(page("a\n", 5, None, 100)
            .unwrap_err()
            .contains("past the end"));
    }
}
