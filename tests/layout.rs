//! The crate's layout: no import circles between the modules of `src/`.
//!
//! Reads every `src/**/*.rs` (test code, from the first top-level `#[cfg(test)]`, left out),
//! finds each `crate::a::b` and `super::x` path, resolves it to the file of the deepest
//! module it names, and looks for a cycle in that file graph. A folder's `mod.rs` composes
//! its children, so a child naming its ancestors (their shared vocabulary) is not an arrow;
//! every other reference is. Prints each circle found.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`llm::client`, `` for the crate root) -> file, for every file under `src/`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // src/bin holds separate crates (binaries), not modules of the library.
                if path != src.join("bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            if parts == ["main"] {
                continue;
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// The code of a file without its test modules and its comment lines (docs name modules
/// in links without depending on them).
fn production_code(text: &str) -> String {
    let code = match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::...` and `super::...` path in `code`, as written, including the
/// `crate::{a, b::c}` groups of a `use` (flattened one level, which is all this crate uses).
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start).map(|i| i + from) {
            from = i + start.len();
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                && start == "crate::"
            {
                continue;
            }
            let mut end = i;
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || b"_:".contains(&bytes[end]))
            {
                end += 1;
            }
            let head = code[i..end].trim_end_matches(':').to_string();
            if end < bytes.len() && bytes[end] == b'{' {
                let close = code[end..].find('}').map_or(bytes.len(), |c| c + end);
                for item in code[end + 1..close].split(',') {
                    let item = item.split_whitespace().next().unwrap_or("");
                    if !item.is_empty() && item != "self" {
                        out.push(format!("{head}::{item}"));
                    }
                }
            }
            out.push(head);
        }
    }
    out
}

/// The module a path names: the deepest known module it starts with, resolved from `here`.
fn resolve(path: &str, here: &str, known: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if here.is_empty() {
        vec![]
    } else {
        here.split("::").collect()
    };
    if parts.first() == Some(&"crate") {
        base.clear();
        parts.remove(0);
    } else {
        while parts.first() == Some(&"super") {
            parts.remove(0);
            base.pop();
        }
    }
    let mut full: Vec<&str> = base;
    full.extend(parts);
    (0..=full.len())
        .rev()
        .map(|n| full[..n].join("::"))
        .find(|m| known.contains_key(m))
}

/// `child` when `k` is a direct child module of `module`.
fn child_name<'a>(module: &str, k: &'a str) -> Option<&'a str> {
    let rest = if module.is_empty() {
        k
    } else {
        k.strip_prefix(module)?.strip_prefix("::")?
    };
    (!rest.is_empty() && !rest.contains("::")).then_some(rest)
}

fn join(module: &str, child: &str) -> String {
    if module.is_empty() {
        child.to_string()
    } else {
        format!("{module}::{child}")
    }
}

/// Whether `code` holds `word` where it starts a path (not inside a longer name or path).
fn mentions(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        !code[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let known = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &known {
        let text = std::fs::read_to_string(file).unwrap();
        let targets = edges.entry(module.clone()).or_default();
        let code = production_code(&text);
        let mut found = paths(&code);
        // A folder names its own children without `self::` (`client::HttpClient`).
        for child in known.keys().filter_map(|k| child_name(module, k)) {
            if mentions(&code, &format!("{child}::")) {
                found.push(format!("crate::{}", join(module, child)));
            }
        }
        for p in found {
            let Some(target) = resolve(&p, module, &known) else {
                continue;
            };
            let ancestor = target.is_empty()
                || module == &target
                || module.starts_with(&format!("{target}::"));
            if !ancestor {
                targets.insert(target);
            }
        }
    }
    edges
}

/// Every elementary circle's smallest rotation, found by a DFS from each node.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    fn walk(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut c: Vec<String> = stack[i..].to_vec();
            let min = c
                .iter()
                .enumerate()
                .min_by_key(|(_, n)| (*n).clone())
                .map_or(0, |(i, _)| i);
            c.rotate_left(min);
            found.insert(c);
            return;
        }
        if found.len() > 50 {
            return;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            walk(next, edges, stack, found);
        }
        stack.pop();
    }
    let mut found = BTreeSet::new();
    for node in edges.keys() {
        walk(node, edges, &mut Vec::new(), &mut found);
    }
    found
}

#[test]
fn the_crate_has_no_import_circles() {
    // LAYOUT_SRC points the check at another tree (for example an older checkout).
    let src = std::env::var_os("LAYOUT_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = circles(&graph(&src));
    let shown: Vec<String> = found
        .iter()
        .map(|c| format!("{} -> {}", c.join(" -> "), c[0]))
        .collect();
    assert!(shown.is_empty(), "import circles:\n{}", shown.join("\n"));
}

#[test]
fn the_checker_sees_a_circle_and_the_arrows_of_a_use_group() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("llm")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod llm;\npub mod report;\n").unwrap();
    std::fs::write(
        src.join("llm/mod.rs"),
        "pub mod cassette;\nuse cassette::X;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("llm/cassette.rs"),
        "use super::Reply;\nfn f() { crate::report::write(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("report.rs"),
        "use crate::{llm::Reply, other};\n#[cfg(test)]\nmod tests { use crate::nothing; }\n",
    )
    .unwrap();
    let g = graph(src);
    assert_eq!(g["report"], BTreeSet::from(["llm".to_string()]));
    // The child naming its folder (`super::Reply`) is not an arrow; the folder naming the
    // child is, so llm -> llm::cassette -> report -> llm is a circle.
    assert_eq!(g["llm::cassette"], BTreeSet::from(["report".to_string()]));
    let found = circles(&g);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        vec![vec![
            "llm".to_string(),
            "llm::cassette".to_string(),
            "report".to_string()
        ]]
    );
}
