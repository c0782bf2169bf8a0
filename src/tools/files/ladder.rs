//! Tools stage, PURE: `edit_file`'s match ladder. A file's text, `old_string`, `new_string`
//! and `replace_all` in; the edited text and the level that matched out, or a refusal.
//!
//! The exact text is tried first. When it is absent, looser levels follow, each tried only
//! when every stricter one found nothing: line endings, then whole lines compared without
//! trailing whitespace, without indentation, and with Unicode punctuation folded to ASCII.
//! A level with more than one match refuses (unless `replace_all`) instead of going looser.

/// How loosely `old_string` was matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Byte for byte.
    Exact,
    /// Byte for byte once `old_string`'s line endings follow the file's (CRLF or LF).
    LineEndings,
    /// Whole lines, trailing whitespace ignored.
    TrailingWhitespace,
    /// Whole lines, leading and trailing whitespace ignored; `new_string` is re-indented.
    Indentation,
    /// As `Indentation`, with curly quotes, dashes and Unicode spaces read as ASCII.
    Punctuation,
}

impl Level {
    /// The name reported to the model.
    pub fn describe(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::LineEndings => "line endings (CRLF/LF) adjusted",
            Level::TrailingWhitespace => "trailing whitespace ignored",
            Level::Indentation => "indentation ignored (new_string re-indented to the file's)",
            Level::Punctuation => {
                "Unicode punctuation read as ASCII (quotes, dashes, spaces) and indentation ignored"
            }
        }
    }
}

/// A successful edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The whole new text of the file.
    pub text: String,
    /// The level that matched.
    pub level: Level,
    /// 1-based line numbers (in the old text) where each replacement starts.
    pub lines: Vec<usize>,
}

/// Applies one edit, or says why not.
pub fn apply(text: &str, old: &str, new: &str, replace_all: bool) -> Result<Edit, String> {
    if old.is_empty() {
        return Err(
            "old_string is empty; give the exact text to replace (to create or overwrite a whole file use write_file)"
                .into(),
        );
    }
    if old == new {
        return Err("old_string and new_string are the same; nothing would change".into());
    }
    if let Some(edit) = exact(text, old, new, replace_all, Level::Exact)? {
        return Ok(edit);
    }
    let crlf = text.contains("\r\n");
    let eol = if crlf { "\r\n" } else { "\n" };
    let (old_eol, new_eol) = (to_eol(old, eol), to_eol(new, eol));
    if old_eol != old {
        if let Some(edit) = exact(text, &old_eol, &new_eol, replace_all, Level::LineEndings)? {
            return Ok(edit);
        }
    }
    if old.trim().is_empty() {
        return Err(
            "old_string is only whitespace and was not found exactly; looser matching would match any blank text, so give surrounding lines"
                .into(),
        );
    }
    for level in [
        Level::TrailingWhitespace,
        Level::Indentation,
        Level::Punctuation,
    ] {
        if let Some(edit) = by_lines(text, old, new, replace_all, level, eol)? {
            return Ok(edit);
        }
    }
    Err("old_string was not found, not even ignoring line endings, trailing whitespace, indentation or Unicode punctuation; read the file again and copy the text exactly".into())
}

fn to_eol(s: &str, eol: &str) -> String {
    let lf = s.replace("\r\n", "\n");
    if eol == "\n" {
        lf
    } else {
        lf.replace('\n', eol)
    }
}

fn ambiguous(n: usize, level: Level) -> String {
    format!(
        "old_string matches {n} places (match: {}); include more surrounding lines to make it unique, or set replace_all to change every one",
        level.describe()
    )
}

