//! The jail and the file tools against a real directory: every way out refused, nothing
//! written outside.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;
use harness_gate::{Rule, Verdict};

struct Setup {
    _dir: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
    tools: FileTools,
}

fn setup(protect: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let outside = dir.path().join("outside");
    fs::create_dir_all(work.join(".git")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(work.join(".git/config"), "[core]\n").unwrap();
    fs::write(work.join(".env"), "KEY=1\n").unwrap();
    fs::write(work.join("a.txt"), "alpha\nbeta\n").unwrap();
    fs::write(work.join("Makefile"), "all:\n").unwrap();
    fs::write(outside.join("victim"), "untouched\n").unwrap();
    let policy = Policy {
        default: Verdict::Deny,
        allow: vec![Rule::parse("./scripts/**").unwrap()],
        deny: Vec::new(),
        write_redirects: false,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    };
    let config = FilesConfig {
        enabled: true,
        protect: protect.iter().map(|s| s.to_string()).collect(),
        ..FilesConfig::default()
    };
    let tools = FileTools::open(config, &work, policy, Redactor::default()).unwrap();
    Setup {
        _dir: dir,
        work,
        outside,
        tools,
    }
}

impl Setup {
    fn call(&self, name: &str, args: Value) -> FileCall {
        self.tools.call(name, &args.to_string())
    }
    fn refused(&self, name: &str, args: Value) -> String {
        let c = self.call(name, args.clone());
        match c.outcome {
            Err(reason) => {
                assert_eq!(c.result, format!("error: {reason}"));
                reason
            }
            Ok(s) => panic!("{name} {args} was not refused: {s}\n{}", c.result),
        }
    }
    fn ok(&self, name: &str, args: Value) -> String {
        let c = self.call(name, args.clone());
        match c.outcome {
            Ok(_) => c.result,
            Err(e) => panic!("{name} {args} was refused: {e}"),
        }
    }
    /// Nothing outside the work root changed.
    fn outside_untouched(&self) {
        let names: Vec<_> = fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["victim".to_string()]);
        assert_eq!(
            fs::read_to_string(self.outside.join("victim")).unwrap(),
            "untouched\n"
        );
        assert!(!self.work.parent().unwrap().join("x").exists());
    }
}

fn write(path: &str) -> Value {
    json!({"path": path, "content": "pwned\n"})
}
fn read(path: &str) -> Value {
    json!({"path": path})
}
fn edit(path: &str, old: &str, new: &str) -> Value {
    json!({"path": path, "old_string": old, "new_string": new})
}

#[test]
fn dotdot_out_of_the_root_is_refused_by_the_kernel() {
    let s = setup(&[]);
    fs::create_dir(s.work.join("a")).unwrap();
    for p in ["../x", "../outside/victim", "a/../../x", "./../outside/new"] {
        let why = s.refused("write_file", write(p));
        assert!(why.contains("outside the work root"), "{p}: {why}");
    }
    let why = s.refused("read_file", read("../outside/victim"));
    assert!(why.contains("refused by the kernel"), "{why}");
    // `..` that stays inside is the kernel's to allow.
    s.ok("read_file", read("a/../a.txt"));
    let why = s.refused("write_file", write("nope/../../x"));
    assert!(why.contains("`..`"), "{why}");
    s.outside_untouched();
}

