//! tools stage (gate), PURE: go: flags that run programs (-toolexec, -vettool, -exec) or write
//! outside the work root.

use crate::paths::path_option_outside;
use crate::programs::argv::{denied, options};
use crate::shell::lex::Word;

/// go flags that run programs (-toolexec, -vettool, -exec, -extld) or write outside the work root.
pub(crate) fn go_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    let all: Vec<&str> = options(args).collect();
    if all.first() == Some(&"env") && all.iter().any(|v| matches!(*v, "-w" | "-u")) {
        return hit("`env -w`/`-u` writes settings (GOFLAGS can name programs to run)");
    }
    // Go's flag package accepts `--o` for `-o`.
    let single: Vec<Word> = args
        .iter()
        .map(|w| {
            let mut w = w.clone();
            if w.value.starts_with("--") {
                w.value.remove(0);
            }
            w
        })
        .collect();
    if single.iter().any(|w| {
        ["-gcflags", "-ldflags", "-asmflags"]
            .iter()
            .any(|f| w.value.starts_with(f))
            && w.value.contains("-o")
    }) {
        return hit("build flags with `-o` write where the gate cannot check");
    }
    if let Some((o, p)) = path_option_outside(
        &single,
        &[
            "-o",
            "-coverprofile",
            "-cpuprofile",
            "-memprofile",
            "-blockprofile",
            "-mutexprofile",
            "-trace",
            "-outputdir",
            "-C",
            "-pkgdir",
            "-debug-trace",
            "-modfile",
            "-overlay",
            "-test.coverprofile",
            "-test.cpuprofile",
            "-test.memprofile",
            "-test.trace",
            "-test.outputdir",
        ],
    ) {
        return hit(&format!("`{o} {p}` reaches outside the work root"));
    }
    if all
        .iter()
        .any(|v| v.contains("extld") || v.contains("toolexec"))
    {
        return hit("`-extld`/`-toolexec` in build flags runs a program the rules did not name");
    }
    for v in all {
        let name = v.trim_start_matches('-').split('=').next().unwrap_or("");
        if v.starts_with('-') && matches!(name, "exec" | "toolexec" | "vettool" | "overlay") {
            return hit(&format!("`-{name}` runs a program the rules did not name"));
        }
    }
    None
}
