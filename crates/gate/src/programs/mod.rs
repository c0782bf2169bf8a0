//! tools stage (gate), PURE: per-program knowledge: takes a program's words and returns findings
//! (an inner command, a reason to deny); never calls the judge.

pub(crate) mod argv;
pub(crate) mod awk;
pub(crate) mod documents;
mod families;
pub(crate) mod find;
pub(crate) mod git;
pub(crate) mod go;
pub(crate) mod interpreters;
mod kinds;
pub(crate) mod make;
pub(crate) mod modules;
pub(crate) mod outfiles;
pub(crate) mod outputs;
pub(crate) mod packages;
pub(crate) mod registry;
pub(crate) mod remote;
pub(crate) mod runners;
pub(crate) mod sed;
pub(crate) mod shells;
pub(crate) mod tar;
pub(crate) mod text;
pub(crate) mod wrappers;
pub(crate) mod writes;

use crate::shell::lex::{Stdin, Word};
use modules::module_program;
use registry::{family, Check};

/// For commands whose options the gate checks, an unquoted glob that could match a file named
/// like an option (`*` matches `--checkpoint-action=exec=sh`), or a brace expansion, would
/// hand the command options the gate never saw.
pub(crate) fn expansion_into_options(base: &str, args: &[Word]) -> Option<String> {
    if !family(base).is_some_and(|f| f.options_from_globs_dangerous()) {
        return None;
    }
    for w in args.iter().take_while(|w| w.value != "--") {
        if can_expand_into_option(w) {
            return Some(format!(
                "`{base}`: `{}` could expand into options the gate cannot check (write `./{}` for files)",
                w.raw,
                w.raw.trim_start_matches("./")
            ));
        }
    }
    None
}

/// Could this word's expansion start with `-`? A brace expansion anywhere (`{-rf,x}`,
/// `a{,-x}`), a glob whose first character is a wildcard (`*`, `?`, `[-]x`), an unquoted
/// expansion at the start (`$X`), or any expanding word that already starts with `-` (`-*`,
/// `"-"*`, `--c*=x`).
pub(crate) fn can_expand_into_option(w: &Word) -> bool {
    let braces = w.brace && (w.value.contains(',') || w.value.contains(".."));
    let expands = !w.literal();
    braces
        || (w.glob && w.value.starts_with(['*', '?', '[']))
        || (expands && w.value.starts_with(['-', '$']))
}

/// The family's option check: why these arguments run a program or write files, if they do.
pub(crate) fn dangerous_args(base: &str, args: &[Word]) -> Option<String> {
    // `python3 -m pytest …`, `coverage run -m pip …`: the module's program reads the rest.
    if let Some((program, k)) = module_program(base, args) {
        if let Some(reason) = dangerous_args(program, &args[k..]) {
            return Some(format!("`{base} -m {program}`: {reason}"));
        }
    }
    let check = family(base).map_or(Check::None, |f| f.check);
    match check {
        Check::None => None,
        Check::Apt => packages::apt_check(base, args),
        Check::Awk => awk::awk_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        Check::Cargo => packages::cargo_check(base, args),
        Check::Crontab => packages::crontab_check(base, args),
        Check::Exiftool => documents::exiftool_check(base, args),
        Check::Find => find::find_check(base, args),
        Check::Git => {
            git::git_check(args).map(|e| format!("`git`: {e}; denied whatever the rules say"))
        }
        Check::Go => go::go_check(base, args),
        Check::Gpg => documents::gpg_check(base, args),
        Check::Openssl => documents::openssl_check(base, args),
        Check::SshKeys => remote::ssh_keys_check(base, args),
        Check::Compiler => packages::compiler_check(base, args),
        Check::Latex => documents::latex_check(base, args, false),
        Check::Latexmk => documents::latex_check(base, args, true),
        Check::Make => make::make_check(args).map(|e| format!("`{base}`: {e}; denied")),
        Check::Man => text::man_check(base, args),
        Check::Nc => remote::nc_check(base, args),
        Check::Output => text::output_check(base, args),
        Check::Pager => text::pager_check(base, args),
        Check::Pandoc => documents::pandoc_check(base, args),
        Check::Printf => text::printf_check(args),
        Check::Rg => text::rg_check(base, args),
        Check::Rsync => remote::rsync_check(base, args),
        Check::Sed => sed::sed_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        Check::Sort => text::sort_check(base, args),
        Check::Split => text::split_check(base, args),
        Check::Ssh => remote::ssh_check(base, args, false),
        Check::Scp => remote::ssh_check(base, args, true),
        Check::Tar => tar::tar_check(base, args),
        Check::Tcpdump => remote::tcpdump_check(base, args),
        Check::Test => text::test_check(base, args),
        Check::Uniq => text::two_operands_check(base, args, false),
        Check::Xxd => text::two_operands_check(base, args, true),
        Check::Zip => text::zip_check(base, args),
        Check::Extract => None,
        Check::Pytest => runners::pytest_check(base, args),
        Check::Tox => runners::tox_check(base, args),
        Check::PerlTools => runners::perl_tools_check(base, args),
    }
}

/// What the family makes of input the model chose on its stdin, beyond code an interpreter
/// reads (`interpreters::stdin_code`): an editor it starts takes it as keystrokes.
pub(crate) fn stdin_findings(base: &str, args: &[Word], stdin: &Stdin) -> Option<String> {
    if !stdin.given() {
        return None;
    }
    match family(base).map_or(Check::None, |f| f.check) {
        Check::Git => git::git_editor_check(args).map(|e| format!("`git`: {e}; denied")),
        Check::Extract => outputs::extract_from_stdin(base, args),
        _ => None,
    }
}
