//! tools stage (gate), PURE: the judge: lexes a command, judges every segment and recurses into the
//! commands wrappers and shells run; the only file that recurses.

use crate::tools::gate::paths::{basename, through_proc_or_dev};
use crate::tools::gate::programs::argv::Inner;
use crate::tools::gate::programs::interpreters::{
    inline_code_can_run_programs, opaque_mentions, stdin_code,
};
use crate::tools::gate::programs::registry::{canonical, family};
use crate::tools::gate::programs::wrappers::inner_command;
use crate::tools::gate::programs::{dangerous_args, expansion_into_options, stdin_findings};
use crate::tools::gate::redirect::{check_redirect, program_write_refusal};
use crate::tools::gate::rule::{
    allow_matches, deny, deny_matches, Judgement, Outcome, Policy, RuleKind, SegmentJudgement,
    Verdict,
};
use crate::tools::gate::shell::brush::brush_shape;
use crate::tools::gate::shell::lex::{Dialect, Lexer, Segment, Stdin, Word};
use crate::tools::gate::shell::words::{is_assignment, unsafe_var, RESERVED, STATE_BUILTINS};
/// Inputs longer than this are denied unread (bytes).
pub(crate) const MAX_INPUT_BYTES: usize = 128 * 1024;

/// How deep `sh -c`, wrappers and `find -exec` may nest before the gate gives up.
pub(crate) const MAX_DEPTH: usize = 8;

/// Judges `command` under `policy`; never panics, on any input.
pub fn judge(policy: &Policy, command: &str) -> Judgement {
    let mut checks = Vec::new();
    let result = if command.len() > MAX_INPUT_BYTES {
        Err(format!(
            "the command is {} bytes, over the gate's limit of {MAX_INPUT_BYTES} bytes",
            command.len()
        ))
    } else {
        judge_program(
            policy,
            command,
            Dialect::Bash,
            0,
            &Stdin::default(),
            &mut checks,
        )
    };
    let segments = match result {
        Ok(segments) => segments,
        Err(reason) => vec![SegmentJudgement {
            text: command.to_string(),
            command_word: None,
            verdict: Verdict::Deny,
            rule: None,
            reason,
        }],
    };
    let denied = segments.iter().find(|s| s.verdict == Verdict::Deny);
    let (verdict, reason) = match denied {
        Some(s) => (Verdict::Deny, s.reason.clone()),
        None if segments.is_empty() => (Verdict::Allow, "empty command".to_string()),
        None => (
            Verdict::Allow,
            format!(
                "all {} segment{} allowed",
                segments.len(),
                if segments.len() == 1 { "" } else { "s" }
            ),
        ),
    };
    if verdict == Verdict::Deny {
        checks.clear();
    }
    Judgement {
        command: command.to_string(),
        verdict,
        reason,
        segments,
        runtime_path_checks: checks,
    }
}

pub(crate) fn judge_program(
    policy: &Policy,
    src: &str,
    dialect: Dialect,
    depth: usize,
    inherited: &Stdin,
    checks: &mut Vec<(String, String)>,
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
    for seg in &segs {
        out.push(judge_segment(
            policy, src, seg, piped_in, depth, inherited, checks,
        ));
        piped_in = seg.pipe_out;
    }
    if out.iter().all(|s| s.verdict == Verdict::Allow) {
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
    }
    Ok(out)
}

pub(crate) fn judge_segment(
    policy: &Policy,
    src: &str,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    inherited: &Stdin,
    checks: &mut Vec<(String, String)>,
) -> SegmentJudgement {
    let text = seg
        .start
        .and_then(|s| src.get(s..seg.end))
        .unwrap_or_default()
        .to_string();
    let command_word = seg
        .words
        .first()
        .filter(|w| w.literal() && !is_assignment(w))
        .map(|w| w.value.clone());
    let outcome = judge_segment_outcome(policy, seg, piped_in, depth, inherited, checks);
    let (verdict, rule, reason) = match outcome {
        Outcome::Allow { rule, reason } => (Verdict::Allow, rule, reason),
        Outcome::Deny { rule, reason } => (Verdict::Deny, rule, reason),
    };
    SegmentJudgement {
        text,
        command_word,
        verdict,
        rule,
        reason,
    }
}

