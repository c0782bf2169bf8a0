//! The workspace's layout: no import circles between the modules of `src/` or of any member
//! crate, the crate boundaries (who may depend on whom), the function-length ratchet.
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

/// Every workspace member's source tree (the root package's `src/` and each `crates/*/src`).
fn member_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    out.extend(crates);
    out
}

#[test]
fn no_workspace_crate_has_import_circles() {
    for src in member_sources() {
        let found = circles(&graph(&src));
        assert!(
            found.is_empty(),
            "{}: import circles {found:?}",
            src.display()
        );
    }
}

/// The `path` dependencies (other workspace members) a member's Cargo.toml names, by table.
fn member_dependencies(manifest: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let mut out = Vec::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = doc.get(table).and_then(|d| d.as_table()) else {
            continue;
        };
        for (name, spec) in deps {
            if spec.get("path").is_some() {
                out.push((table.to_string(), name.clone()));
            }
        }
    }
    out
}

#[test]
fn crate_boundaries_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The gate is pure and knows nothing of the run: it depends on no other member, and no
    // file of it names harness. The sandbox (with the spawner) depends on the gate alone
    // (the exec set asks its registry), never on the root crate: the root builds its
    // `Settings`. The test server is a seam for the tests, not product code.
    let allowed: [(&str, &[&str]); 3] = [
        ("gate", &[]),
        ("sandbox", &["harness-gate"]),
        ("scripted-llm", &[]),
    ];
    for (member, may) in allowed {
        let deps = member_dependencies(&root.join("crates").join(member).join("Cargo.toml"));
        assert!(
            deps.iter().all(|(_, name)| may.contains(&name.as_str())),
            "crates/{member} depends on members {deps:?}"
        );
    }
    // Every member is held here: a new crate says what it may depend on.
    let members: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|m| root.join("crates").join(m).join("Cargo.toml").is_file())
        .collect();
    for m in &members {
        assert!(
            allowed.iter().any(|(a, _)| a == m),
            "crates/{m}: say in crate_boundaries_hold which members it may depend on"
        );
        // The style rules are workspace lints, which a member keeps only by inheriting them.
        let manifest = std::fs::read_to_string(root.join("crates").join(m).join("Cargo.toml"));
        let doc: toml::Table = manifest.unwrap().parse().unwrap();
        let inherits = doc
            .get("lints")
            .and_then(|l| l.get("workspace"))
            .and_then(|w| w.as_bool());
        assert_eq!(inherits, Some(true), "crates/{m}: [lints] workspace = true");
    }
    for src in member_sources().iter().skip(1) {
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let code = production_code(&std::fs::read_to_string(&path).unwrap());
                    assert!(
                        !mentions(&code, "harness::"),
                        "{} names the harness crate",
                        path.display()
                    );
                }
            }
        }
    }
    // The product uses the gate and the sandbox; the test server reaches it only as a
    // dev-dependency.
    let deps = member_dependencies(&root.join("Cargo.toml"));
    for (table, name) in &deps {
        assert!(
            name == "harness-gate"
                || name == "harness-sandbox"
                || (table == "dev-dependencies" && name == "scripted-llm"),
            "harness's {table} names member {name}"
        );
    }
}

/// A function's first line (1-based), name and length in lines, for each `fn` with a body in
/// `code` (test code already cut off). Strings, chars and comments are skipped when counting
/// braces, so a `{` in a format string is not a block.
fn functions(code: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        if let Some(end) = body_end(&lines[i..]) {
            out.push((i + 1, name, end + 1));
        }
    }
    out
}

