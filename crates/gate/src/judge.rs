//! tools stage (gate), PURE: the judge: lexes a command, judges every segment and recurses into the
//! commands wrappers and shells run; the only file that recurses.

use crate::hints::{builtin_hint, redirect_hint, syntax_hint, write_hint};
use crate::paths::{basename, through_proc_or_dev};
use crate::programs::argv::Inner;
use crate::programs::interpreters::{
    inline_code_can_run_programs, names_denied_program, opaque_mentions, stdin_code,
};
use crate::programs::registry::{
    canonical, denied_env, family, interpreter_env, Check, Code, Kind,
};
use crate::programs::sed::sed_args;
use crate::programs::wrappers::inner_command;
use crate::programs::{dangerous_args, expansion_into_options, stdin_findings};
use crate::redirect::{
    check_redirect, join, lexical, program_write_refusal, root_relative, write_refusal,
    write_target,
};
use crate::rule::{
    allow_matches, deny, deny_hint, first_denying, system_program, Judgement, Outcome, Policy,
    RuleKind, SegmentJudgement, Verdict,
};
use crate::shell::brush::brush_shape;
use crate::shell::lex::{Dialect, Lexer, Segment, Stdin, Word};
use crate::shell::words::{is_assignment, unsafe_var, RESERVED, STATE_BUILTINS};
/// Inputs longer than this are denied unread (bytes).
pub(crate) const MAX_INPUT_BYTES: usize = 128 * 1024;

/// How deep `sh -c`, wrappers and `find -exec` may nest before the gate gives up.
pub(crate) const MAX_DEPTH: usize = 8;

/// What the judge carries down a command: the policy, the directory the command runs in
/// (relative to the work root, "" for the root) and what it finds on the way.
pub(crate) struct Ctx<'a> {
    pub(crate) policy: &'a Policy,
    /// Where the segment being judged runs, relative to the work root ("" for the root).
    pub(crate) cwd: String,
    /// Run-time path checks ([`Judgement::runtime_path_checks`]).
    pub(crate) checks: Vec<(String, String)>,
    /// Directories the command changes into ([`Judgement::workdirs`]).
    pub(crate) workdirs: Vec<String>,
    /// The segment's verdict rested on the inline-code heuristic.
    pub(crate) heuristic: bool,
    /// Judging a probe (`python3 FILE`): no further probes.
    probing: bool,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(policy: &'a Policy) -> Ctx<'a> {
        Ctx {
            policy,
            cwd: String::new(),
            checks: Vec::new(),
            workdirs: Vec::new(),
            heuristic: false,
            probing: false,
        }
    }
}

/// Judges `command` under `policy`; never panics, on any input.
pub fn judge(policy: &Policy, command: &str) -> Judgement {
    judge_in(policy, "", command)
}

/// Judges `command` as run in `workdir` (the bash tool's `workdir` argument: a plain relative
/// directory under the work root, read like the directory of a leading `cd`; "" for the work
/// root itself).
pub fn judge_in(policy: &Policy, workdir: &str, command: &str) -> Judgement {
    let mut ctx = Ctx::new(policy);
    let result = if command.len() > MAX_INPUT_BYTES {
        Err(format!(
            "the command is {} bytes, over the gate's limit of {MAX_INPUT_BYTES} bytes",
            command.len()
        ))
    } else {
        match plain_subdir(policy, &Word::synthetic(workdir)) {
            _ if workdir.is_empty() => Ok(()),
            Ok(dir) => {
                ctx.cwd = dir.clone();
                ctx.workdirs.push(dir);
                Ok(())
            }
            Err(why) => Err(format!("the workdir `{workdir}` {why}")),
        }
        .and_then(|()| judge_program(&mut ctx, command, Dialect::Bash, 0, &Stdin::default()))
    };
    let segments = match result {
        Ok(segments) => segments,
        Err(reason) => vec![SegmentJudgement {
            text: command.to_string(),
            command_word: None,
            verdict: Verdict::Deny,
            rule: None,
            hint: if reason.starts_with("the workdir") {
                Some("give `workdir` as a plain relative directory under the working directory (`src`, `tests/unit`), or leave it out".into())
            } else {
                syntax_hint(&reason)
            },
            reason,
            heuristic: false,
        }],
    };
    let denied = segments.iter().find(|s| s.verdict == Verdict::Deny);
    let (verdict, reason, hint) = match denied {
        Some(s) => (Verdict::Deny, s.reason.clone(), s.hint.clone()),
        None if segments.is_empty() => (Verdict::Allow, "empty command".to_string(), None),
        None => (
            Verdict::Allow,
            format!(
                "all {} segment{} allowed",
                segments.len(),
                if segments.len() == 1 { "" } else { "s" }
            ),
            None,
        ),
    };
    if verdict == Verdict::Deny {
        ctx.checks.clear();
        ctx.workdirs.clear();
    }
    Judgement {
        command: command.to_string(),
        verdict,
        reason,
        hint,
        segments,
        runtime_path_checks: ctx.checks,
        workdirs: ctx.workdirs,
    }
}

