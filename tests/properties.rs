//! Property tests of the config loader: `config::parse` returns a `Config` or a list of
//! problems for ANY text (never a panic), whether the text is arbitrary or a mutation of
//! `harness.toml.example`, the file that documents every key. (The gate's own never-panics
//! properties live with it, in `crates/gate/src/`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use proptest::prelude::*;

fn example() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("harness.toml.example"))
        .unwrap()
}

fn parse(text: &str) {
    let _ = harness::config::parse(text, Path::new("/nonexistent/dir/harness.toml"));
}

/// One edit of a text: where (a fraction of its length, so any text fits) and what.
#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: f64, len: usize },
    Insert { at: f64, text: String },
    DuplicateLine { at: f64 },
    DropLine { at: f64 },
    ReplaceValue { at: f64, value: String },
    Truncate { at: f64 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Values a TOML file could plausibly carry, including the wrong types and edge numbers.
    let value = prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("9223372036854775807".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("1e308".to_string()),
        Just("nan".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("[[1], \"x\"]".to_string()),
        Just("\"\"".to_string()),
        Just("\"env:\"".to_string()),
        Just("\"file:\"".to_string()),
        Just("\"bw:x\"".to_string()),
        Just("\"*\"".to_string()),
        Just("\"**\"".to_string()),
        Just("1979-05-27T07:32:00Z".to_string()),
        "\"[ -~]{0,20}\"",
        "[0-9]{1,25}",
    ];
    let text = prop_oneof![
        "[\\[\\]{}=\"',.#\\n a-z_0-9-]{0,12}",
        Just("\n[loop]\n".to_string()),
        Just("\n[models]\n".to_string()),
        Just("\n[tools.bash]\n".to_string()),
        Just("\n[[demo]]\n".to_string()),
        Just("\n[models.classes]\nx = \"nope\"\n".to_string()),
        Just("\"\"\"".to_string()),
        Just("\\u{0}".to_string()),
        "\\PC{0,8}",
    ];
    prop_oneof![
        (0.0..1.0, 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (0.0..1.0, text).prop_map(|(at, text)| Mutation::Insert { at, text }),
        (0.0..1.0).prop_map(|at| Mutation::DuplicateLine { at }),
        (0.0..1.0).prop_map(|at| Mutation::DropLine { at }),
        (0.0..1.0, value).prop_map(|(at, value)| Mutation::ReplaceValue { at, value }),
        (0.0..1.0).prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// The char boundary at or before `at` (a fraction of the text).
fn position(text: &str, at: f64) -> usize {
    let mut i = ((text.len() as f64) * at) as usize;
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &mut String, m: &Mutation) {
    match m {
        Mutation::Delete { at, len } => {
            let start = position(text, *at);
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(start..end, "");
        }
        Mutation::Insert { at, text: t } => {
            let i = position(text, *at);
            text.insert_str(i, t);
        }
        Mutation::DuplicateLine { at } | Mutation::DropLine { at } => {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.is_empty() {
                return;
            }
            let i = ((lines.len() as f64 * at) as usize).min(lines.len() - 1);
            if matches!(m, Mutation::DuplicateLine { .. }) {
                lines.insert(i, lines[i].clone());
            } else {
                lines.remove(i);
            }
            *text = lines.join("\n");
        }
        Mutation::ReplaceValue { at, value } => {
            // The value of the `key = value` line nearest after the position.
            let i = position(text, *at);
            let Some(eq) = text[i..].find(" = ").map(|p| p + i + 3) else {
                return;
            };
            let end = text[eq..].find('\n').map_or(text.len(), |p| p + eq);
            text.replace_range(eq..end, value);
        }
        Mutation::Truncate { at } => {
            let i = position(text, *at);
            text.truncate(i);
        }
    }
}

#[test]
fn the_example_itself_parses() {
    let text = example();
    harness::config::parse(&text, Path::new("harness.toml.example")).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn parse_never_panics_on_arbitrary_text(text in "\\PC{0,400}") {
        parse(&text);
    }

    #[test]
    fn parse_never_panics_on_toml_shaped_text(
        text in "(\\[[a-z.]{0,12}\\]\\n|[a-z_]{1,12} = (\"[^\"\\n]{0,12}\"|[0-9-]{1,20}|true|\\[\\]|\\{\\})\\n){0,30}"
    ) {
        parse(&text);
    }

    #[test]
    fn parse_never_panics_on_mutations_of_the_example(
        mutations in proptest::collection::vec(mutation(), 1..8)
    ) {
        let mut text = example();
        for m in &mutations {
            apply(&mut text, m);
        }
        parse(&text);
    }
}