fn exact(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    level: Level,
) -> Result<Option<Edit>, String> {
    // Overlapping starts count for uniqueness: "aa" in "aaa" is two places.
    let next_start = |from: usize| {
        let step = text[from..].chars().next().map_or(1, char::len_utf8);
        text.get(from + step..)
            .and_then(|rest| rest.find(old))
            .map(|i| i + from + step)
    };
    let Some(first) = text.find(old) else {
        return Ok(None);
    };
    if !replace_all {
        if let Some(second) = next_start(first) {
            let mut n = 2;
            let mut at = second;
            while let Some(next) = next_start(at) {
                n += 1;
                at = next;
            }
            return Err(ambiguous(n, level));
        }
    }
    let mut lines = Vec::new();
    let (mut line, mut counted) = (1, 0);
    for (i, _) in text.match_indices(old) {
        line += text[counted..i].matches('\n').count();
        counted = i;
        lines.push(line);
    }
    Ok(Some(Edit {
        text: text.replace(old, new),
        level,
        lines,
    }))
}

/// One line of the file: byte range of its text, without the line ending.
struct Line {
    start: usize,
    end: usize,
}

fn lines_of(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices('\n') {
        let end = if text[..i].ends_with('\r') { i - 1 } else { i };
        out.push(Line { start, end });
        start = i + 1;
    }
    if start < text.len() {
        let end = if text.ends_with('\r') {
            text.len() - 1
        } else {
            text.len()
        };
        out.push(Line { start, end });
    }
    out
}

fn fold_punctuation(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect::<String>()
        .replace('\u{2026}', "...")
}

fn same(level: Level, a: &str, b: &str) -> bool {
    match level {
        Level::Exact | Level::LineEndings => a == b,
        Level::TrailingWhitespace => a.trim_end() == b.trim_end(),
        Level::Indentation => a.trim() == b.trim(),
        Level::Punctuation => fold_punctuation(a).trim() == fold_punctuation(b).trim(),
    }
}