/// `DIR` of a leading `cd DIR` or of `workdir`, relative to the work root without `.`
/// components: a plain relative path (no expansion, no `..`, no dot directory such as
/// `.git`, no option), or why not.
fn plain_subdir(policy: &Policy, w: &Word) -> Result<String, String> {
    let rel = root_relative(policy, &w.value).filter(|_| w.literal() && !w.ansi_c);
    let v = rel.as_deref().unwrap_or(w.value.as_str());
    if !w.literal() || w.ansi_c || v.contains(['$', '`', '\\']) {
        return Err("contains an expansion".into());
    }
    if v.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if v.starts_with('/') || v.starts_with('~') {
        return Err("is not a relative path under the work root".into());
    }
    if v.starts_with('-') {
        return Err("is an option, not a directory".into());
    }
    let comps: Vec<&str> = v
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.contains(&"..") {
        return Err("climbs with `..`".into());
    }
    if comps.iter().any(|c| c.starts_with('.')) {
        return Err("is or is inside a dot directory such as .git".into());
    }
    Ok(comps.join("/"))
}

/// A leading `cd DIR` followed by more segments: the directory (relative to the work root)
/// and whether everything after it is one `&&` chain of pipelines, so that nothing runs when
/// `cd` fails (otherwise the rest may run in the old directory too).
fn leading_cd(policy: &Policy, src: &str, segs: &[Segment]) -> Option<(String, bool)> {
    let (first, rest) = segs.split_first()?;
    if rest.is_empty()
        || first.words.len() != 2
        || !first.redirs.is_empty()
        || first.pipe_out
        || first.words[0].value != "cd"
        || !first.words[0].literal()
    {
        return None;
    }
    let dir = plain_subdir(policy, &first.words[1]).ok()?;
    let gap = |a: &Segment, b: &Segment| {
        b.start
            .and_then(|s| src.get(a.end..s))
            .map(|g| g.trim_matches([' ', '\t']).to_string())
    };
    // The separator right after `cd` must sequence it: `&&`, `;` or a newline (not `||`, `&`).
    let after = gap(first, &rest[0])?;
    if !matches!(after.as_str(), "&&" | ";" | "\n") {
        return None;
    }
    let chain = after == "&&"
        && segs
            .windows(2)
            .skip(1)
            .all(|p| gap(&p[0], &p[1]).is_some_and(|g| matches!(g.as_str(), "&&" | "|" | "|&")));
    Some((dir, chain))
}

pub(crate) fn judge_program(
    ctx: &mut Ctx<'_>,
    src: &str,
    dialect: Dialect,
    depth: usize,
    inherited: &Stdin,
) -> Result<Vec<SegmentJudgement>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("commands nest more than {MAX_DEPTH} levels deep"));
    }
    if src.contains('\0') {
        return Err("the command contains a NUL byte".into());
    }
    let segs = Lexer::with_dialect(src, dialect).run()?;
    let mut out = Vec::with_capacity(segs.len());
    let mut piped_in = false;
    let lead = if depth == 0 && dialect == Dialect::Bash && !ctx.probing {
        leading_cd(ctx.policy, src, &segs)
    } else {
        None
    };
    let outer = ctx.cwd.clone();
    let mut rest: &[Segment] = &segs;
    let mut also_outer = false;
    if let Some((dir, chain)) = &lead {
        let inner = lexical(&join(&outer, dir)).unwrap_or_default();
        out.push(cd_judgement(src, &segs[0], dir));
        ctx.workdirs.push(inner.clone());
        ctx.cwd = inner;
        also_outer = !chain;
        rest = &segs[1..];
    }
    for seg in rest {
        let mut j = judge_segment(ctx, src, seg, piped_in, depth, inherited);
        if also_outer && j.verdict == Verdict::Allow {
            j = judge_where_cd_failed(ctx, src, seg, piped_in, depth, inherited, &outer)
                .unwrap_or(j);
        }
        out.push(j);
        piped_in = seg.pipe_out;
    }
    ctx.cwd = outer;
    if out.iter().all(|s| s.verdict == Verdict::Allow) {
        cross_check(src, &segs)?;
    }
    Ok(out)
}

