//! tools stage (gate), PURE: the program registry: every program family the gate knows, under
//! every name it is installed as, and what kind of program it is.
//!
//! A leaf: the program files and the judge ask it; it asks nothing. Adding a program is one row
//! here (plus, for a new kind of check, one `Check` variant and its file) and its cases.

use std::collections::HashMap;
use std::sync::LazyLock;

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
    /// (`-p NAME` imports a module).
    Pytest,
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
}

impl Family {
    const fn new(names: &'static [&'static str], kind: Kind) -> Family {
        Family {
            names,
            kind,
            check: Check::None,
            inner: Finder::None,
            stdin: StdinCode::UnlessGiven,
            code: Code::Scan,
            writes: false,
            project: false,
        }
    }
    const fn shell(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Shell).inner(Finder::Shell)
    }
    const fn interpreter(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Interpreter)
    }
    const fn runner(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Runner).stdin(StdinCode::Always)
    }
    const fn wrapper(names: &'static [&'static str], inner: Finder) -> Family {
        Family::new(names, Kind::Wrapper).inner(inner)
    }
    const fn checked(names: &'static [&'static str], check: Check) -> Family {
        Family::new(names, Kind::Checked).check(check)
    }
    const fn guarded(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Guarded)
    }
    const fn toolchain(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Toolchain)
    }
    const fn plain(names: &'static [&'static str]) -> Family {
        Family::new(names, Kind::Plain)
    }
    const fn check(mut self, check: Check) -> Family {
        self.check = check;
        self
    }
    const fn inner(mut self, inner: Finder) -> Family {
        self.inner = inner;
        self
    }
    const fn stdin(mut self, stdin: StdinCode) -> Family {
        self.stdin = stdin;
        self
    }
    const fn code(mut self, code: Code) -> Family {
        self.code = code;
        self
    }
    const fn writes(mut self) -> Family {
        self.writes = true;
        self
    }
    const fn project(mut self) -> Family {
        self.project = true;
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

/// Every program family the gate knows.
pub(crate) static FAMILIES: &[Family] = &[
    // Shells: `-c` scripts are judged inside; bash's grammar only for the bash-like ones.
    Family::shell(&["bash", "rbash", "bash-static", "osh"]),
    Family::shell(&["sh", "dash", "ash"]).inner(Finder::PosixShell),
    // zsh is not a POSIX shell by default: `=cmd` words, `$=name`/`$~name` flags,
    // `$name[…]` subscripts, glob qualifiers, `${(e)…}`: a differential against real zsh
    // found each. Its scripts are not judged but denied, as fish's are.
    Family::shell(&["zsh", "zsh-static"]).inner(Finder::ForeignShell),
    Family::shell(&[
        "ksh",
        "mksh",
        "lksh",
        "pdksh",
        "oksh",
        "loksh",
        "ksh93",
        "mksh-static",
        "posh",
        "sash",
    ])
    .inner(Finder::PosixShell),
    Family::shell(&["yash"]).inner(Finder::PosixShell),
    Family::shell(&["fish"]).inner(Finder::ForeignShell),
    Family::shell(&["csh", "tcsh"]).inner(Finder::ForeignShell),
    Family::shell(&["pwsh"]).inner(Finder::ForeignShell),
    Family::shell(&["elvish"]).inner(Finder::ForeignShell),
    Family::shell(&["nu"]).inner(Finder::ForeignShell),
    Family::shell(&["xonsh"]).inner(Finder::ForeignShell),
    // Interpreters: code in arguments or on stdin the gate cannot read.
    Family::interpreter(&[
        "python",
        "python2",
        "python3",
        "pypy",
        "pypy3",
        "ipython",
        "ipython3",
        "pythonw",
        "pdb",
        "pydoc",
        "bpython",
        "ptpython",
        "jython",
        "micropython",
    ]),
    Family::interpreter(&["perl", "cperl", "perldb"]).code(Code::Perl),
    Family::interpreter(&["ruby", "erb", "jruby", "truffleruby"]),
    Family::interpreter(&["node", "nodejs", "js", "qjs", "rhino", "jjs", "d8"]),
    Family::interpreter(&["deno"]),
    Family::interpreter(&["bun"]),
    Family::interpreter(&["php", "php-cgi", "phpdbg"]),
    Family::interpreter(&["lua", "luajit", "lua-interpreter", "texlua"]),
    Family::interpreter(&["rscript"]),
    Family::interpreter(&["tclsh", "jimsh"]).stdin(StdinCode::Always),
    Family::interpreter(&["wish"]).stdin(StdinCode::Always),
    Family::interpreter(&["osascript"]),
    Family::interpreter(&["powershell"]),
    Family::interpreter(&["ed"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["ex"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&[
        "vim", "vi", "nvim", "view", "rview", "rvim", "vimdiff", "gvim", "evim", "nvi", "elvis",
        "vile",
    ])
    .stdin(StdinCode::Always)
    .code(Code::Escape),
    Family::interpreter(&["emacs"]).stdin(StdinCode::Always),
    Family::interpreter(&["sqlite3"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["psql"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["mysql"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["gdb"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["expect"]).stdin(StdinCode::Always),
    Family::interpreter(&["jshell"]).stdin(StdinCode::Always),
    Family::interpreter(&["irb"]).stdin(StdinCode::Always),
    Family::interpreter(&["julia"]),
    Family::interpreter(&["guile"]).stdin(StdinCode::Always),
    Family::interpreter(&["racket"]).stdin(StdinCode::Always),
    Family::interpreter(&["sbcl"]).stdin(StdinCode::Always),
    Family::interpreter(&["ghci"]).stdin(StdinCode::Always),
    Family::interpreter(&["swift"]),
    Family::interpreter(&["dc"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["gnuplot"])
        .stdin(StdinCode::Always)
        .code(Code::Escape),
    Family::interpreter(&["octave"]).stdin(StdinCode::Always),
    Family::interpreter(&["r"]).stdin(StdinCode::Always),
    Family::interpreter(&["ts-node"]),
    Family::interpreter(&["tsx"]),
    Family::interpreter(&["groovy"]),
    Family::interpreter(&["kotlin"]),
    Family::interpreter(&["scala"]),
    Family::interpreter(&["elixir"]),
    Family::interpreter(&["erl"]),
    Family::interpreter(&["escript"]),
    Family::interpreter(&["ocaml"]),
    Family::interpreter(&["runghc", "runhaskell"]),
    Family::interpreter(&["m4"]).stdin(StdinCode::Always),
    Family::interpreter(&["cmake"]),
    Family::interpreter(&["lldb"]).stdin(StdinCode::Always),
    Family::interpreter(&["duckdb"]).stdin(StdinCode::Always),
    Family::interpreter(&["mongosh"]).stdin(StdinCode::Always),
    Family::interpreter(&[
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "original-awk",
        "bwk-awk",
        "goawk",
    ])
    .check(Check::Awk)
    .code(Code::Own)
    .stdin(StdinCode::Never),
    Family::interpreter(&["make", "gmake", "bmake"])
        .check(Check::Make)
        .stdin(StdinCode::Never)
        .project(),
    // Wrappers: run another command, which the gate finds and judges.
    Family::wrapper(&["env"], Finder::Env),
    Family::wrapper(&["xargs"], Finder::Xargs),
    Family::wrapper(&["command"], Finder::Command),
    Family::wrapper(&["builtin"], Finder::Builtin),
    Family::wrapper(&["nohup"], Finder::Builtin),
    Family::wrapper(&["nice"], Finder::Nice),
    Family::wrapper(&["timeout"], Finder::Timeout),
    Family::wrapper(&["stdbuf"], Finder::Stdbuf),
    Family::wrapper(&["setsid"], Finder::Setsid),
    Family::wrapper(&["time"], Finder::Time),
    Family::wrapper(&["busybox"], Finder::Busybox),
    Family::wrapper(&["watch"], Finder::Watch),
    Family::wrapper(&["sudo"], Finder::Sudo),
    Family::wrapper(&["doas"], Finder::Doas),
    // Options checked: some run programs or write files.
    Family::checked(&["find"], Check::Find).inner(Finder::Find),
    Family::checked(&["fd", "fdfind"], Check::None).inner(Finder::Fd),
    Family::checked(&["git"], Check::Git),
    Family::checked(&["tar", "gtar", "bsdtar"], Check::Tar),
    Family::checked(&["sed", "gsed"], Check::Sed),
    Family::checked(&["go"], Check::Go).project(),
    Family::checked(&["cargo"], Check::Cargo).project(),
    Family::checked(&["sort"], Check::Sort),
    Family::checked(&["split"], Check::Split),
    Family::checked(&["shuf"], Check::Output),
    Family::checked(&["iconv"], Check::Output),
    Family::checked(&["tree"], Check::Output),
    Family::checked(&["uniq"], Check::Uniq),
    Family::checked(&["xxd"], Check::Xxd),
    Family::checked(&["printf"], Check::Printf),
    Family::checked(&["test", "["], Check::Test),
    Family::checked(&["man"], Check::Man),
    Family::checked(&["less"], Check::Pager),
    Family::checked(&["more"], Check::Pager),
    Family::checked(&["most"], Check::Pager),
    Family::checked(&["rg"], Check::Rg),
    Family::checked(&["zip"], Check::Zip),
    Family::checked(&["patch", "gpatch"], Check::Extract),
    Family::checked(&["cpio"], Check::Extract),
    Family::checked(&["pax"], Check::Extract),
    Family::checked(&["pandoc"], Check::Pandoc),
    Family::checked(
        &[
            "tex", "etex", "pdftex", "xetex", "luatex", "latex", "pdflatex", "xelatex", "lualatex",
        ],
        Check::Latex,
    ),
    Family::checked(&["latexmk"], Check::Latexmk),
    Family::checked(&["exiftool"], Check::Exiftool),
    Family::checked(&["gpg", "gpg2"], Check::Gpg),
    Family::checked(&["openssl"], Check::Openssl),
    Family::checked(&["ssh-keygen"], Check::SshKeys),
    Family::checked(&["ssh-add"], Check::SshKeys),
    Family::checked(&["nc", "ncat", "netcat"], Check::Nc).writes(),
    Family::checked(&["rsync"], Check::Rsync),
    Family::checked(&["scp"], Check::Scp).writes(),
    Family::checked(&["sftp"], Check::Scp),
    Family::checked(&["tcpdump"], Check::Tcpdump),
    Family::checked(&["apt", "apt-get", "apt-cache"], Check::Apt),
    Family::checked(&["dpkg"], Check::Apt),
    Family::checked(&["crontab"], Check::Crontab),
    Family::runner(&["ssh"]).check(Check::Ssh).writes(),
    Family::runner(&["ld.so"]),
    Family::runner(&["toybox"]).inner(Finder::Busybox),
    // Opaque runners: run another command in a way the gate does not parse.
    Family::runner(&["strace"]),
    Family::runner(&["ltrace"]),
    Family::runner(&["ionice"]),
    Family::runner(&["chrt"]),
    Family::runner(&["taskset"]),
    Family::runner(&["flock"]),
    Family::runner(&["unbuffer"]),
    Family::runner(&["script"]),
    Family::runner(&["su"]),
    Family::runner(&["runuser"]),
    Family::runner(&["chroot"]),
    Family::runner(&["unshare"]),
    Family::runner(&["nsenter"]),
    Family::runner(&["firejail"]),
    Family::runner(&["systemd-run"]),
    Family::runner(&["parallel"]),
    Family::runner(&["entr"]),
    Family::runner(&["valgrind"]),
    Family::runner(&["perf"]),
    Family::runner(&["fakeroot"]),
    Family::runner(&["proot"]),
    Family::runner(&["numactl"]),
    Family::runner(&["cgexec"]),
    Family::runner(&["torsocks"]),
    Family::runner(&["proxychains", "proxychains4"]),
    Family::runner(&["faketime"]),
    Family::runner(&["sg"]),
    Family::runner(&["pkexec"]),
    Family::runner(&["dbus-launch"]),
    Family::runner(&["xvfb-run"]),
    Family::runner(&["catchsegv"]),
    Family::runner(&["tmux"]),
    Family::runner(&["screen"]),
    Family::runner(&["at"]),
    Family::runner(&["batch"]),
    Family::runner(&["docker"]),
    Family::runner(&["podman"]),
    Family::runner(&["kubectl"]),
    Family::runner(&["npx"]).project(),
    Family::runner(&["uvx"]),
    Family::runner(&["pipx"]),
    Family::runner(&["nix-shell"]),
    Family::runner(&["direnv"]),
    Family::runner(&["chronic"]),
    Family::runner(&["ifne"]),
    Family::runner(&["sem"]),
    Family::runner(&["rlwrap"]),
    Family::runner(&["caffeinate"]),
    Family::runner(&["bwrap"]),
    Family::runner(&["minijail0"]),
    Family::runner(&["ip"]),
    Family::runner(&["nix"]),
    Family::runner(&["pnpx"]),
    Family::runner(&["bunx"]),
    Family::runner(&["git-lfs"]),
    Family::runner(&["ssh-agent"]),
    Family::runner(&["setpriv"]),
    Family::runner(&["capsh"]),
    Family::runner(&["prlimit"]),
    Family::runner(&["cpulimit"]),
    Family::runner(&["trickle"]),
    Family::runner(&["nocache"]),
    Family::runner(&["eatmydata"]),
    Family::runner(&["gosu"]),
    Family::runner(&["su-exec"]),
    Family::runner(&["chpst"]),
    Family::runner(&["envdir"]),
    Family::runner(&["setuidgid"]),
    Family::runner(&["daemonize"]),
    Family::runner(&["start-stop-daemon"]),
    Family::runner(&["logsave"]),
    Family::runner(&["tsp"]),
    Family::runner(&["nq"]),
    Family::runner(&["dbus-run-session"]),
    // setarch and the personality names it is installed under (util-linux).
    Family::runner(&[
        "setarch",
        "linux32",
        "linux64",
        "uname26",
        "i386",
        "i486",
        "i586",
        "i686",
        "athlon",
        "x86_64",
        "ia64",
        "ppc",
        "ppc32",
        "ppc64",
        "ppc64le",
        "s390",
        "s390x",
        "sparc",
        "sparc32",
        "sparc32bash",
        "sparc64",
        "mips",
        "mips32",
        "mips64",
        "parisc",
        "parisc32",
        "parisc64",
        "arm",
        "armv7l",
        "armh",
        "armv8l",
        "aarch64",
        "arm64",
        "alpha",
        "m68k",
        "loongarch",
        "loongarch64",
        "riscv64",
    ]),
    Family::runner(&["choom"]),
    Family::runner(&["runcon"]),
    Family::runner(&["systemd-cat"]),
    Family::runner(&["newgrp"]),
    Family::runner(&[
        "sensible-editor",
        "editor",
        "sensible-pager",
        "pager",
        "sensible-browser",
    ]),
    Family::runner(&[
        "xdg-open",
        "open",
        "x-www-browser",
        "www-browser",
        "see",
        "run-mailcap",
    ]),
    Family::runner(&["sshpass"]),
    Family::runner(&["hyperfine"]),
    Family::runner(&["watchexec"]),
    Family::runner(&["nodemon"]),
    Family::runner(&["concurrently"]),
    Family::runner(&["xterm"]),
    Family::runner(&["systemd-nspawn"]),
    Family::runner(&["machinectl"]),
    Family::runner(&["nerdctl"]),
    Family::runner(&["distrobox"]),
    Family::runner(&["flatpak"]),
    Family::runner(&["uv"]).project(),
    Family::runner(&["poetry"]).project(),
    Family::runner(&["pipenv"]),
    Family::runner(&["pdm"]),
    Family::runner(&["hatch"]),
    Family::runner(&["conda"]),
    Family::runner(&["mamba"]),
    Family::runner(&["micromamba"]),
    Family::runner(&["pixi"]),
    Family::runner(&["bundle"]).project(),
    Family::runner(&["npm"]).project(),
    Family::runner(&["yarn"]).project(),
    Family::runner(&["pnpm"]).project(),
    Family::runner(&["mise"]),
    Family::runner(&["asdf"]),
    Family::runner(&["devbox"]),
    Family::runner(&["aws-vault"]),
    Family::runner(&["doppler"]),
    Family::runner(&["dotenv"]),
    Family::runner(&["foreman"]),
    Family::runner(&["honcho"]),
    Family::runner(&["stack"]),
    Family::runner(&["opam"]),
    Family::runner(&["rbenv"]),
    Family::runner(&["pyenv"]),
    Family::runner(&["volta"]),
    Family::runner(&["fnm"]),
    Family::runner(&["scl"]),
    Family::runner(&["abduco"]),
    Family::runner(&["dtach"]),
    Family::runner(&["softlimit"]),
    Family::runner(&["fakechroot"]),
    Family::runner(&["retry"]),
    Family::runner(&["lckdo"]),
    Family::runner(&["pee"]),
    Family::runner(&["xe"]),
    Family::runner(&["mispipe"]),
    Family::runner(&["run-one"]),
    Family::runner(&["x-terminal-emulator"]),
    Family::runner(&["gnome-terminal"]),
    Family::runner(&["konsole"]),
    Family::runner(&["kitty"]),
    Family::runner(&["alacritty"]),
    Family::runner(&["wezterm"]),
    Family::runner(&["foot"]),
    Family::runner(&["byobu"]),
    Family::runner(&["zellij"]),
    Family::runner(&["bpftrace"]),
    Family::runner(&["uftrace"]),
    Family::runner(&["rr"]),
    Family::runner(&["systemd-inhibit"]),
    Family::runner(&["flatpak-spawn"]),
    Family::runner(&["toolbox"]),
    Family::runner(&["distrobox-enter"]),
    Family::runner(&["lxc-attach"]),
    Family::runner(&["lxc-execute"]),
    Family::runner(&["schroot"]),
    Family::runner(&["apptainer"]),
    Family::runner(&["singularity"]),
    Family::runner(&["socat"]).writes(),
    Family::runner(&["heaptrack"]),
    Family::runner(&["dumb-init"]),
    Family::runner(&["tini"]),
    Family::runner(&["mpirun"]),
    Family::runner(&["srun"]),
    Family::runner(&["pdsh"]),
    Family::runner(&["pssh"]),
    Family::runner(&["env-cmd"]),
    Family::runner(&["cross-env"]),
    Family::runner(&["dotenvx"]),
    Family::runner(&["vipe"]),
    // Programs that start an editor or take commands (`!cmd`, `~!cmd`, aliases with `!`) from
    // their arguments or from a stdin that is not a terminal (round three).
    Family::runner(&["sudoedit"]),
    Family::runner(&["visudo"]),
    Family::runner(&["vipw", "vigr"]),
    Family::runner(&["edquota"]),
    Family::runner(&["hg", "chg"]),
    Family::runner(&["svn"]),
    Family::runner(&["bzr", "brz"]),
    Family::runner(&["fossil"]),
    Family::runner(&["darcs"]),
    Family::runner(&[
        "mail",
        "mailx",
        "s-nail",
        "bsd-mailx",
        "heirloom-mailx",
        "nail",
    ]),
    Family::runner(&["mutt", "neomutt"]),
    Family::runner(&["ftp", "tnftp", "lftp", "pftp"]),
    Family::runner(&["smbclient"]),
    Family::runner(&["telnet"]),
    Family::runner(&["nano", "rnano", "pico"]),
    Family::runner(&["joe", "jmacs", "jpico", "jstar"]),
    Family::runner(&["mc", "mcedit"]),
    Family::runner(&["micro"]),
    Family::runner(&["kak"]),
    Family::runner(&["hx", "helix"]),
    Family::runner(&["tig"]),
    Family::runner(&["lazygit"]),
    Family::runner(&["ranger"]),
    Family::runner(&["nnn"]),
    // Build and test runners: they run the project's code, and options or stdin that name
    // more (round three).
    Family::runner(&["pytest", "py.test"])
        .check(Check::Pytest)
        .project(),
    Family::runner(&["ninja", "samu"]).project(),
    Family::runner(&["just"]).project(),
    Family::runner(&["task", "go-task"]).project(),
    Family::runner(&["rake"]).project(),
    Family::runner(&["invoke", "inv"]).project(),
    Family::runner(&["scons"]).project(),
    Family::runner(&["bazel", "bazelisk"]).project(),
    Family::runner(&["meson"]).project(),
    Family::runner(&["ctest"]).project(),
    Family::runner(&["gradle"]).project(),
    Family::runner(&["mvn"]).project(),
    Family::runner(&["ant"]).project(),
    Family::runner(&["sbt"]).project(),
    Family::runner(&["mix"]).project(),
    Family::runner(&["rebar3"]).project(),
    Family::runner(&["cabal"]).project(),
    Family::runner(&["dune"]).project(),
    Family::runner(&["tox"]).project(),
    Family::runner(&["nox"]).project(),
    // Debuggers that read their commands from stdin, sdiff (its `e` starts an editor), the
    // agent that runs a program, text browsers with `!` escapes.
    Family::runner(&["dlv"]),
    Family::runner(&["rdbg"]),
    Family::runner(&["gdbserver"]),
    Family::runner(&["sdiff"]),
    Family::runner(&["gpg-agent"]),
    Family::runner(&["lynx"]),
    Family::runner(&["w3m"]),
    Family::runner(&["links", "elinks"]),
    Family::runner(&["run-parts"]).inner(Finder::Directory),
    // Glob-guarded: plain data arguments, but an expanded glob could become options.
    Family::guarded(&["tee"]).writes(),
    // moreutils' `sponge FILE` writes its stdin to FILE; `csplit` writes PREFIX00, PREFIX01...
    Family::guarded(&["sponge"]).writes(),
    Family::guarded(&["csplit"]).writes(),
    Family::guarded(&["cp"]).writes(),
    Family::guarded(&["mv"]).writes(),
    Family::guarded(&["ln"]).writes(),
    Family::guarded(&["chmod"]).writes(),
    Family::guarded(&["chown"]).writes(),
    // Programs that delete or rewrite files or reach the network (a make variable may not name one).
    Family::plain(&["rm"]).writes(),
    Family::plain(&["rmdir"]).writes(),
    Family::plain(&["unlink"]).writes(),
    Family::plain(&["shred"]).writes(),
    Family::plain(&["dd"]).writes(),
    Family::plain(&["truncate"]).writes(),
    Family::plain(&["install"]).writes(),
    Family::plain(&["curl"]).writes(),
    Family::plain(&["wget"]).writes(),
    Family::plain(&["kill"]).writes(),
    Family::plain(&["pkill"]).writes(),
    // Package tools whose bare rule (`pip *`) runs project code.
    Family::plain(&["pip", "pip3"]).project(),
    Family::plain(&["gem"]).project(),
    // Toolchain programs a make variable may name (`CC=gcc`).
    Family::toolchain(&["gcc"]).check(Check::Compiler),
    Family::toolchain(&["g++"]).check(Check::Compiler),
    Family::toolchain(&["cc"]).check(Check::Compiler),
    Family::toolchain(&["c++"]).check(Check::Compiler),
    Family::toolchain(&["clang"]).check(Check::Compiler),
    Family::toolchain(&["clang++"]).check(Check::Compiler),
    Family::toolchain(&["gfortran"]).check(Check::Compiler),
    Family::toolchain(&["rustc"]),
    Family::toolchain(&["ld"]).check(Check::Compiler),
    Family::toolchain(&["ld.lld"]).check(Check::Compiler),
    Family::toolchain(&["ld.gold"]).check(Check::Compiler),
    Family::toolchain(&["lld"]).check(Check::Compiler),
    Family::toolchain(&["ar"]),
    Family::toolchain(&["llvm-ar"]),
    Family::toolchain(&["ranlib"]),
    Family::toolchain(&["as"]),
    Family::toolchain(&["nm"]),
    Family::toolchain(&["strip"]),
    Family::toolchain(&["objcopy"]),
    Family::toolchain(&["tcc"]).check(Check::Compiler),
    Family::toolchain(&["musl-gcc"]).check(Check::Compiler),
];

static BY_NAME: LazyLock<HashMap<&'static str, &'static Family>> = LazyLock::new(|| {
    FAMILIES
        .iter()
        .flat_map(|f| f.names.iter().map(move |n| (*n, f)))
        .collect()
});

/// The registry name a program is known under: lowercased (`RM` is `rm` on a case-insensitive
/// file system), the dynamic loader as `ld.so`, and a version or flavour suffix dropped when
/// what is left is a registry name: a cut before a digit or a `.`, or before a `-` that a
/// version follows (`python3.11` -> `python3`, `perl5.36-x86_64-linux-gnu` -> `perl`,
/// `vim.basic` -> `vim`, `gcc-12` -> `gcc`, `bash-` -> `bash`). Unknown names come back
/// lowercased.
pub(crate) fn canonical(base: &str) -> String {
    let lc = base.to_ascii_lowercase();
    match registry_name(&lc) {
        Some(name) => name.to_string(),
        None => lc,
    }
}

/// The registry name a lowercased program name normalises to (see [`canonical`]).
fn registry_name(lc: &str) -> Option<&str> {
    // The dynamic loader runs the program named by its argument (`ld-linux-x86-64.so.2 /bin/rm`).
    if lc.starts_with("ld-linux") || lc.starts_with("ld-musl") || lc.starts_with("ld.so") {
        return Some("ld.so");
    }
    if BY_NAME.contains_key(lc) {
        return Some(lc);
    }
    let bytes = lc.as_bytes();
    let versionish = |b: u8| b.is_ascii_digit() || b == b'.' || b == b'-';
    // The longest registry name the rule reaches.
    (1..bytes.len()).rev().find_map(|k| {
        let cut = match bytes[k] {
            b'0'..=b'9' | b'.' => true,
            b'-' => {
                bytes[k + 1..].iter().all(|&b| versionish(b))
                    || bytes.get(k + 1).is_some_and(u8::is_ascii_digit)
            }
            _ => false,
        };
        (cut && BY_NAME.contains_key(&lc[..k])).then(|| &lc[..k])
    })
}

/// The family declaring exactly this name (no normalising).
pub(crate) fn exact(name: &str) -> Option<&'static Family> {
    BY_NAME.get(name).copied()
}

/// Do two program names name the same program: equal ignoring case, or names of one family
/// (`gtar` is `tar`, `python3.11` is `python`)? A deny rule for one denies the others.
pub(crate) fn same_program(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    match family(a) {
        Some(x) => family(b).is_some_and(|y| std::ptr::eq(x, y)),
        None => false,
    }
}

/// The family a program name belongs to, by [`canonical`].
pub(crate) fn family(base: &str) -> Option<&'static Family> {
    let found = if base.bytes().any(|b| b.is_ascii_uppercase()) {
        registry_name(&base.to_ascii_lowercase()).and_then(|n| BY_NAME.get(n))
    } else {
        registry_name(base).and_then(|n| BY_NAME.get(n))
    };
    found.copied()
}

/// What a program executes besides what the gate judged, so the kernel's exec set
/// (`tools::sandbox`) must allow it too: programs found on PATH, and the directory the program
/// prints when asked with `dir_query` (`git --exec-path`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecHelpers {
    /// Programs it runs by name (make runs recipes with `sh`).
    pub programs: &'static [&'static str],
    /// Arguments that make it print its helper directory (or a helper program in it).
    pub dir_query: Option<&'static [&'static str]>,
    /// Directories below the printed one that hold the helpers, instead of it (a `*`
    /// component matches any entry): rustc's sysroot holds `bin` and `lib/rustlib/*/bin`.
    pub dir_suffixes: &'static [&'static str],
    /// Directories of the work root where the program puts the programs it builds and then
    /// runs itself (cargo's build scripts and test binaries in `target`): a rule for it
    /// already runs the project's code.
    pub work_dirs: &'static [&'static str],
    /// It builds programs in the private TMPDIR and runs them (`go test`, `go run`).
    pub tmp: bool,
}

/// The [`ExecHelpers`] of a program name (by family, so `gmake` is `make`).
pub fn exec_helpers(name: &str) -> ExecHelpers {
    match family(name).and_then(|f| f.names.first().copied()) {
        Some("make") => ExecHelpers {
            programs: &["sh"],
            ..ExecHelpers::default()
        },
        Some("git") => ExecHelpers {
            programs: &["sh"],
            dir_query: Some(&["--exec-path"]),
            ..ExecHelpers::default()
        },
        // cargo runs rustc (through rustup's proxy, the toolchain's own binaries), the C
        // compiler as linker, and what it builds: build scripts and test binaries.
        Some("cargo") => ExecHelpers {
            programs: &["rustc", "cc"],
            work_dirs: &["target"],
            ..ExecHelpers::default()
        },
        Some("rustc") => ExecHelpers {
            programs: &["cc"],
            dir_query: Some(&["--print", "sysroot"]),
            dir_suffixes: &["bin", "lib/rustlib/*/bin"],
            ..ExecHelpers::default()
        },
        // gcc's driver runs cc1/collect2/lto-wrapper from its own directory, then as and ld.
        Some("gcc" | "g++" | "cc" | "c++" | "gfortran") => ExecHelpers {
            programs: &["as", "ld"],
            dir_query: Some(&["-print-prog-name=collect2"]),
            ..ExecHelpers::default()
        },
        Some("clang" | "clang++") => ExecHelpers {
            programs: &["as", "ld"],
            ..ExecHelpers::default()
        },
        // go runs its tools (compile, link, vet, cgo) from GOTOOLDIR, and the C compiler.
        Some("go") => ExecHelpers {
            programs: &["cc"],
            dir_query: Some(&["env", "GOTOOLDIR"]),
            tmp: true,
            ..ExecHelpers::default()
        },
        // Package scripts run with `sh`, under node, and the tools installed in node_modules
        // (`jest`, `tsc`: node_modules/.bin links into the packages).
        Some("npm" | "yarn" | "pnpm" | "npx") => ExecHelpers {
            programs: &["sh", "node"],
            work_dirs: &["node_modules"],
            ..ExecHelpers::default()
        },
        _ => ExecHelpers::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for f in FAMILIES {
            for n in f.names {
                assert!(seen.insert(*n), "`{n}` is declared twice");
                assert_eq!(canonical(n), *n, "`{n}` is not its own canonical name");
            }
        }
    }

    #[test]
    fn versioned_names_find_their_family() {
        for (name, want) in [
            ("python3.11", "python"),
            ("Python3", "python"),
            ("perl5.36-x86_64-linux-gnu", "perl"),
            ("vim.basic", "vim"),
            ("vim.tiny", "vim"),
            ("nc.openbsd", "nc"),
            ("nc.traditional", "nc"),
            ("bash5", "bash"),
            ("bash-", "bash"),
            ("gcc-12", "gcc"),
            ("go1.22", "go"),
            ("gmake", "make"),
            ("bsdtar", "tar"),
            ("ld-linux-x86-64.so.2", "ld.so"),
        ] {
            assert_eq!(family(name).map(Family::name), Some(want), "{name}");
        }
        // (ssh-keygen is a family since issue 10: `-D` loads a PKCS#11 library.)
        for name in ["ls", "ssh-copy-id", "git-upload-pack", "cargo-fmt", "2to3"] {
            assert!(family(name).is_none(), "{name}");
            assert!(family(name).is_none_or(|f| f.name() != "ssh"), "{name}");
        }
    }
}
