//! Man pages from the clap definitions: one page per command and subcommand,
//! named like git's (`zae-limiter-limits-plan.1`).
//!
//! clap_mangen renders the standard sections. A command's `after_help` is
//! split as `--help` splits it ([`zae_limiter::cli::help::split`]): the prose
//! goes to NOTES, the examples to EXAMPLES in no-fill mode, so man never
//! reflows an example (a wrapped example pasted into a shell runs as two
//! commands). The header names the manual `zae-limiter`, short enough that
//! the longest page title still fits twice in an 80-column header.

use std::collections::BTreeMap;
use std::path::Path;

use clap_mangen::roff::{roman, Roff};

/// The manual every page belongs to (the centre of the page header).
const MANUAL: &str = "zae-limiter";

/// Renders every page in memory: file name → roff text.
pub fn render_all() -> BTreeMap<String, Vec<u8>> {
    let mut pages = BTreeMap::new();
    let root = <zae_limiter::cli::Cli as clap::CommandFactory>::command();
    let version = root.get_version().unwrap_or_default().to_string();
    collect(root, "zae-limiter", &version, &mut pages);
    pages
}

fn collect(cmd: clap::Command, name: &str, version: &str, pages: &mut BTreeMap<String, Vec<u8>>) {
    let cmd = cmd
        .name(name.to_string())
        .bin_name(
            name.replace('-', " ")
                .replacen("zae limiter", "zae-limiter", 1),
        );
    pages.insert(format!("{name}.1"), page(&cmd, version));
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let sub_name = format!("{name}-{}", sub.get_name());
        collect(sub.clone(), &sub_name, version, pages);
    }
}

/// One page: clap_mangen's sections, then NOTES and EXAMPLES, then VERSION.
fn page(cmd: &clap::Command, version: &str) -> Vec<u8> {
    let split = cmd
        .get_after_help()
        .map(|a| zae_limiter::cli::help::split(&a.to_string()));
    let standard = cmd.clone().after_help(None::<&str>);
    let title = standard.get_name().to_string();
    // `.TH title section date source manual`: the version stands in the date's
    // place (an empty argument would be dropped and shift the others).
    let man = clap_mangen::Man::new(standard.clone())
        .date(version)
        .source("zae-limiter")
        .manual(manual_for(&title));
    let mut out = Vec::new();
    part(&mut out, &|w| man.render_title(w));
    part(&mut out, &|w| man.render_name_section(w));
    part(&mut out, &|w| man.render_synopsis_section(w));
    part(&mut out, &|w| man.render_description_section(w));
    if standard.get_arguments().any(|a| !a.is_hide_set()) {
        part(&mut out, &|w| man.render_options_section(w));
    }
    if standard.has_subcommands() {
        part(&mut out, &|w| man.render_subcommands_section(w));
    }
    if let Some(split) = &split {
        let mut roff = Roff::new();
        if !split.prose.is_empty() {
            roff.control("SH", ["NOTES"]);
            prose(&mut roff, &split.prose);
        }
        if let Some(examples) = &split.examples {
            roff.control("SH", ["EXAMPLES"]);
            verbatim(&mut roff, examples.lines().skip(1));
        }
        out.extend_from_slice(roff.to_roff().as_bytes());
    }
    if standard.get_version().is_some() {
        part(&mut out, &|w| man.render_version_section(w));
    }
    out
}

/// The header's centre: [`MANUAL`] where the title fits twice beside it in 80
/// columns, else a blank (an empty one would read "General Commands Manual"
/// and run into the titles).
fn manual_for(title: &str) -> &'static str {
    let side = title.len() + "(1)".len();
    if 2 * side + MANUAL.len() + 4 <= 80 {
        MANUAL
    } else {
        " "
    }
}

/// Appends one rendered section; every section call repeats roff's
/// preamble, of which only the first is kept.
fn part(out: &mut Vec<u8>, render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>) {
    let mut buf = Vec::new();
    render(&mut buf).expect("rendering to memory cannot fail");
    let text = String::from_utf8(buf).expect("roff is UTF-8");
    let preamble = Roff::new().render();
    let body = match text.strip_prefix(&preamble) {
        Some(body) if !out.is_empty() => body,
        _ => text.as_str(),
    };
    out.extend_from_slice(body.as_bytes());
}

/// Paragraphs filled by man, indented lines (samples) kept as written.
fn prose(roff: &mut Roff, text: &str) {
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            roff.control("PP", []);
        } else if line.starts_with(' ') {
            let mut block = vec![line];
            while let Some(next) = lines.next_if(|l| l.starts_with(' ')) {
                block.push(next);
            }
            verbatim(roff, block.into_iter());
        } else {
            roff.text([roman(line)]);
        }
    }
}