/// The judgement of a leading `cd DIR`, which is allowed.
fn cd_judgement(src: &str, seg: &Segment, dir: &str) -> SegmentJudgement {
    SegmentJudgement {
        text: seg
            .start
            .and_then(|s| src.get(s..seg.end))
            .unwrap_or_default()
            .to_string(),
        command_word: Some("cd".into()),
        verdict: Verdict::Allow,
        rule: None,
        reason: if dir.is_empty() {
            "`cd` to the work root itself; the rest is judged as run there".to_string()
        } else {
            format!(
                "`cd {dir}` changes into a directory inside the work root; the rest is judged as run there"
            )
        },
        hint: None,
        heuristic: false,
    }
}

/// `cd` may fail (`;`, `||` later): the rest may run where the command started. The denial
/// of a segment judged there, if it is denied there.
fn judge_where_cd_failed(
    ctx: &mut Ctx<'_>,
    src: &str,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    inherited: &Stdin,
    outer: &str,
) -> Option<SegmentJudgement> {
    let inner = std::mem::replace(&mut ctx.cwd, outer.to_string());
    let o = judge_segment(ctx, src, seg, piped_in, depth, inherited);
    ctx.cwd = inner;
    (o.verdict == Verdict::Deny).then(|| SegmentJudgement {
        reason: format!(
            "if `cd` fails, this runs where the command started, and there: {}",
            o.reason
        ),
        hint: Some(
            "join the commands with `&&` after `cd` (`cd DIR && a && b`), or use the bash tool's `workdir` argument".into(),
        ),
        ..o
    })
}

/// brush-parser must see the same simple commands, with as many words and redirections each.
fn cross_check(src: &str, segs: &[Segment]) -> Result<(), String> {
    let shape = brush_shape(src)?;
    let mine: Vec<(usize, usize)> = segs
        .iter()
        .map(|s| (s.words.len(), s.redirs.len() + usize::from(s.pipe_amp)))
        .collect();
    if shape != mine {
        return Err(
            "the bash parser and the gate's tokenizer disagree on this command, so it is denied"
                .into(),
        );
    }
    Ok(())
}

pub(crate) fn judge_segment(
    ctx: &mut Ctx<'_>,
    src: &str,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    inherited: &Stdin,
) -> SegmentJudgement {
    let text = seg
        .start
        .and_then(|s| src.get(s..seg.end))
        .unwrap_or_default()
        .to_string();
    let command_word = seg
        .words
        .iter()
        .find(|w| !is_assignment(w))
        .filter(|w| w.literal())
        .map(|w| w.value.clone());
    let outer_heuristic = std::mem::take(&mut ctx.heuristic);
    let outcome = judge_segment_outcome(ctx, seg, piped_in, depth, inherited);
    let heuristic = ctx.heuristic;
    ctx.heuristic = outer_heuristic || heuristic;
    let (verdict, rule, reason, hint) = match outcome {
        Outcome::Allow { rule, reason } => (Verdict::Allow, rule, reason, None),
        Outcome::Deny { rule, reason, hint } => (Verdict::Deny, rule, reason, hint),
    };
    SegmentJudgement {
        text,
        command_word,
        verdict,
        rule,
        reason,
        hint,
        heuristic,
    }
}

