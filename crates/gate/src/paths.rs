//! tools stage (gate), PURE: path facts read from text: basenames, `path under prefix`, paths
//! outside the work root, /proc and /dev.

use crate::shell::lex::Word;
/// Is this command path inside /proc or /dev (`/proc/self/exe` is the calling shell)?
pub(crate) fn through_proc_or_dev(path: &str) -> bool {
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let climbs = comps.contains(&"..");
    comps.iter().enumerate().any(|(k, c)| match *c {
        "proc" => true,
        "dev" => (k == 0 && path.starts_with('/')) || climbs,
        _ => false,
    }) || (path.starts_with('/') && comps.first().is_some_and(|c| *c == ".."))
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Is `path` strictly under `prefix`, lexically? With `resolve_dotdot` false any `..` fails.
pub(crate) fn path_under(path: &str, prefix: &str, resolve_dotdot: bool) -> bool {
    fn norm(p: &str, resolve: bool) -> Option<(bool, Vec<&str>)> {
        let mut out: Vec<&str> = Vec::new();
        for c in p.split('/') {
            match c {
                "" | "." => {}
                ".." if resolve => {
                    out.pop();
                }
                ".." => return None,
                c => out.push(c),
            }
        }
        Some((p.starts_with('/'), out))
    }
    match (norm(path, resolve_dotdot), norm(prefix, resolve_dotdot)) {
        (Some((pa, pc)), Some((xa, xc))) => pa == xa && pc.len() > xc.len() && pc.starts_with(&xc),
        _ => false,
    }
}

/// Is this path outside the work root or inside a dot directory (absolute, `~`, `..`, `.git`)?
/// A path the gate cannot read counts as outside: an expansion (`$HOME/x`, `${D}`), a brace
/// (`{/,}tmp`), a tilde after `=` or `:`.
pub(crate) fn outside_path(p: &str) -> bool {
    p.starts_with('/')
        || p.starts_with('~')
        || p.contains(['$', '{', '`'])
        || p.contains("=~")
        || p.contains(":~")
        || p.split('/')
            .any(|c| c == ".." || (c.starts_with('.') && c != "."))
}

/// The first of `names` (spelled `--x v`, `--x=v`, `-x v` or `-x=v`) whose path value is
/// outside the work root.
pub(crate) fn path_option_outside<'a>(
    args: &'a [Word],
    names: &[&'a str],
) -> Option<(&'a str, &'a str)> {
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        for &n in names {
            let value = if v == n {
                args.get(k).map(|w| w.value.as_str())
            } else {
                v.strip_prefix(n).and_then(|r| r.strip_prefix('='))
            };
            if let Some(p) = value.filter(|p| outside_path(p)) {
                return Some((n, p));
            }
        }
    }
    None
}

/// Files that build and test tools run or load: writing one turns an allowed `make` or
/// `cargo test` into running what was written. Compared lowercased, by file name.
pub(crate) const BUILD_FILES: &[&str] = &[
    "makefile",
    "gnumakefile",
    "build.rs",
    "cargo.toml",
    "package.json",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "conftest.py",
    "tox.ini",
    "noxfile.py",
    "cmakelists.txt",
    "justfile",
    "rakefile",
    "gemfile",
    "build.gradle",
    "build.gradle.kts",
    "pom.xml",
    "meson.build",
    "build.ninja",
    "go.mod",
    "deno.json",
    "webpack.config.js",
    "vite.config.js",
    "jest.config.js",
    // Round three: more files a build or test tool runs or that name programs it runs
    // (`rust-toolchain.toml` `path`, bmake's `BSDmakefile`, Gradle settings, pytest's
    // `addopts = -p plugin`...).
    "bsdmakefile",
    "makefile.am",
    "makefile.in",
    "configure",
    "rust-toolchain",
    "rust-toolchain.toml",
    "go.work",
    "settings.gradle",
    "settings.gradle.kts",
    "gradle.properties",
    "build.xml",
    "build.sbt",
    "pytest.ini",
    "taskfile.yml",
    "taskfile.yaml",
    "deno.jsonc",
    "webpack.config.ts",
    "vite.config.ts",
    "vite.config.mjs",
    "jest.config.ts",
    "vitest.config.js",
    "vitest.config.ts",
    "babel.config.js",
    "rollup.config.js",
    "gulpfile.js",
    "gruntfile.js",
    "karma.conf.js",
    "sconstruct",
    "snakefile",
    "build.bazel",
    "workspace",
    "module.bazel",
    "mix.exs",
    "package.swift",
    "conanfile.py",
];

/// Is this file name (lowercased) one that build and test tools run or load?
pub(crate) fn is_build_file(lc: &str) -> bool {
    BUILD_FILES.contains(&lc) || is_makefile_name(lc)
}

/// A name make reads as a makefile when given with `-f` (lowercased): `Makefile`,
/// `GNUmakefile`, `BSDmakefile`, `*.mk`, `*.make`, `*.mak`. `make -f` takes only these, and
/// no program may write one, so make never reads a file whose lines the model shaped (a git
/// bundle's commit subjects, a tar archive's member names: make expands `$(shell …)` in a
/// line before it fails on it). `Makefile.bak` is not one: a copy may be made.
pub(crate) fn is_makefile_name(lc: &str) -> bool {
    matches!(lc, "makefile" | "gnumakefile" | "bsdmakefile")
        || lc.ends_with(".mk")
        || lc.ends_with(".make")
        || lc.ends_with(".mak")
}

/// Can a program that names its files `PREFIX`, a counter (letters or digits) and `SUFFIX`
/// (split's `xaa`, csplit's `xx00`) reach a build file? `split -l1 - Makefi` names its 291st
/// file `Makefile`. A counter of more than 4 characters would take millions of files.
pub(crate) fn counter_reaches_build_file(prefix: &str, suffix: &str) -> Option<&'static str> {
    let name = basename(prefix).to_ascii_lowercase();
    let suffix = suffix.to_ascii_lowercase();
    // A makefile extension the counter finishes (`split -a1 - x.ma` reaches `x.mak`).
    if suffix.is_empty() {
        for ext in [".mk", ".make", ".mak"] {
            if (1..ext.len()).any(|k| name.ends_with(&ext[..k])) {
                return Some(ext);
            }
        }
    }
    BUILD_FILES.iter().copied().find(|b| {
        b.strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_suffix(suffix.as_str()))
            .is_some_and(|counter| {
                counter.len() <= 4 && counter.chars().all(|c| c.is_ascii_alphanumeric())
            })
    })
}
