//! The layering of the crate, written down once and checked: which top-level
//! module may use which (docs/architecture.md, "Layers"). Data flows one
//! way, so the table has no circle, and a `use crate::…` (or a `crate::…`
//! path) that the table does not allow fails the test below. A new module
//! gets a row here; a new arrow is added only when it keeps the table free
//! of circles (the test checks that too).

/// A row that may use every module listed before it.
const EVERY_MODULE_ABOVE: &str = "*";

/// `(module, the modules it may use)`, lowest layer first. The engine crate
/// (`zae_limiter_engine`) is below all of them.
pub const LAYERS: &[(&str, &[&str])] = &[
    // Leaves: exit codes, bounded input reads, the clock, randomness, the
    // progress of long work (drawn by the CLI).
    ("exit_codes", &[]),
    ("input", &[]),
    ("clock", &[]),
    ("random", &[]),
    ("progress", &[]),
    // The store knows items, not manifests (and nothing of the command line).
    ("store", &["random"]),
    // The manifest knows files and YAML, not stores.
    ("manifest", &["clock", "input"]),
    // The table layout: desired items from the validated model.
    ("items", &["clock", "manifest", "random", "store"]),
    ("display", &["items", "manifest", "store"]),
    // Read-only: read, diff, detail.
    (
        "plan",
        &["clock", "display", "items", "manifest", "progress", "store"],
    ),
    // Carries a plan out.
    (
        "apply",
        &[
            "clock", "items", "manifest", "plan", "progress", "random", "store",
        ],
    ),
    // request → resolved level → engine decision → one conditional write.
    (
        "runtime",
        &["clock", "items", "manifest", "plan", "random", "store"],
    ),
    (
        "cooldown",
        &[
            "clock",
            "exit_codes",
            "input",
            "items",
            "random",
            "runtime",
            "store",
        ],
    ),
    (
        "simulate",
        &["clock", "display", "input", "items", "manifest"],
    ),
    // A namespace's stored levels as a manifest (`limits export`).
    ("export", &["items", "manifest", "plan", "store"]),
    // The limits of one entity on one resource, from a manifest or the store.
    (
        "explain",
        &["clock", "display", "items", "manifest", "store"],
    ),
    // The runtime and the cooldowns over HTTP (`serve`).
    (
        "serve",
        &["clock", "cooldown", "display", "items", "runtime", "store"],
    ),
    // Arguments, help, output and errors; converts every layer's error.
    (
        "cli",
        &[
            "apply",
            "clock",
            "cooldown",
            "display",
            "exit_codes",
            "explain",
            "export",
            "input",
            "items",
            "manifest",
            "plan",
            "progress",
            "runtime",
            "simulate",
            "store",
        ],
    ),
    // One module per command, and the dispatch: may use every module above.
    ("commands", &[EVERY_MODULE_ABOVE]),
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::{EVERY_MODULE_ABOVE, LAYERS};

    /// Every `.rs` file below `dir`.
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The top-level modules a file's code (not its comments) names as `crate::NAME`.
    fn used_modules(text: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for line in text.lines() {
            let code = match line.find("//") {
                Some(i) => &line[..i],
                None => line,
            };
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                // `zae_limiter_engine::…` and `$crate::` are not this crate's modules.
                let before = code[..i].chars().last();
                if !name.is_empty()
                    && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
                {
                    out.insert(name);
                }
            }
        }
        out
    }

    #[test]
    fn every_module_uses_only_the_layers_below_it() {
        let mut allowed: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (m, deps) in LAYERS {
            let set = if deps == &[EVERY_MODULE_ABOVE] {
                allowed.keys().copied().collect()
            } else {
                deps.iter().copied().collect()
            };
            allowed.insert(*m, set);
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut wrong = Vec::new();
        for file in files {
            let rel = file.strip_prefix(&src).unwrap();
            let top = rel.iter().next().unwrap().to_string_lossy();
            let module = top.trim_end_matches(".rs");
            if matches!(module, "main" | "lib" | "layers") {
                continue;
            }
            let Some(allowed) = allowed.get(module) else {
                wrong.push(format!(
                    "src/{module}: not in the table of src/layers.rs; add a row with the modules it may use"
                ));
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap();
            for used in used_modules(&text) {
                if used != module && !allowed.contains(used.as_str()) {
                    wrong.push(format!(
                        "src/{}: {module} uses crate::{used}, which src/layers.rs does not allow",
                        rel.display()
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// Each module may use only modules listed before it, so no arrow can
    /// close a circle.
    #[test]
    fn the_table_has_no_circle() {
        let mut seen = BTreeSet::new();
        for (module, deps) in LAYERS {
            for dep in deps.iter().filter(|d| **d != EVERY_MODULE_ABOVE) {
                assert!(
                    seen.contains(dep),
                    "{module} may use {dep}, which is not listed before it"
                );
            }
            assert!(seen.insert(*module), "{module} is listed twice");
        }
    }

    #[test]
    fn paths_in_code_count_and_comments_do_not() {
        let text = "use crate::store::Item;\n/// see [`crate::cli`]\nlet x = crate::clock::now(); // crate::apply\nzae_limiter_engine::cooldown::x();\n";
        let got: Vec<String> = used_modules(text).into_iter().collect();
        assert_eq!(got, ["clock", "store"]);
    }
}