/// Is `NAME=value` before a command one the policy lets through? The name must be in
/// `env_allow` and never one [`denied_env`] names; the value a plain word or relative path.
fn env_assignment(ctx: &mut Ctx<'_>, w: &Word, depth: usize) -> Result<(), Outcome> {
    let policy = ctx.policy;
    let Some((name, value)) = w.value.split_once('=') else {
        return Err(deny(format!("`{}` is not a plain assignment", w.raw)));
    };
    let plain_name = !name.is_empty()
        && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !plain_name {
        return Err(deny(format!(
            "variable assignment `{}` is not `NAME=value`; always denied",
            w.raw
        )));
    }
    // A code-loading variable of an interpreter the model may already feed its own files.
    let loads_code_anyway = interpreter_env(name).is_some_and(|fam| {
        fam.names.iter().any(|n| {
            let cmd = Word::synthetic(n);
            file_code_runs(ctx, &cmd, n, depth)
        })
    });
    if let Some(why) = denied_env(name).filter(|_| !loads_code_anyway) {
        return Err(deny(format!(
            "variable assignment `{}` is always denied: `{name}` {why}",
            w.raw
        )));
    }
    if !loads_code_anyway && !policy.env_allow.iter().any(|n| n == name) {
        return Err(deny_hint(
            format!(
                "variable assignment `{}` is denied: `{name}` is not in `[tools.bash].env_allow`",
                w.raw
            ),
            Some(format!(
                "run the command without `{name}=…`; the operator can allow it with `env_allow = [\"{name}\"]` in [tools.bash]"
            )),
        ));
    }
    let plain_value = w.literal()
        && !w.ansi_c
        && w.vars.is_empty()
        && !w.raw.contains(['$', '`'])
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._,:+@%=/-".contains(c))
        && value.split(':').all(|part| {
            // An absolute path beneath the work root names a relative one (a path list such
            // as `PYTHONPATH=/repo:/repo/src` included).
            let part = root_relative(policy, part).unwrap_or_else(|| part.to_string());
            !part.starts_with('/') && !part.split(['/', '=']).any(|c| c == "..")
        });
    if !plain_value {
        return Err(deny_hint(
            format!(
                "the value of `{name}` in `{}` is not a plain word or relative path (letters, digits, `._,:+@%=/-`; no expansion, no absolute path, no `..`)",
                w.raw
            ),
            Some(format!("give `{name}` a plain value such as `{name}=1`")),
        ));
    }
    Ok(())
}

pub(crate) fn judge_segment_outcome(
    ctx: &mut Ctx<'_>,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    inherited: &Stdin,
) -> Outcome {
    let redirect_checks = match redirections(ctx, seg, depth) {
        Ok(checks) => checks,
        Err(denial) => return denial,
    };
    let words = match after_time(&seg.words, piped_in) {
        Ok(words) => words,
        Err(denial) => return denial,
    };
    let words = match after_assignments(ctx, words, depth) {
        Ok(words) => words,
        Err(denial) => return denial,
    };
    if words.is_empty() {
        return deny("a redirection without a command creates or truncates a file; denied");
    }
    let stdin = segment_stdin(seg, piped_in).with(inherited);
    let outcome = judge_invocation(ctx, words, &stdin, depth, false);
    if matches!(outcome, Outcome::Allow { .. }) {
        ctx.checks.extend(redirect_checks);
    }
    outcome
}

/// The segment's redirections: the run-time path checks they need, or the first denial.
fn redirections(
    ctx: &Ctx<'_>,
    seg: &Segment,
    depth: usize,
) -> Result<Vec<(String, String)>, Outcome> {
    let mut checks = Vec::new();
    for r in &seg.redirs {
        match check_redirect(ctx.policy, &ctx.cwd, r, depth == 0) {
            Err(reason) => {
                let hint = redirect_hint(ctx.policy, &reason);
                return Err(deny_hint(reason, hint));
            }
            Ok(Some(check)) => checks.push(check),
            Ok(None) => {}
        }
    }
    Ok(checks)
}

/// The reserved word `time` (unquoted, at the start of a pipeline; after `|` it is the
/// external /usr/bin/time) only measures what follows: the rest is the command.
fn after_time(words: &[Word], piped_in: bool) -> Result<&[Word], Outcome> {
    let mut words = words;
    if !piped_in && words.first().is_some_and(|w| w.raw == "time") {
        words = &words[1..];
        if words.first().is_some_and(|w| w.raw == "-p") {
            words = &words[1..];
        }
        match words.first() {
            None => return Err(deny("`time` with no command to run")),
            Some(w) if w.value.starts_with('-') => {
                return Err(deny(format!(
                    "`time` option `{}` is not understood by the gate (only `time -p`)",
                    w.raw
                )))
            }
            Some(_) => {}
        }
    }
    Ok(words)
}

/// `NAME=value cmd`: only names the operator listed in `env_allow`, with plain values; the
/// words after the assignments.
fn after_assignments<'w>(
    ctx: &mut Ctx<'_>,
    words: &'w [Word],
    depth: usize,
) -> Result<&'w [Word], Outcome> {
    let assignments = words.iter().take_while(|w| is_assignment(w)).count();
    if assignments == 0 {
        return Ok(words);
    }
    for w in &words[..assignments] {
        env_assignment(ctx, w, depth)?;
    }
    if assignments == words.len() {
        return Err(deny(format!(
            "variable assignment `{}` without a command sets a shell variable for the rest of the command; always denied",
            words[0].raw
        )));
    }
    Ok(&words[assignments..])
}

