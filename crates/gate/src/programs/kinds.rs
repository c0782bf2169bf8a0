//! tools stage (gate), PURE: the kinds the program registry is made of: what kind of program a
//! family is, which check reads its arguments, how its inner command is found, whether it
//! reads code from stdin, and the family row itself with its builders. A leaf: the rows
//! (`families.rs`) and the registry's look-ups (`registry.rs`) use it.

/// What kind of program a family is; decides which general rules apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Runs scripts; `-c` scripts are judged inside.
    Shell,
    /// Runs code given in its arguments or input, which the gate cannot read.
    Interpreter,
    /// Runs another command in a way the gate does not parse.
    Runner,
    /// Runs another command that the gate finds and judges (env, nice, xargs...).
    Wrapper,
    /// Its options are checked: some run programs or write files.
    Checked,
    /// Plain data arguments, but an expanded glob could become options (cp, mv...).
    Guarded,
    /// A compiler or binary tool a make variable may name (`CC=gcc`).
    Toolchain,
    /// Nothing the gate checks; known for what it does (writes, runs project code).
    Plain,
}

/// Which option check a family's arguments get (dispatched in programs/mod.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    None,
    Apt,
    Awk,
    /// Compiler and linker options that run programs or load code (`-wrapper`, `-B`,
    /// plugins, spec files, response files, `tcc -run`).
    Compiler,
    Cargo,
    Crontab,
    Exiftool,
    Find,
    Git,
    Go,
    Gpg,
    Latex,
    Make,
    Man,
    Nc,
    /// `engine`, `-engine`, providers, `-pre`/`-post` load code.
    Openssl,
    /// `-o`/`--output` writes a file (shuf, iconv, tree).
    Output,
    Pager,
    Pandoc,
    Printf,
    Rg,
    Rsync,
    Sed,
    Sort,
    Split,
    Ssh,
    /// ssh-keygen and ssh-add options that load a PKCS#11 or FIDO library.
    SshKeys,
    Tar,
    Tcpdump,
    Test,
    /// A second file operand is written.
    Uniq,
    /// A second file operand is written; options end at the first operand.
    Xxd,
    /// Shell escape; latexmk also runs code and commands from `-e`, `-r`, `NAME=`.
    Latexmk,
    /// ssh's checks, and `-S` names a program for the copy tools (scp, sftp).
    Scp,
    Zip,
    /// pytest's debugger options (`--pdb`, `--trace` read commands from stdin) and plugins
    /// (`-p NAME` imports a module; `-o addopts=…`, `-W …::module.Class`).
    Pytest,
    /// tox's overrides (`-x testenv.commands=…`), `exec`, other configs.
    Tox,
    /// Perl-shipped tools: json_pp `-f eval`, ptar `-x`.
    PerlTools,
    /// Extractors that write what their input names (patch, cpio, pax): input on stdin that
    /// the model chose is refused (`stdin_findings`).
    Extract,
}

/// How to find the command a program runs (programs/wrappers.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finder {
    None,
    /// A bash-like shell: `-c` scripts are bash.
    Shell,
    /// A POSIX shell: `-c` scripts are read with the POSIX grammar (no `&>`, `$'…'`...).
    PosixShell,
    /// A shell whose `-c` scripts are not bash.
    ForeignShell,
    Command,
    /// Runs its operands as they stand (`builtin`, `nohup`).
    Builtin,
    Nice,
    Timeout,
    Stdbuf,
    Setsid,
    Time,
    Busybox,
    Env,
    Xargs,
    Find,
    Fd,
    Watch,
    Sudo,
    Doas,
    /// Runs every program in a directory, which no rule can see.
    Directory,
    /// Runs commands read from a file the gate cannot see (scriptlive replays a typescript's
    /// input into a shell, gio and gtk-launch run a desktop file's `Exec=`).
    FromFile,
}

/// Whether an interpreter reads code on stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdinCode {
    /// Unless a program is given inline or as a file operand.
    UnlessGiven,
    /// Always (editors, REPLs), even with a file operand.
    Always,
    /// Never: its program comes from the command line, checked by its own rule.
    Never,
}

/// How inline interpreter code is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// Scanned for features that can run programs.
    Scan,
    /// Scanned, and `s///e` evaluates code.
    Perl,
    /// Checked by the family's own rule (awk).
    Own,
    /// Scanned, and `!` starts a shell command (vim/ex/ed `:!`, dc, gdb, psql `\!`...).
    Escape,
}

