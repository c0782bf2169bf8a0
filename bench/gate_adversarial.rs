// Adversarial inputs for the gate, each close to its 128 KiB input cap: shared by the gate's
// bench (bench/gate.rs, which prints the worst case) and by its unit tests (which bound it),
// through `include!`. Every verdict must take time linear in the input.

/// (name, command) pairs, each command at most `cap` bytes.
fn adversarial(cap: usize) -> Vec<(&'static str, String)> {
    /// `head`, then `unit` repeated while it fits, then `tail`.
    fn fill(cap: usize, head: &str, unit: &str, tail: &str) -> String {
        let room = cap.saturating_sub(head.len() + tail.len());
        format!("{head}{}{tail}", unit.repeat(room / unit.len().max(1)))
    }
    vec![
        ("awk_divisions", fill(cap, "awk '{x=1", "/1", "}' f")),
        ("awk_divisions_lines", fill(cap, "awk '{x=1", "/1\n", "}' f")),
        ("awk_strings", fill(cap, "awk '{x=", "\"a\" ", "}' f")),
        ("awk_regexes", fill(cap, "awk '", "/[a]/ ", "' f")),
        ("awk_open_brackets", fill(cap, "awk '/", "[", "/' f")),
        ("sed_substitutions", fill(cap, "sed '", "s/a/b/;", "' f")),
        ("sed_brackets", fill(cap, "sed 's/", "[[:alpha:]]", "/x/' f")),
        ("sed_open_brackets", fill(cap, "sed 's/", "[", "/x/' f")),
        ("sed_labels", fill(cap, "sed '", ":a ", "' f")),
        ("one_long_word", fill(cap, "echo ", "a", "")),
        ("many_words", fill(cap, "echo", " a", "")),
        ("many_segments", fill(cap, "ls", ";ls", "")),
        ("many_pipes", fill(cap, "ls", "|cat", "")),
        ("many_and_or", fill(cap, "ls", " && ls || ls", "")),
        ("line_continuations", fill(cap, "echo a", "\\\n", " b")),
        ("ansi_c_escapes", fill(cap, "echo $'", "\\c\\\\", "'")),
        ("ansi_c_octal", fill(cap, "echo $'", "\\101", "'")),
        ("double_quote_escapes", fill(cap, "echo \"", "\\\\", "\"")),
        ("single_quotes", fill(cap, "echo ", "'a'", "")),
        ("heredoc_lines", fill(cap, "cat <<E\n", "line\n", "E\n")),
        ("heredoc_many", fill(cap, "cat", " <<E", "\n") + &"E\n".repeat(0)),
        ("redirections", fill(cap, "ls", " >/dev/null", "")),
        ("braces", fill(cap, "echo ", "{a,b}", "")),
        ("globs", fill(cap, "ls ", "*?", "")),
        ("variables", fill(cap, "echo ", "$HOME", "")),
        ("sh_c_script", fill(cap, "sh -c '", "ls;", "'")),
        ("bash_c_nested", fill(cap, "bash -c \"bash -c 'ls ", "a ", "'\"")),
        ("xargs_long", fill(cap, "ls | xargs ", "a ", "")),
        ("find_execs", fill(cap, "find .", " -exec ls {} \\;", "")),
        ("env_assignments", fill(cap, "env", " A=1", " ls")),
        ("git_configs", fill(cap, "git", " -c a.b=c", " status")),
        ("make_variables", fill(cap, "make", " A=b", "")),
        ("python_code", fill(cap, "python3 -c '", "x=1;", "'")),
        ("perl_substitutions", fill(cap, "perl -pe '", "s/a/b/;", "' f")),
        ("timeout_chain", fill(cap, "", "timeout 1 ", "ls")),
        ("comment", fill(cap, "ls #", "a", "")),
        ("tar_options", fill(cap, "tar", " -v", " -tf a.tar")),
        ("printf_format", fill(cap, "printf '", "%s", "' a")),
        ("rg_options", fill(cap, "rg", " -e a", " .")),
    ]
}