/// What the segment's stdin is: a pipe, heredoc and here-string texts, a redirected file.
fn segment_stdin(seg: &Segment, piped_in: bool) -> Stdin {
    Stdin {
        piped: piped_in,
        texts: seg
            .redirs
            .iter()
            .filter_map(|r| match (&r.heredoc, r.op) {
                (Some((_, body)), _) => Some(body.clone()),
                (None, "<<<") => Some(r.target.value.clone()),
                _ => None,
            })
            .collect(),
        redirected: seg.redirs.iter().any(|r| {
            matches!(r.op, "<" | "<>" | "<&")
                && r.heredoc.is_none()
                && r.target.value != "/dev/null"
        }),
    }
}

/// Judges one command (a segment, or the command a wrapper runs). `open_tail` means more
/// arguments the gate cannot see will be appended (`xargs`).
pub(crate) fn judge_invocation(
    ctx: &mut Ctx<'_>,
    words: &[Word],
    stdin: &Stdin,
    depth: usize,
    open_tail: bool,
) -> Outcome {
    if depth > MAX_DEPTH {
        return deny(format!("commands nest more than {MAX_DEPTH} levels deep"));
    }
    let Some(cmd) = words.first() else {
        return deny("no command to run");
    };
    let args = &words[1..];
    if let Some(denial) = command_word_refusal(cmd).or_else(|| expansion_refusal(args)) {
        return denial;
    }
    let base = basename(&cmd.value);
    let found = argument_refusal(ctx, words, stdin, open_tail)
        .or_else(|| code_refusal(ctx, words, stdin, depth))
        .or_else(|| inner_refusal(ctx, words, stdin, depth, open_tail));
    if let Some(denial) = found {
        return denial;
    }
    if let Some(denial) = unidentified_program(ctx, words) {
        return denial;
    }
    for rule in &ctx.policy.allow {
        if allow_matches(rule, words, &ctx.cwd) {
            if let RuleKind::Path(prefix) = &rule.kind {
                ctx.checks
                    .push((join(&ctx.cwd, &cmd.value), prefix.clone()));
            }
            return Outcome::Allow {
                rule: Some(rule.text.clone()),
                reason: format!("allowed by rule `{}`", rule.text),
            };
        }
    }
    match ctx.policy.default {
        Verdict::Allow => Outcome::Allow {
            rule: None,
            reason: format!("no rule matches `{base}`; the default is allow"),
        },
        Verdict::Deny => {
            let hint = by_name_hint(ctx, words).unwrap_or_else(|| {
                format!(
                    "`{base}` is not in this policy's allow list (the operator could add a rule such as `{base} *`); use an allowed program"
                )
            });
            deny_hint(format!("no allow rule matches `{}`", cmd.value), Some(hint))
        }
    }
}

/// A command word that is always denied: a keyword, an expansion, a path through /proc or
/// /dev, a zsh `=cmd`, a builtin that changes the shell's state.
fn command_word_refusal(cmd: &Word) -> Option<Outcome> {
    if RESERVED.contains(&cmd.value.as_str()) {
        return Some(deny_hint(
            format!(
                "`{}` is a shell keyword (control flow, groups, tests, `time`); always denied",
                cmd.value
            ),
            syntax_hint("keyword"),
        ));
    }
    if !cmd.literal() || cmd.ansi_c {
        return Some(deny_hint(
            format!(
                "the command word `{}` contains an expansion (variable, glob, brace, tilde or $'…'); always denied",
                cmd.raw
            ),
            Some("write the program's name as plain text".into()),
        ));
    }
    if cmd.value.is_empty() {
        return Some(deny("the command word is empty"));
    }
    if through_proc_or_dev(&cmd.value) {
        return Some(deny(format!(
            "the command word `{}` runs a program through /proc or /dev, which hides what runs; denied",
            cmd.raw
        )));
    }
    if cmd.value.starts_with('=') {
        return Some(deny(format!(
            "the command word `{}` starts with `=`, which zsh expands to a program's path; denied",
            cmd.raw
        )));
    }
    if STATE_BUILTINS.contains(&cmd.value.as_str()) {
        return Some(deny_hint(
            format!(
                "`{}` evaluates text or changes the shell's state; always denied",
                cmd.value
            ),
            builtin_hint(&cmd.value),
        ));
    }
    None
}