/// Lines in no-fill mode, each exactly as written (less the two-space indent
/// that man's own indent replaces).
fn verbatim<'a>(roff: &mut Roff, lines: impl Iterator<Item = &'a str>) {
    roff.control("nf", []);
    for line in lines {
        roff.text([roman(line.strip_prefix("  ").unwrap_or(line))]);
    }
    roff.control("fi", []);
}

/// Writes the pages to `dir`, or with `check` reports the pages that differ.
pub fn run(dir: &Path, check: bool) -> Result<(), String> {
    let pages = render_all();
    if check {
        let mut stale = Vec::new();
        for (file, want) in &pages {
            match std::fs::read(dir.join(file)) {
                Ok(have) if &have == want => {}
                _ => stale.push(file.clone()),
            }
        }
        let extra = existing(dir)?
            .into_iter()
            .filter(|f| !pages.contains_key(f))
            .collect::<Vec<_>>();
        if stale.is_empty() && extra.is_empty() {
            return Ok(());
        }
        return Err(format!(
            "man pages are out of date (stale or missing: {stale:?}; not generated: {extra:?}).\n\
             Run `cargo run -p xtask -- man` and commit man/."
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for f in existing(dir)? {
        if !pages.contains_key(&f) {
            std::fs::remove_file(dir.join(&f)).map_err(|e| format!("{f}: {e}"))?;
        }
    }
    for (file, text) in pages {
        std::fs::write(dir.join(&file), text).map_err(|e| format!("{file}: {e}"))?;
    }
    Ok(())
}

fn existing(dir: &Path) -> Result<Vec<String>, String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".1") {
            out.push(name);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    /// Each page as man shows it at 80 columns: the header holds the title
    /// twice, whole; every example comes out as written (ASCII hyphens and
    /// quotes, nothing reflowed) and fits the width. Needs man-db (skipped
    /// without it, unless ZAEL_REQUIRE_INTEROP=1).
    #[test]
    fn pages_read_right_at_80_columns() {
        let have_man = std::process::Command::new("man")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have_man {
            assert!(
                std::env::var("ZAEL_REQUIRE_INTEROP").as_deref() != Ok("1"),
                "man (man-db) is not installed"
            );
            eprintln!("skipped: man (man-db) is not installed");
            return;
        }
        let raw = <zae_limiter::cli::Cli as clap::CommandFactory>::command();
        for (file, text) in super::render_all() {
            let mut child = std::process::Command::new("man")
                .env("MANWIDTH", "80")
                .env("LC_ALL", "C.UTF-8")
                .env_remove("MANPAGER")
                .env_remove("PAGER")
                .args(["-l", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&text).unwrap();
            let out = child.wait_with_output().unwrap();
            let shown = String::from_utf8_lossy(&out.stdout);
            let title = format!("{}(1)", file.trim_end_matches(".1"));
            let header = shown.lines().next().unwrap_or_default();
            assert!(
                header.starts_with(&title) && header.ends_with(&title),
                "{file}: header at 80 columns is {header:?}"
            );
            if let Some(examples) = examples_of(&raw, &file) {
                for line in examples.lines().skip(1) {
                    let want = format!("       {}", line.strip_prefix("  ").unwrap_or(line));
                    assert!(
                        shown.lines().any(|l| l == want),
                        "{file}: example line not shown as written:\n{want}\n--- page:\n{shown}"
                    );
                    assert!(want.chars().count() <= 80, "{file}: {want}");
                }
            }
        }
    }

    /// The examples block of the command a page documents.
    fn examples_of(root: &clap::Command, file: &str) -> Option<String> {
        fn find<'a>(cmd: &'a clap::Command, name: &str, want: &str) -> Option<&'a clap::Command> {
            if name == want {
                return Some(cmd);
            }
            cmd.get_subcommands()
                .find_map(|s| find(s, &format!("{name}-{}", s.get_name()), want))
        }
        let cmd = find(root, "zae-limiter", file.trim_end_matches(".1"))?;
        zae_limiter::cli::help::split(&cmd.get_after_help()?.to_string()).examples
    }

    /// Fails when `man/` differs from what the clap definitions generate.
    #[test]
    fn committed_man_pages_match_the_cli_definitions() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../man");
        if let Err(e) = super::run(&dir, true) {
            panic!("{e}");
        }
    }
}