fn indent(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

fn by_lines(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    level: Level,
    eol: &str,
) -> Result<Option<Edit>, String> {
    let old_lf = old.replace("\r\n", "\n");
    let new_lf = new.replace("\r\n", "\n");
    // A trailing newline on old_string ends its last line; the file's own ending is kept.
    let (old_body, new_body) = match old_lf.strip_suffix('\n') {
        Some(o) => (o, new_lf.strip_suffix('\n').unwrap_or(&new_lf)),
        None => (old_lf.as_str(), new_lf.as_str()),
    };
    let want: Vec<&str> = old_body.split('\n').collect();
    let lines = lines_of(text);
    if want.len() > lines.len() {
        return Ok(None);
    }
    let at = |i: usize| &text[lines[i].start..lines[i].end];
    let starts: Vec<usize> = (0..=lines.len() - want.len())
        .filter(|&i| {
            want.iter()
                .enumerate()
                .all(|(j, w)| same(level, at(i + j), w))
        })
        .collect();
    if starts.is_empty() {
        return Ok(None);
    }
    if starts.len() > 1 && !replace_all {
        return Err(ambiguous(starts.len(), level));
    }
    let mut out = String::with_capacity(text.len() + new.len());
    let mut copied = 0;
    let mut next_free = 0;
    let mut done = Vec::new();
    for &i in &starts {
        if i < next_free {
            continue;
        }
        let last = i + want.len() - 1;
        out.push_str(&text[copied..lines[i].start]);
        out.push_str(&reindent(new_body, &want, |j| at(i + j), level).replace('\n', eol));
        copied = lines[last].end;
        next_free = last + 1;
        done.push(i + 1);
    }
    out.push_str(&text[copied..]);
    Ok(Some(Edit {
        text: out,
        level,
        lines: done,
    }))
}

/// At the indentation levels, moves `new` by the difference between the file's indentation
/// and `old_string`'s, taken from their first non-blank line.
fn reindent<'a>(
    new: &str,
    want: &[&str],
    file_line: impl Fn(usize) -> &'a str,
    level: Level,
) -> String {
    if !matches!(level, Level::Indentation | Level::Punctuation) {
        return new.to_string();
    }
    let Some(j) = want.iter().position(|w| !w.trim().is_empty()) else {
        return new.to_string();
    };
    let (from, to) = (indent(want[j]), indent(file_line(j)));
    if from == to {
        return new.to_string();
    }
    new.split('\n')
        .map(|l| match l.strip_prefix(from) {
            Some(rest) if !l.trim().is_empty() => format!("{to}{rest}"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// `edits!(name, file, old, new, replace_all => new_file, level)`.
    macro_rules! edits {
        ($name:ident, $text:expr, $old:expr, $new:expr, $all:expr => $want:expr, $level:expr) => {
            #[test]
            fn $name() {
                let e = apply($text, $old, $new, $all).unwrap();
                assert_eq!((e.text.as_str(), e.level), ($want, $level));
            }
        };
    }
    /// `refuses!(name, file, old, new, replace_all => words in the reason)`.
    macro_rules! refuses {
        ($name:ident, $text:expr, $old:expr, $new:expr, $all:expr => $why:expr) => {
            #[test]
            fn $name() {
                let e = apply($text, $old, $new, $all).unwrap_err();
                assert!(e.contains($why), "{e}");
            }
        };
    }

    edits!(exact_unique, "a\nb\nc\n", "b", "B", false => "a\nB\nc\n", Level::Exact);
    edits!(exact_mid_line, "let x = 1;\n", "x = 1", "x = 2", false => "let x = 2;\n", Level::Exact);
    edits!(replace_all_every_one, "a b a\n", "a", "z", true => "z b z\n", Level::Exact);
    refuses!(ambiguous_exact, "a b a\n", "a", "z", false => "matches 2 places (match: exact)");
    refuses!(overlapping_is_ambiguous, "aaa", "aa", "b", false => "matches 2 places");
    refuses!(empty_old, "abc", "", "x", false => "old_string is empty");
    refuses!(no_change, "abc", "b", "b", false => "the same");
    refuses!(whitespace_only_not_found, "a\n\nb\n", "   \n", "x", false => "only whitespace");
    refuses!(absent, "fn main() {}\n", "fn other()", "x", false => "was not found");
    edits!(crlf_file_lf_old, "a\r\nb\r\nc\r\n", "a\nb\n", "x\ny\n", false => "x\r\ny\r\nc\r\n", Level::LineEndings);
    edits!(lf_file_crlf_old, "a\nb\nc\n", "a\r\nb", "x\r\ny", false => "x\ny\nc\n", Level::LineEndings);
    edits!(trailing_space, "fn a() {  \n    x\n}\n", "fn a() {\n    x", "fn a() {\n    y", false => "fn a() {\n    y\n}\n", Level::TrailingWhitespace);
    edits!(indentation_moved, "fn a() {\n        x();\n        y();\n}\n", "x();\n    y();", "x();\n    z();", false => "fn a() {\n        x();\n            z();\n}\n", Level::Indentation);
    edits!(indentation_reindented, "    if a {\n        b();\n    }\n", "if a {\n    b();\n}", "if a {\n    c();\n}", false => "    if a {\n        c();\n    }\n", Level::Indentation);
    edits!(curly_quotes, "say(\u{201C}hi\u{201D}); // it\u{2019}s\n", "say(\"hi\"); // it's", "say(\"bye\");", false => "say(\"bye\");\n", Level::Punctuation);
    edits!(dashes_and_nbsp, "a \u{2014} b\u{00A0}c\n", "a - b c", "d", false => "d\n", Level::Punctuation);
    edits!(crlf_kept_at_loose_levels, "a  \r\nb\r\n", "a\nb", "x\ny", false => "x\r\ny\r\n", Level::TrailingWhitespace);
    refuses!(ambiguous_loose, "  x\n\tx\n", "x ", "y", false => "matches 2 places (match: indentation");
    edits!(replace_all_loose, "  x\n\tx\n", "x ", "y", true => "  y\n\ty\n", Level::Indentation);
    edits!(last_line_without_newline, "a\nb", "b ", "c", false => "a\nc", Level::TrailingWhitespace);

    #[test]
    fn reports_the_line_of_each_replacement() {
        let e = apply("x\ny\nx\n", "x", "z", true).unwrap();
        assert_eq!(e.lines, vec![1, 3]);
        let e = apply("a\n  b\n", "b", "c", false).unwrap();
        assert_eq!(e.lines, vec![2]);
    }
}