pub(crate) fn judge_segment_outcome(
    policy: &Policy,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    inherited: &Stdin,
    checks: &mut Vec<(String, String)>,
) -> Outcome {
    let mut redirect_checks = Vec::new();
    for r in &seg.redirs {
        match check_redirect(policy, r) {
            Err(reason) => return deny(reason),
            Ok(Some(check)) => redirect_checks.push(check),
            Ok(None) => {}
        }
    }
    // The reserved word `time` (unquoted, at the start of a pipeline; after `|` it is the
    // external /usr/bin/time) only measures what follows: judge the rest as the command.
    let mut words: &[Word] = &seg.words;
    if !piped_in && words.first().is_some_and(|w| w.raw == "time") {
        words = &words[1..];
        if words.first().is_some_and(|w| w.raw == "-p") {
            words = &words[1..];
        }
        match words.first() {
            None => return deny("`time` with no command to run"),
            Some(w) if w.value.starts_with('-') => {
                return deny(format!(
                    "`time` option `{}` is not understood by the gate (only `time -p`)",
                    w.raw
                ))
            }
            Some(_) => {}
        }
    }
    let Some(first) = words.first() else {
        return deny("a redirection without a command creates or truncates a file; denied");
    };
    if is_assignment(first) {
        return deny(format!(
            "variable assignment `{}` is always denied: the gate cannot tell a harmless variable from LD_PRELOAD, PATH or BASH_ENV",
            first.raw
        ));
    }
    let stdin = Stdin {
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
    .with(inherited);
    let outcome = judge_invocation(policy, words, &stdin, depth, false, checks);
    if matches!(outcome, Outcome::Allow { .. }) {
        checks.extend(redirect_checks);
    }
    outcome
}

/// Judges one command (a segment, or the command a wrapper runs). `open_tail` means more
/// arguments the gate cannot see will be appended (`xargs`).
pub(crate) fn judge_invocation(
    policy: &Policy,
    words: &[Word],
    stdin: &Stdin,
    depth: usize,
    open_tail: bool,
    checks: &mut Vec<(String, String)>,
) -> Outcome {
    if depth > MAX_DEPTH {
        return deny(format!("commands nest more than {MAX_DEPTH} levels deep"));
    }
    let Some(cmd) = words.first() else {
        return deny("no command to run");
    };
    let args = &words[1..];
    if RESERVED.contains(&cmd.value.as_str()) {
        return deny(format!(
            "`{}` is a shell keyword (control flow, groups, tests, `time`); always denied",
            cmd.value
        ));
    }
    if !cmd.literal() || cmd.ansi_c {
        return deny(format!(
            "the command word `{}` contains an expansion (variable, glob, brace, tilde or $'…'); always denied",
            cmd.raw
        ));
    }
    if cmd.value.is_empty() {
        return deny("the command word is empty");
    }
    if through_proc_or_dev(&cmd.value) {
        return deny(format!(
            "the command word `{}` runs a program through /proc or /dev, which hides what runs; denied",
            cmd.raw
        ));
    }
    if cmd.value.starts_with('=') {
        return deny(format!(
            "the command word `{}` starts with `=`, which zsh expands to a program's path; denied",
            cmd.raw
        ));
    }
    if STATE_BUILTINS.contains(&cmd.value.as_str()) {
        return deny(format!(
            "`{}` evaluates text or changes the shell's state; always denied",
            cmd.value
        ));
    }
    if let Some(w) = args.iter().find(|w| {
        !w.vars.is_empty() && w.brace && (w.value.contains(',') || w.value.contains(".."))
    }) {
        return deny(format!(
            "`{}` joins a variable and a brace expansion: bash expands the braces first, into other variables (`$HOME1`, `$HOME2`) the gate cannot judge, which may expand to no word at all",
            w.raw
        ));
    }
    if let Some(w) = args.iter().find(|w| unsafe_var(w).is_some()) {
        return deny(format!(
            "the argument `{}` expands a variable whose value the gate cannot judge",
            w.raw
        ));
    }
    let base = basename(&cmd.value);
    let base_lc = canonical(base);
    for rule in &policy.deny {
        if deny_matches(rule, words) {
            return Outcome::Deny {
                rule: Some(rule.text.clone()),
                reason: format!("denied by rule `{}`", rule.text),
            };
        }
    }
    if open_tail && family(&base_lc).is_some_and(|f| f.unseen_args_dangerous()) {
        return deny(format!(
            "`xargs` would append unseen arguments to `{base}`, whose arguments the gate must see"
        ));
    }
    if let Some(reason) = expansion_into_options(&base_lc, args) {
        return deny(reason);
    }
    if let Some(reason) = dangerous_args(&base_lc, args) {
        return deny(reason);
    }
    if let Some(reason) = stdin_findings(&base_lc, args, stdin) {
        return deny(reason);
    }
    if let Some(reason) = program_write_refusal(policy, &base_lc, args, open_tail) {
        return deny(reason);
    }
    if !policy.deny.is_empty() {
        let found = opaque_mentions(policy, &base_lc, args)
            .or_else(|| stdin_code(policy, &base_lc, args, stdin))
            .or_else(|| inline_code_can_run_programs(&base_lc, args));
        if let Some(reason) = found {
            return deny(reason);
        }
    }
    match inner_command(policy, &base_lc, words, open_tail) {
        Inner::None => {}
        Inner::Deny(reason) => return deny(reason),
        Inner::Commands(list) => {
            for (range, tail) in list {
                let inner: Vec<Word> = match words.get(range) {
                    Some(ws) if !ws.is_empty() => ws.to_vec(),
                    _ if tail => vec![Word::synthetic("echo")],
                    _ => continue,
                };
                if let Outcome::Deny { rule, reason } =
                    judge_invocation(policy, &inner, stdin, depth + 1, tail, checks)
                {
                    return Outcome::Deny {
                        rule,
                        reason: format!("`{base}` runs `{}`: {reason}", inner[0].value),
                    };
                }
            }
        }
        Inner::Script(script, dialect) => {
            match judge_program(policy, &script, dialect, depth + 1, stdin, checks) {
                Err(reason) => return deny(format!("inside the script `{base}` runs: {reason}")),
                Ok(segs) => {
                    if let Some(s) = segs.into_iter().find(|s| s.verdict == Verdict::Deny) {
                        return Outcome::Deny {
                            rule: s.rule,
                            reason: format!("inside the script `{base}` runs: {}", s.reason),
                        };
                    }
                }
            }
        }
    }
    // A program named by a path outside the system directories could be a copy of a denied
    // one (`cp /usr/bin/rm ./del`): with deny rules in force only a path rule allows it.
    let system_path = [
        "/usr/bin/",
        "/bin/",
        "/usr/sbin/",
        "/sbin/",
        "/usr/local/bin/",
    ]
    .iter()
    .any(|d| cmd.value.starts_with(d) && !cmd.value[d.len()..].contains('/'));
    if !policy.deny.is_empty()
        && cmd.value.contains('/')
        && !system_path
        && !policy
            .allow
            .iter()
            .any(|r| matches!(r.kind, RuleKind::Path(_)) && allow_matches(r, words))
    {
        return deny(format!(
            "with deny rules in force, the program `{}` cannot be identified (a copy of a denied one would pass); allow its directory with a path rule such as `./scripts/**`",
            cmd.raw
        ));
    }
    for rule in &policy.allow {
        if allow_matches(rule, words) {
            if let RuleKind::Path(prefix) = &rule.kind {
                checks.push((cmd.value.clone(), prefix.clone()));
            }
            return Outcome::Allow {
                rule: Some(rule.text.clone()),
                reason: format!("allowed by rule `{}`", rule.text),
            };
        }
    }
    match policy.default {
        Verdict::Allow => Outcome::Allow {
            rule: None,
            reason: format!("no rule matches `{base}`; the default is allow"),
        },
        Verdict::Deny => deny(format!("no allow rule matches `{}`", cmd.value)),
    }
}
