//! Man pages from the clap definitions: one page per command and subcommand,
//! named like git's (`zae-limiter-limits-plan.1`).

use std::collections::BTreeMap;
use std::path::Path;

/// Renders every page in memory: file name → roff text.
pub fn render_all() -> BTreeMap<String, Vec<u8>> {
    let mut pages = BTreeMap::new();
    let root = zae_limiter::cli::command();
    collect(root, "zae-limiter", &mut pages);
    pages
}

fn collect(cmd: clap::Command, name: &str, pages: &mut BTreeMap<String, Vec<u8>>) {
    let cmd = cmd
        .name(name.to_string())
        .bin_name(
            name.replace('-', " ")
                .replacen("zae limiter", "zae-limiter", 1),
        );
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .expect("rendering to memory cannot fail");
    pages.insert(format!("{name}.1"), buf);
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let sub_name = format!("{name}-{}", sub.get_name());
        collect(sub.clone(), &sub_name, pages);
    }
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
    use std::path::Path;

    /// Fails when `man/` differs from what the clap definitions generate.
    #[test]
    fn committed_man_pages_match_the_cli_definitions() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../man");
        if let Err(e) = super::run(&dir, true) {
            panic!("{e}");
        }
    }
}