/// An argument whose expansion the gate cannot judge.
fn expansion_refusal(args: &[Word]) -> Option<Outcome> {
    if let Some(w) = args.iter().find(|w| {
        !w.vars.is_empty() && w.brace && (w.value.contains(',') || w.value.contains(".."))
    }) {
        return Some(deny(format!(
            "`{}` joins a variable and a brace expansion: bash expands the braces first, into other variables (`$HOME1`, `$HOME2`) the gate cannot judge, which may expand to no word at all",
            w.raw
        )));
    }
    if let Some(w) = args.iter().find(|w| unsafe_var(w).is_some()) {
        return Some(deny_hint(
            format!(
                "the argument `{}` expands a variable whose value the gate cannot judge",
                w.raw
            ),
            Some("write the value itself instead of the variable".into()),
        ));
    }
    None
}

/// Deny rules, then what the program's arguments make it do: git below the work root,
/// unseen appended arguments, globs into options, options that run programs, in-place sed,
/// code on stdin, files it writes.
fn argument_refusal(
    ctx: &mut Ctx<'_>,
    words: &[Word],
    stdin: &Stdin,
    open_tail: bool,
) -> Option<Outcome> {
    let policy = ctx.policy;
    let base = basename(&words[0].value);
    let base_lc = canonical(base);
    let args = &words[1..];
    if let Some(rule) = first_denying(&policy.deny, words, &ctx.cwd) {
        return Some(Outcome::Deny {
            rule: Some(rule.text.clone()),
            reason: format!("denied by rule `{}`", rule.text),
            hint: None,
        });
    }
    let fam = family(&base_lc);
    // git in a directory below the work root could use a repository the model made there
    // (see docs/gate.md, *Nested repositories*).
    if !ctx.cwd.is_empty() && fam.is_some_and(|f| f.names[0] == "git") {
        return Some(deny_hint(
            format!(
                "`git` runs only in the work root's own repository, not in `{}`",
                ctx.cwd
            ),
            Some(format!(
                "run git from the working directory itself (no `cd`/`workdir`), naming paths under `{}`: `git diff -- {}`",
                ctx.cwd, ctx.cwd
            )),
        ));
    }
    if open_tail && fam.is_some_and(|f| f.unseen_args_dangerous()) {
        return Some(deny_hint(
            format!(
                "`xargs` would append unseen arguments to `{base}`, whose arguments the gate must see"
            ),
            Some(format!(
                "name the files on the command line (`{base} … FILE…`), or use `find … -exec {base} … {{}} \\;`"
            )),
        ));
    }
    if let Some(reason) = expansion_into_options(&base_lc, args) {
        return Some(deny_hint(
            reason,
            Some(
                "start the pattern with `./` (`./*.py`), so it cannot expand into an option".into(),
            ),
        ));
    }
    if let Some(reason) = dangerous_args(&base_lc, args) {
        return Some(deny(reason));
    }
    if fam.is_some_and(|f| f.check == Check::Sed) {
        if let Some(denial) = sed_in_place(ctx, base, args) {
            return Some(denial);
        }
    }
    stdin_findings(&base_lc, args, stdin)
        .or_else(|| program_write_refusal(policy, &ctx.cwd, &base_lc, args, open_tail))
        .map(deny)
}

/// With deny rules in force, inline code that could run a denied program: judged by the
/// capability-word heuristic, or, where the model could run a file of code with the same
/// interpreter anyway, only by the denied programs it names.
fn code_refusal(ctx: &mut Ctx<'_>, words: &[Word], stdin: &Stdin, depth: usize) -> Option<Outcome> {
    let policy = ctx.policy;
    if policy.deny.is_empty() {
        return None;
    }
    let cmd = &words[0];
    let args = &words[1..];
    let base = basename(&cmd.value);
    let base_lc = canonical(base);
    let fam = family(&base_lc);
    // Interpreters whose own option check does not already read their code (not awk,
    // not make): their inline code is judged by the capability-word heuristic.
    let interpreter = fam.is_some_and(|f| {
        f.kind == Kind::Interpreter && f.code != Code::Own && f.check == Check::None
    });
    // Where the model may write a file and run it with this very interpreter, its inline
    // code is no less judged than that file: the heuristic would protect nothing.
    let meaningless = interpreter && file_code_runs(ctx, cmd, &base_lc, depth);
    if interpreter && !meaningless {
        ctx.heuristic = true;
    }
    let found = if meaningless {
        // The capability words protect nothing here, but code that names a program a
        // deny rule forbids outright (`os.system("curl …")`) says what it is for.
        let texts = args
            .iter()
            .map(|w| w.value.as_str())
            .chain(stdin.texts.iter().map(String::as_str));
        names_denied_program(policy, &base_lc, texts)
    } else {
        opaque_mentions(policy, &base_lc, args)
            .or_else(|| stdin_code(policy, &base_lc, args, stdin))
            .or_else(|| inline_code_can_run_programs(&base_lc, args))
    };
    let reason = found?;
    let hint = interpreter.then(|| {
        format!(
            "under this policy inline `{base}` code is judged by a word heuristic (the model cannot write a file and run it with `{base}`); run an existing script or the project's tests instead"
        )
    });
    Some(deny_hint(reason, hint))
}