#[test]
fn absolute_paths_are_refused_with_the_relative_form_as_a_hint() {
    let s = setup(&[]);
    let victim = s.outside.join("victim");
    let why = s.refused("write_file", write(victim.to_str().unwrap()));
    assert!(why.contains("is absolute"), "{why}");
    let inside = s.work.canonicalize().unwrap().join("a.txt");
    let why = s.refused("read_file", read(inside.to_str().unwrap()));
    assert!(
        why.contains(r#"inside the work root it is "a.txt""#),
        "{why}"
    );
    s.refused("write_file", write("/tmp/harness-files-test-x"));
    assert!(!Path::new("/tmp/harness-files-test-x").exists());
    s.outside_untouched();
}

#[test]
fn git_and_dotfiles_are_neither_read_nor_written() {
    let s = setup(&[]);
    for p in [
        ".git/config",
        ".env",
        "sub/.hidden",
        ".git/hooks/pre-commit",
    ] {
        let why = s.refused("write_file", write(p));
        assert!(why.contains("dotfile"), "{p}: {why}");
    }
    for p in [".git/config", ".env"] {
        let why = s.refused("read_file", read(p));
        assert!(why.contains("dotfile"), "{p}: {why}");
        s.refused("edit_file", edit(p, "1", "2"));
    }
    assert_eq!(
        fs::read_to_string(s.work.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!s.work.join(".git/hooks").exists());
    assert!(
        !s.work.join("sub").exists(),
        "no directory is made for a refused write"
    );
}

#[test]
fn a_symlink_leading_out_is_refused() {
    let s = setup(&[]);
    symlink(&s.outside, s.work.join("out-dir")).unwrap();
    symlink(s.outside.join("victim"), s.work.join("out-file")).unwrap();
    symlink("../outside/victim", s.work.join("rel-out")).unwrap();
    for p in ["out-dir/victim", "out-dir/new", "out-file", "rel-out"] {
        s.refused("write_file", write(p));
        s.refused("edit_file", edit(p, "untouched", "pwned"));
    }
    for p in ["out-dir/victim", "out-file", "rel-out"] {
        let why = s.refused("read_file", read(p));
        assert!(why.contains("outside the work root"), "{p}: {why}");
    }
    s.outside_untouched();
}

#[test]
fn a_symlink_into_git_or_a_dangling_one_is_refused() {
    let s = setup(&[]);
    symlink(".git/config", s.work.join("plain")).unwrap();
    symlink(".git", s.work.join("g")).unwrap();
    symlink("nowhere/yet", s.work.join("dangling")).unwrap();
    assert!(s.refused("read_file", read("plain")).contains("dotfile"));
    assert!(s.refused("write_file", write("plain")).contains("dotfile"));
    assert!(s
        .refused("write_file", write("g/hooks/x"))
        .contains("dotfile"));
    let why = s.refused("write_file", write("dangling"));
    assert!(why.contains("does not exist"), "{why}");
    assert!(!s.work.join("nowhere").exists());
    assert_eq!(
        fs::read_to_string(s.work.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn a_symlink_inside_the_root_is_followed() {
    let s = setup(&[]);
    fs::create_dir(s.work.join("src")).unwrap();
    symlink("a.txt", s.work.join("src/link")).unwrap();
    assert!(s
        .refused("read_file", read("src/link"))
        .contains("does not exist"));
    symlink("../a.txt", s.work.join("src/up")).unwrap();
    s.ok("edit_file", edit("src/up", "beta", "gamma"));
    assert_eq!(
        fs::read_to_string(s.work.join("a.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    assert!(fs::symlink_metadata(s.work.join("src/up"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_file_replaced_by_a_symlink_between_read_and_write_cannot_lead_the_write_out() {
    let s = setup(&[]);
    s.ok("read_file", read("a.txt"));
    fs::remove_file(s.work.join("a.txt")).unwrap();
    symlink(s.outside.join("victim"), s.work.join("a.txt")).unwrap();
    s.refused("edit_file", edit("a.txt", "untouched", "pwned"));
    s.refused("write_file", write("a.txt"));
    s.outside_untouched();

    // The swap lands after the target was judged: the rename replaces the link itself.
    fs::remove_file(s.work.join("a.txt")).unwrap();
    fs::write(s.work.join("a.txt"), "alpha\n").unwrap();
    let target = s.tools.jail.target("a.txt").unwrap();
    fs::remove_file(s.work.join("a.txt")).unwrap();
    symlink(s.outside.join("victim"), s.work.join("a.txt")).unwrap();
    s.tools.jail.write(&target, b"new\n").unwrap();
    assert_eq!(fs::read_to_string(s.work.join("a.txt")).unwrap(), "new\n");
    assert!(!fs::symlink_metadata(s.work.join("a.txt"))
        .unwrap()
        .file_type()
        .is_symlink());

    // A parent directory swapped for a symlink: the write goes where the held directory is.
    fs::create_dir(s.work.join("d")).unwrap();
    let target = s.tools.jail.target("d/f.txt").unwrap();
    fs::rename(s.work.join("d"), s.work.join("d2")).unwrap();
    symlink(&s.outside, s.work.join("d")).unwrap();
    s.tools.jail.write(&target, b"x\n").unwrap();
    assert_eq!(fs::read_to_string(s.work.join("d2/f.txt")).unwrap(), "x\n");
    s.outside_untouched();
}

#[test]
fn build_files_path_rule_dirs_and_protect_globs_are_protected() {
    let s = setup(&["secrets", "docs/*.pem", "vendor/**"]);
    for p in ["Makefile", "sub/build.rs", "Cargo.toml", "x.mk"] {
        let why = s.refused("write_file", write(p));
        assert!(why.contains("build and test tools run"), "{p}: {why}");
    }
    s.ok("read_file", read("Makefile"));
    let why = s.refused("write_file", write("scripts/run.sh"));
    assert!(why.contains("lets programs run"), "{why}");
    fs::create_dir_all(s.work.join("secrets")).unwrap();
    fs::write(s.work.join("secrets/k"), "k\n").unwrap();
    for p in ["secrets/k", "a/secrets/b", "docs/key.pem", "vendor/x/y.rs"] {
        let why = s.refused("write_file", write(p));
        assert!(why.contains("[tools.files] protect"), "{p}: {why}");
    }
    assert!(s
        .refused("read_file", read("secrets/k"))
        .contains("protect"));
    s.ok("write_file", write("docs/readme.md"));
    assert!(!s.work.join("scripts").exists());
}

#[test]
fn writes_create_parents_atomically_and_keep_the_mode() {
    let s = setup(&[]);
    let r = s.ok(
        "write_file",
        json!({"path": "a/b/c.txt", "content": "one\ntwo\n"}),
    );
    assert_eq!(r, r#"created "a/b/c.txt": 8 bytes, 2 lines"#);
    assert_eq!(
        fs::read_to_string(s.work.join("a/b/c.txt")).unwrap(),
        "one\ntwo\n"
    );
    fs::write(s.work.join("run.py"), "print(1)\n").unwrap();
    fs::set_permissions(s.work.join("run.py"), fs::Permissions::from_mode(0o750)).unwrap();
    s.ok("edit_file", edit("run.py", "1", "2"));
    let mode = fs::metadata(s.work.join("run.py"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    let leftovers: Vec<_> = fs::read_dir(&s.work)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("harness-write"))
        .collect();
    assert!(leftovers.is_empty());
    assert!(s
        .refused("write_file", write("a/b"))
        .contains("not a regular file"));
    assert!(s.refused("write_file", write("a/")).contains("directory"));
    assert!(s
        .refused("read_file", read("a"))
        .contains("not a regular file"));
}

#[test]
fn reads_are_numbered_paged_and_binary_is_refused() {
    let s = setup(&[]);
    assert_eq!(
        s.ok("read_file", read("a.txt")),
        "     1\talpha\n     2\tbeta\n[end of file: 2 lines]"
    );
    let r = s.ok(
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 1}),
    );
    assert_eq!(r, "     2\tbeta\n[end of file: 2 lines]");
    fs::write(s.work.join("bin"), b"\x7fELF\0\0\x01").unwrap();
    assert!(s.refused("read_file", read("bin")).contains("binary"));
    assert!(s
        .refused("edit_file", edit("bin", "ELF", "x"))
        .contains("binary"));
    let why = s.refused("read_file", json!({"path": "a.txt", "lines": 3}));
    assert!(why.contains("not valid JSON"), "{why}");
    assert_eq!(
        s.call("read_file", json!({"path": "a.txt", "x": 1})).path,
        "a.txt"
    );
}

#[test]
fn an_edit_of_a_file_changed_since_it_was_read_is_refused() {
    let s = setup(&[]);
    s.ok("read_file", read("a.txt"));
    fs::write(s.work.join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let why = s.refused("edit_file", edit("a.txt", "beta", "B"));
    assert!(why.contains("read it again"), "{why}");
    assert!(s
        .refused("write_file", write("a.txt"))
        .contains("read it again"));
    s.ok("read_file", read("a.txt"));
    let r = s.ok("edit_file", edit("a.txt", "beta", "B"));
    assert_eq!(
        r,
        r#"edited "a.txt": 1 replacement at line 2 (match: exact)"#
    );
    // Its own write counts as read.
    s.ok("edit_file", edit("a.txt", "gamma", "C"));
    assert_eq!(
        fs::read_to_string(s.work.join("a.txt")).unwrap(),
        "alpha\nB\nC\n"
    );
}

#[test]
fn protect_globs() {
    use jail::protect_matches as m;
    assert!(m("*.pem", "a/b/key.pem"));
    assert!(m("secrets", "x/secrets/y"));
    assert!(!m("secrets", "secretsx/y"));
    assert!(m("tests/**", "tests/a/b.rs"));
    assert!(m("tests", "tests/a/b.rs"));
    assert!(!m("src/tests", "tests/a.rs"));
    assert!(m("src/**/gen.rs", "src/a/b/gen.rs"));
    assert!(m("src/**/gen.rs", "src/gen.rs"));
    assert!(m("a?c/d", "abc/d/e"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Path pieces that reach every corner of the jail: `..`, links out and into `.git`,
    /// absolute starts, dotfiles, protected and build files.
    const PIECES: &[&str] = &[
        "..", ".", "a", "out-dir", "out-file", "to-git", "dangling", ".git", ".env", "Makefile",
        "scripts", "secrets", "", "/", "victim", "config",
    ];

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 1..5).prop_map(|v| v.join("/"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn no_path_writes_outside_or_into_protected_places(
            calls in prop::collection::vec((0..3usize, path()), 1..8)
        ) {
            let s = setup(&["secrets"]);
            symlink(&s.outside, s.work.join("out-dir")).unwrap();
            symlink(s.outside.join("victim"), s.work.join("out-file")).unwrap();
            symlink(".git", s.work.join("to-git")).unwrap();
            symlink("../outside/new", s.work.join("dangling")).unwrap();
            for (tool, p) in calls {
                let args = match tool {
                    0 => write(&p),
                    1 => edit(&p, "untouched", "pwned"),
                    _ => read(&p),
                };
                let c = s.call(["write_file", "edit_file", "read_file"][tool], args);
                if let Ok(summary) = &c.outcome {
                    // Whatever succeeded stayed inside, away from protected places.
                    let rel = c.result.split('"').nth(1).unwrap_or("").to_string();
                    prop_assert!(tool == 2 || !rel.starts_with('.'), "{p}: {summary} {}", c.result);
                }
            }
            s.outside_untouched();
            prop_assert_eq!(fs::read_to_string(s.work.join(".git/config")).unwrap(), "[core]\n");
            prop_assert_eq!(fs::read_to_string(s.work.join(".env")).unwrap(), "KEY=1\n");
            prop_assert_eq!(fs::read_to_string(s.work.join("Makefile")).unwrap(), "all:\n");
            // A file named `scripts` is fine; nothing may land under the path rule's directory.
            prop_assert!(!s.work.join("scripts").is_dir() && !s.work.join("secrets").exists());
            prop_assert!(!s.work.join(".git/victim").exists() && !s.work.join(".git/a").exists());
        }
    }
}

#[test]
fn what_commands_may_never_read_the_file_tools_refuse_too() {
    let mut s = setup(&[]);
    fs::write(s.work.join("harness.toml"), "vertical = \"x\"\n").unwrap();
    fs::create_dir(s.work.join("reports")).unwrap();
    fs::write(s.work.join("reports/REPORT-1.md"), "earlier\n").unwrap();
    fs::write(s.work.join("reports-old.txt"), "fine\n").unwrap();
    s.tools.hide(vec![
        ("harness.toml".to_string(), "the config file".to_string()),
        ("reports".to_string(), "the report dir".to_string()),
    ]);
    let why = s.refused("read_file", read("harness.toml"));
    assert!(why.contains("is the config file"), "{why}");
    let why = s.refused("read_file", read("./reports/REPORT-1.md"));
    assert!(why.contains("is the report dir"), "{why}");
    s.refused("write_file", write("reports/new.md"));
    s.refused("edit_file", edit("harness.toml", "x", "y"));
    s.ok("read_file", read("reports-old.txt"));
}