/// The name when `line` starts a function item (`pub(crate) async fn name`).
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    loop {
        let before = rest;
        for q in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(q).unwrap_or(rest);
        }
        rest = rest.strip_prefix("extern \"C\" ").unwrap_or(rest);
        if rest == before {
            break;
        }
    }
    let rest = rest.strip_prefix("fn ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The index of the line that closes the body opened on or after `lines[0]`; `None` for a
/// declaration without a body. Strings (plain and raw, over several lines), char literals and
/// line comments are skipped.
fn body_end(lines: &[&str]) -> Option<usize> {
    let text: Vec<char> = lines.join("\n").chars().collect();
    let (mut depth, mut opened, mut line, mut i) = (0i64, false, 0usize, 0usize);
    let at = |i: usize| text.get(i).copied();
    while i < text.len() {
        match text[i] {
            '\n' => line += 1,
            '/' if at(i + 1) == Some('/') => {
                while i + 1 < text.len() && text[i + 1] != '\n' {
                    i += 1;
                }
            }
            'r' if matches!(at(i + 1), Some('#' | '"'))
                && !at(i.wrapping_sub(1)).is_some_and(|c| c.is_alphanumeric() || c == '_') =>
            {
                let hashes = text[i + 1..].iter().take_while(|c| **c == '#').count();
                if at(i + 1 + hashes) == Some('"') {
                    let close: String = std::iter::once('"')
                        .chain("#".repeat(hashes).chars())
                        .collect();
                    let close: Vec<char> = close.chars().collect();
                    i += 2 + hashes;
                    while i < text.len() && !text[i..].starts_with(&close) {
                        line += usize::from(text[i] == '\n');
                        i += 1;
                    }
                    i += close.len() - 1;
                }
            }
            '"' => {
                i += 1;
                while i < text.len() && text[i] != '"' {
                    line += usize::from(text[i] == '\n');
                    i += if text[i] == '\\' { 2 } else { 1 };
                }
            }
            '\'' if at(i + 1) == Some('\\') => {
                i += 2;
                while i < text.len() && text[i] != '\'' {
                    i += 1;
                }
            }
            '\'' if at(i + 2) == Some('\'') => i += 2,
            '{' => {
                depth += 1;
                opened = true;
            }
            '}' => {
                depth -= 1;
                if opened && depth == 0 {
                    return Some(line);
                }
            }
            ';' if !opened => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The longest a function may be (DESIGN.md, "Rules of the code": about a screen; a helper
/// that names a step of a long function is welcome, a one-line wrapper is not).
const MAX_FN_LINES: usize = 80;

/// The functions still over [`MAX_FN_LINES`]: (file under the workspace root, function, its
/// length today). A ratchet: a listed function may shrink but not grow, a new long one fails,
/// and an entry that is no longer long must be removed. `table` marks a body that is one
/// lookup table (a `match` of one-line arms), where splitting would scatter one fact.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

#[test]
fn no_function_is_longer_than_a_screen_beyond_the_ratchet() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for src in member_sources() {
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let file = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                // Whole files of tests (declared `#[cfg(test)] mod tests;`) are not product code.
                if !file.ends_with(".rs") || file == "tests.rs" || file == "differential.rs" {
                    continue;
                }
                let code = production_code(&std::fs::read_to_string(&path).unwrap());
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                for (_, name, len) in functions(&code) {
                    if len > MAX_FN_LINES {
                        long.push((rel.clone(), name, len));
                    }
                }
            }
        }
    }
    let mut problems = Vec::new();
    for (file, name, len) in &long {
        match LONG_FUNCTIONS
            .iter()
            .find(|(f, n, _)| f == file && n == name)
        {
            None => problems.push(format!(
                "{file}: fn {name} is {len} lines (at most {MAX_FN_LINES})"
            )),
            Some((_, _, max)) if len > max => problems.push(format!(
                "{file}: fn {name} grew to {len} lines (ratchet {max})"
            )),
            Some(_) => {}
        }
    }
    for (file, name, max) in LONG_FUNCTIONS {
        if !long.iter().any(|(f, n, _)| f == file && n == name) {
            problems.push(format!(
                "{file}: fn {name} is no longer over {MAX_FN_LINES} lines: remove its entry ({max})"
            ));
        }
    }
    long.sort_by_key(|b| std::cmp::Reverse(b.2));
    let listing: Vec<String> = long
        .iter()
        .map(|(f, n, l)| format!("    (\"{f}\", \"{n}\", {l}),"))
        .collect();
    assert!(
        problems.is_empty(),
        "{}\n\nthe long functions today:\n{}",
        problems.join("\n"),
        listing.join("\n")
    );
}

#[test]
fn the_function_scanner_counts_bodies_not_strings() {
    let code = "pub(crate) async fn a(x: u8) -> u8 {\n    let s = \"{\";\n    let c = '{';\n    // {\n    x\n}\nfn decl();\nfn b<'a>(s: &'a str) {\n}\n\
                fn c() {\n    let t = r#\"}\"\n}\"#;\n    let u = \"\n}\";\n}\n";
    assert_eq!(
        functions(code),
        vec![
            (1, "a".to_string(), 6),
            (8, "b".to_string(), 2),
            (10, "c".to_string(), 6)
        ]
    );
}