/// The commands and scripts a wrapper or shell runs, each judged in turn: the first denial.
fn inner_refusal(
    ctx: &mut Ctx<'_>,
    words: &[Word],
    stdin: &Stdin,
    depth: usize,
    open_tail: bool,
) -> Option<Outcome> {
    let base = basename(&words[0].value);
    match inner_command(ctx.policy, &canonical(base), words, open_tail) {
        Inner::None => None,
        Inner::Deny(reason) => Some(deny(reason)),
        Inner::Commands(list) => {
            for (range, tail) in list {
                let inner: Vec<Word> = match words.get(range) {
                    Some(ws) if !ws.is_empty() => ws.to_vec(),
                    _ if tail => vec![Word::synthetic("echo")],
                    _ => continue,
                };
                if let Outcome::Deny { rule, reason, hint } =
                    judge_invocation(ctx, &inner, stdin, depth + 1, tail)
                {
                    return Some(Outcome::Deny {
                        rule,
                        reason: format!("`{base}` runs `{}`: {reason}", inner[0].value),
                        hint,
                    });
                }
            }
            None
        }
        Inner::Script(script, dialect) => {
            match judge_program(ctx, &script, dialect, depth + 1, stdin) {
                Err(reason) => Some(deny_hint(
                    format!("inside the script `{base}` runs: {reason}"),
                    syntax_hint(&reason),
                )),
                Ok(segs) => segs
                    .into_iter()
                    .find(|s| s.verdict == Verdict::Deny)
                    .map(|s| Outcome::Deny {
                        rule: s.rule,
                        reason: format!("inside the script `{base}` runs: {}", s.reason),
                        hint: s.hint,
                    }),
            }
        }
    }
}

/// A program named by a path outside the system directories could be a copy of a denied
/// one (`cp /usr/bin/rm ./del`): with deny rules in force only a path rule allows it.
fn unidentified_program(ctx: &Ctx<'_>, words: &[Word]) -> Option<Outcome> {
    let policy = ctx.policy;
    let cmd = &words[0];
    let system_path = [
        "/usr/bin/",
        "/bin/",
        "/usr/sbin/",
        "/sbin/",
        "/usr/local/bin/",
    ]
    .iter()
    .any(|d| cmd.value.starts_with(d) && !cmd.value[d.len()..].contains('/'));
    let identified = policy.deny.is_empty()
        || !cmd.value.contains('/')
        || system_path
        || policy
            .allow
            .iter()
            .any(|r| matches!(r.kind, RuleKind::Path(_)) && allow_matches(r, words, &ctx.cwd));
    (!identified).then(|| {
        deny_hint(
            format!(
                "with deny rules in force, the program `{}` cannot be identified (a copy of a denied one would pass); allow its directory with a path rule such as `./scripts/**`",
                cmd.raw
            ),
            by_name_hint(ctx, words),
        )
    })
}

/// "Call it as `python3`": a program named by a path whose name an allow rule permits.
fn by_name_hint(ctx: &Ctx<'_>, words: &[Word]) -> Option<String> {
    let cmd = words.first()?;
    if !cmd.value.contains('/') || system_program(&cmd.value).is_some() {
        return None;
    }
    let name = basename(&cmd.value);
    let mut renamed = words.to_vec();
    renamed[0] = Word::synthetic(name);
    let allowed =
        ctx.policy.allow.iter().any(|r| {
            !matches!(r.kind, RuleKind::Universal) && allow_matches(r, &renamed, &ctx.cwd)
        });
    allowed.then(|| format!("call it by its name, `{name}`, which an allow rule permits"))
}