/// One program family: every name it is installed under and what the gate knows about it.
#[derive(Debug)]
pub(crate) struct Family {
    /// The names it is installed under; the first names the family. Versioned names
    /// (`python3.11`, `perl5.36-x86_64-linux-gnu`, `vim.basic`) are found by [`family`].
    pub(crate) names: &'static [&'static str],
    pub(crate) kind: Kind,
    pub(crate) check: Check,
    pub(crate) inner: Finder,
    pub(crate) stdin: StdinCode,
    pub(crate) code: Code,
    /// Deletes or rewrites files or reaches the network (a make variable may not name it).
    pub(crate) writes: bool,
    /// A bare rule for it (`cargo *`, `make*`) runs the project's own code.
    pub(crate) project: bool,
    /// `NAME FILE` runs FILE as the same code its `-c`/`-e` or stdin takes: where the model
    /// may write a file and run it so, a check of its inline code protects nothing.
    pub(crate) runs_files: bool,
    /// The interpreter whose code it runs (`prove` runs Perl test files, `irb` is Ruby,
    /// `pytest` imports Python): a deny rule for that interpreter denies it too.
    pub(crate) runs: Option<&'static str>,
}

impl Family {
    pub(super) const fn new(names: &'static [&'static str], kind: Kind) -> Family {
        Family {
            names,
            kind,
            check: Check::None,
            inner: Finder::None,
            stdin: StdinCode::UnlessGiven,
            code: Code::Scan,
            writes: false,
            project: false,
            runs_files: false,
            runs: None,
        }
    }
    pub(super) const fn shell(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Shell).inner(Finder::Shell)
    }
    pub(super) const fn interpreter(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Interpreter)
    }
    pub(super) const fn runner(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Runner).stdin(StdinCode::Always)
    }
    pub(super) const fn wrapper(names: &'static [&'static str], inner: Finder) -> Family {
        Family::new(names, Kind::Wrapper).inner(inner)
    }
    pub(super) const fn checked(names: &'static [&'static str], check: Check) -> Family {
        Family::new(names, Kind::Checked).check(check)
    }
    pub(super) const fn guarded(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Guarded)
    }
    pub(super) const fn toolchain(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Toolchain)
    }
    pub(super) const fn plain(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Plain)
    }
    pub(super) const fn check(mut self, check: Check) -> Family {
        self.check = check;
        self
    }
    pub(super) const fn inner(mut self, inner: Finder) -> Family {
        self.inner = inner;
        self
    }
    pub(super) const fn stdin(mut self, stdin: StdinCode) -> Family {
        self.stdin = stdin;
        self
    }
    pub(super) const fn code(mut self, code: Code) -> Family {
        self.code = code;
        self
    }
    pub(super) const fn writes(mut self) -> Family {
        self.writes = true;
        self
    }
    pub(super) const fn project(mut self) -> Family {
        self.project = true;
        self
    }
    pub(super) const fn runs_files(mut self) -> Family {
        self.runs_files = true;
        self
    }
    pub(super) const fn runs(mut self, interpreter: &'static str) -> Family {
        self.runs = Some(interpreter);
        self
    }

    /// The family's name (its first name).
    #[cfg(test)]
    pub(crate) fn name(&self) -> &'static str {
        self.names[0]
    }

    /// Arguments the gate cannot see (appended by `xargs`, `find -exec … {} +`, `fd -x`) could
    /// carry options that run programs or write files, or code: the gate must see them all.
    pub(crate) fn appended_args_dangerous(&self) -> bool {
        matches!(
            self.kind,
            Kind::Shell | Kind::Interpreter | Kind::Runner | Kind::Wrapper | Kind::Checked
        )
    }

    /// Arguments the gate cannot see (appended by `xargs`, or expanded from a glob) could
    /// carry options: every family above, and any family with an option check (compilers).
    pub(crate) fn unseen_args_dangerous(&self) -> bool {
        self.appended_args_dangerous() || self.check != Check::None
    }

    /// An unquoted glob or brace could expand into options the gate never saw.
    pub(crate) fn options_from_globs_dangerous(&self) -> bool {
        self.unseen_args_dangerous() || self.kind == Kind::Guarded
    }

    /// Runs code the gate cannot read (interpreters and opaque runners).
    pub(crate) fn opaque(&self) -> bool {
        matches!(self.kind, Kind::Interpreter | Kind::Runner)
    }

    /// Runs code or scripts (shells and interpreters).
    pub(crate) fn runs_code(&self) -> bool {
        matches!(self.kind, Kind::Shell | Kind::Interpreter)
    }
}
