//! Leaf, PURE: JSON text from outside (a peer's body, an SSE event, the model's tool-call
//! arguments) made readable as it is meant. JSON's grammar allows a `\uD800`-`\uDFFF` escape
//! that is not half of a pair (a model or proxy cutting an emoji in two sends one), but such
//! a lone surrogate is no Unicode character, so serde refuses the WHOLE document. Each is
//! replaced by `\uFFFD` (the replacement character), as a lossy UTF-8 read would, and the
//! rest is kept. Imports nothing from the crate.

use std::borrow::Cow;

/// `text` with every lone surrogate escape replaced by `\uFFFD`; unchanged (borrowed) when
/// it has none. Linear in the text; escaped backslashes (`\\ud800`) are left alone.
pub(crate) fn lone_surrogates_replaced(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut copied, mut i) = (0, 0);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = (b.get(i + 1) == Some(&b'u'))
            .then(|| hex4(b, i + 2))
            .flatten()
        else {
            // Any other escape, `\\` included, is two bytes.
            i += 2;
            continue;
        };
        let high = (0xD800..0xDC00).contains(&unit);
        let low = |at: usize| {
            b.get(at) == Some(&b'\\')
                && b.get(at + 1) == Some(&b'u')
                && hex4(b, at + 2).is_some_and(|u| (0xDC00..0xE000).contains(&u))
        };
        if high && low(i + 6) {
            i += 12;
            continue;
        }
        if !high && !(0xDC00..0xE000).contains(&unit) {
            i += 6;
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[copied..i]);
        o.push_str("\\ufffd");
        i += 6;
        copied = i;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

/// The value of the four hex digits at `at`, if there are four.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
    if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> String {
        serde_json::from_str::<String>(&lone_surrogates_replaced(json)).unwrap()
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        assert!(serde_json::from_str::<String>(r#""x \ud800 y""#).is_err());
        assert_eq!(read(r#""x \ud800 y""#), "x \u{fffd} y");
        assert_eq!(read(r#""\udc00""#), "\u{fffd}");
        assert_eq!(read(r#""\uD83D""#), "\u{fffd}");
        assert_eq!(read(r#""\ud800\ud800""#), "\u{fffd}\u{fffd}");
        // A low half before its high half is two lone ones.
        assert_eq!(read(r#""\ude00\ud83d""#), "\u{fffd}\u{fffd}");
        // At the very end, cut short.
        assert_eq!(read(r#""a\ud83d""#), "a\u{fffd}");
    }

    #[test]
    fn pairs_other_escapes_and_escaped_backslashes_are_kept() {
        let pair = r#""\ud83d\ude00 \u00e9 \n \\ud800 \"""#;
        assert!(matches!(lone_surrogates_replaced(pair), Cow::Borrowed(_)));
        assert_eq!(read(pair), "\u{1f600} \u{e9} \n \\ud800 \"");
        assert_eq!(read(r#""\\\ud800""#), "\\\u{fffd}");
        // Broken escapes are left for serde to refuse.
        assert_eq!(lone_surrogates_replaced(r#""\u12""#), r#""\u12""#);
        assert_eq!(lone_surrogates_replaced("\\"), "\\");
    }

    #[test]
    fn a_whole_reply_with_a_lone_surrogate_is_read() {
        let body = r#"{"choices":[{"message":{"content":"é\ud800"}}],"n":"\u0000"}"#;
        let v: serde_json::Value = serde_json::from_str(&lone_surrogates_replaced(body)).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "é\u{fffd}");
        assert_eq!(v["n"], "\0");
    }
}