/// Can the model write a work-root file and run it with this interpreter, as written, under
/// this policy? Writing: `write_redirects`, the file tools, or an allowed `tee FILE`; running:
/// the judge allows `INTERPRETER FILE`. Then a check of its inline code protects nothing.
pub(crate) fn file_code_runs(ctx: &Ctx<'_>, cmd: &Word, base: &str, depth: usize) -> bool {
    if ctx.probing || !family(base).is_some_and(|f| f.runs_files) {
        return false;
    }
    const PROBE: &str = "gate-probe-file.txt";
    let policy = ctx.policy;
    let mut probe = Ctx {
        policy,
        cwd: ctx.cwd.clone(),
        checks: Vec::new(),
        workdirs: Vec::new(),
        heuristic: false,
        probing: true,
    };
    let place = join(&ctx.cwd, PROBE);
    let free = write_refusal(policy, &place).is_none();
    let allowed = |o: Outcome| matches!(o, Outcome::Allow { .. });
    // Programs that write what the model types (a heredoc) into a file it names.
    let writers: [&[&str]; 4] = [
        &["tee", PROBE],
        &["dd", "of=gate-probe-file.txt"],
        &["cp", "/dev/stdin", PROBE],
        &["sponge", PROBE],
    ];
    let writable = free
        && (policy.write_redirects
            || policy.file_tools
            || writers.iter().any(|w| {
                let words: Vec<Word> = w.iter().map(|x| Word::synthetic(x)).collect();
                allowed(judge_invocation(
                    &mut probe,
                    &words,
                    &Stdin::default(),
                    depth + 1,
                    false,
                ))
            }));
    writable
        && allowed(judge_invocation(
            &mut probe,
            &[cmd.clone(), Word::synthetic(PROBE)],
            &Stdin::default(),
            depth + 1,
            false,
        ))
}

/// `sed -i`: each file it rewrites (and its backup, FILE+SUFFIX) is a write held to the rules
/// of `> FILE` ([`write_target`]); a denial, or `None` when the files may be written (their
/// run-time checks recorded).
fn sed_in_place(ctx: &mut Ctx<'_>, base: &str, args: &[Word]) -> Option<Outcome> {
    let parsed = match sed_args(args) {
        Ok(p) => p,
        Err(e) => return Some(deny(format!("`{base}`: {e}; denied"))),
    };
    let suffix = parsed.in_place?;
    let policy = ctx.policy;
    let what = format!("`{base} -i` rewriting");
    if !policy.write_redirects {
        return Some(deny_hint(
            format!(
                "{what} files in place is a write, denied like `> FILE` (a rule authorises running a command, not writing files; `write_redirects` is off)"
            ),
            write_hint(policy, "`sed` without `-i` prints the edited text, which is returned to you"),
        ));
    }
    if !suffix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._~+-".contains(c))
    {
        return Some(deny_hint(
            format!("{what}: the backup suffix `{suffix}` is not a plain suffix (GNU sed reads `*` and `/` in it as a path)"),
            Some("use a plain suffix such as `-i.bak`, or none (`-i`)".into()),
        ));
    }
    let bsd = || {
        deny_hint(
            format!("{what}: GNU sed reads `-i ''` (the BSD spelling) as `-i` and then `''` as the script or a file name"),
            Some("write `sed -i 's/a/b/' FILE` (GNU sed: a suffix is attached, `-i.bak`)".into()),
        )
    };
    if parsed.script_operand && parsed.scripts.first().is_some_and(|s| s.value.is_empty()) {
        return Some(bsd());
    }
    if parsed.files.is_empty() {
        return Some(deny(format!("{what}: no file named to edit")));
    }
    let mut found = Vec::new();
    for f in parsed.files {
        if f.value.is_empty() {
            return Some(bsd());
        }
        if !f.literal() || f.ansi_c || f.brace || f.value == "-" || f.value.contains("{}") {
            return Some(deny_hint(
                format!(
                    "{what} `{}`: the files a pattern or expansion names are not known before it runs (a glob like `*.py` also matches `setup.py` and `conftest.py`, which build and test tools run)",
                    f.raw
                ),
                Some("name each file to edit (find them first with `ls` or `grep -l`)".into()),
            ));
        }
        for path in [f.value.clone(), format!("{}{suffix}", f.value)] {
            match write_target(policy, &ctx.cwd, &path, &what) {
                Ok(rel) => found.push((rel, ".".to_string())),
                Err(reason) => return Some(deny(reason)),
            }
            if suffix.is_empty() {
                break;
            }
        }
    }
    ctx.checks.extend(found);
    None
}
