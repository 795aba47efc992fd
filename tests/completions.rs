//! `zae-limiter completions SHELL`, installed where `completions --help` says,
//! driven by the real shells: bash through bash-completion's loader, zsh
//! through an interactive shell on a pseudo-terminal (zpty) that presses TAB,
//! fish through `complete -C`. Each completes a two-level command
//! (`zae-limiter limits v` → `validate`) and a flag value (`--format j` →
//! `json`).
//!
//! A shell that is not installed skips its test, unless ZAEL_REQUIRE_INTEROP=1
//! (scripts/test, which installs bash-completion, zsh and fish): then it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{outcome, zae_limiter};

/// The cases every shell must complete: (typed line, a word it must offer).
const CASES: &[(&str, &str)] = &[
    ("zae-limiter limits v", "validate"),
    ("zae-limiter limits plan --format j", "json"),
    ("zae-limiter cooldown settle --outcome q", "quota"),
];

fn shell_present(program: &str, extra: Option<&str>) -> bool {
    let found = Command::new(program)
        .arg("-c")
        .arg("exit 0")
        .output()
        .is_ok_and(|o| o.status.success())
        && extra.is_none_or(|p| Path::new(p).exists());
    if !found {
        let msg = format!(
            "{program}{} not installed (scripts/test installs bash-completion, zsh and fish)",
            extra.map(|e| format!(" or {e}")).unwrap_or_default()
        );
        if std::env::var("ZAEL_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("{msg} (ZAEL_REQUIRE_INTEROP=1)");
        }
        eprintln!("skipped: {msg}");
    }
    found
}

/// A fresh HOME with the completion script for `shell` installed at `rel`,
/// written by the binary exactly as `completions --help` shows.
fn home_with(shell: &str, rel: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let (code, script, err) = outcome(zae_limiter().args(["completions", shell]).output().unwrap());
    assert_eq!(code, 0, "{err}");
    std::fs::write(&path, script).unwrap();
    home
}

/// PATH with our binary first, as after `cargo install`.
fn path_env() -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_zae-limiter"));
    format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn shell_command(program: &str, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("HOME", home)
        .env("PATH", path_env())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_DATA_DIRS")
        .current_dir(home);
    cmd
}

/// bash-completion loads `~/.local/share/bash-completion/completions/zae-limiter`
/// on demand; the registered function is then called as bash calls it on TAB.
const BASH_DRIVER: &str = r#"
source /usr/share/bash-completion/bash_completion
__load_completion zae-limiter || { echo "bash-completion found no completion for zae-limiter" >&2; exit 3; }
fn=$(complete -p zae-limiter | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
line="$1"
read -ra COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$line"
COMP_POINT=${#line}
"$fn" zae-limiter "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;

#[test]
fn bash_completes_subcommands_and_flag_values() {
    if !shell_present("bash", Some("/usr/share/bash-completion/bash_completion")) {
        return;
    }
    let home = home_with(
        "bash",
        ".local/share/bash-completion/completions/zae-limiter",
    );
    for (line, want) in CASES {
        let (code, out, err) = outcome(
            shell_command("bash", home.path())
                .args(["-c", BASH_DRIVER, "driver", line])
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0, "{line}: {err}");
        let offered: Vec<&str> = out.lines().map(str::trim).collect();
        assert!(
            offered.contains(want),
            "bash: `{line}<TAB>` offered {offered:?}, not {want}"
        );
    }
    // The flag value's full set, and nothing from the wrong command.
    let (_, out, _) = outcome(
        shell_command("bash", home.path())
            .args([
                "-c",
                BASH_DRIVER,
                "driver",
                "zae-limiter limits plan --format ",
            ])
            .output()
            .unwrap(),
    );
    let mut values: Vec<&str> = out.lines().collect();
    values.sort();
    assert_eq!(values, ["json", "text"]);
}

/// An interactive zsh (no rc files) on a pseudo-terminal: `compinit` with the
/// script's directory on `fpath`, the line typed, TAB pressed, then a key bound
/// to a widget that writes the edited line to a file.
const ZSH_DRIVER: &str = r#"
zmodload zsh/zpty || exit 3
dir=$1 line=$2 out=$3
zpty -b z zsh -f -i
zpty -w z "PS1='' RPROMPT=''; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -d $dir/.zcompdump"
zpty -w z "dump-buffer() { print -r -- \"\$BUFFER\" > $out.tmp && mv $out.tmp $out; BUFFER=''; zle accept-line }; zle -N dump-buffer; bindkey '^X' dump-buffer"
zpty -w -n z "$line"$'\t'
zpty -w -n z $'\x18'
for i in {1..100}; do [[ -s $out ]] && break; sleep 0.1; done
zpty -d z
"#;

#[test]
fn zsh_completes_subcommands_and_flag_values() {
    if !shell_present("zsh", None) {
        return;
    }
    let home = home_with("zsh", ".zfunc/_zae-limiter");
    let dir = home.path().join(".zfunc");
    for (i, (line, want)) in CASES.iter().enumerate() {
        let out_file = home.path().join(format!("buffer-{i}"));
        let status = shell_command("zsh", home.path())
            .arg("-f")
            .arg("-c")
            .arg(ZSH_DRIVER)
            .arg("driver")
            .arg(&dir)
            .arg(line)
            .arg(&out_file)
            .status()
            .unwrap();
        assert!(status.success(), "zsh driver failed for {line}");
        let buffer = wait_for(&out_file);
        let completed = format!("{} {want} ", line.rsplit_once(' ').unwrap().0);
        assert_eq!(
            buffer.trim_end_matches('\n'),
            completed,
            "zsh: `{line}<TAB>`"
        );
    }
}

fn wait_for(path: &Path) -> String {
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("zsh never wrote the edited line to {}", path.display());
}

#[test]
fn fish_completes_subcommands_and_flag_values() {
    if !shell_present("fish", None) {
        return;
    }
    let home = home_with("fish", ".config/fish/completions/zae-limiter.fish");
    for (line, want) in CASES {
        let (code, out, err) = outcome(
            shell_command("fish", home.path())
                .arg("-c")
                .arg(format!("complete -C '{line}'"))
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0, "{line}: {err}");
        let offered: Vec<&str> = out
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default())
            .collect();
        assert!(
            offered.contains(want),
            "fish: `{line}<TAB>` offered {offered:?}, not {want}"
        );
    }
}
