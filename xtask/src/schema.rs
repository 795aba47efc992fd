//! `cargo run -p xtask -- schema [--check]`: write (or check) the manifest JSON
//! Schema from its one definition in `zae_limiter::manifest::schema`.

use std::path::Path;

pub fn run(root: &Path, check: bool) -> Result<(), String> {
    let path = root.join(zae_limiter::manifest::schema::SCHEMA_PATH);
    let want = zae_limiter::manifest::schema::render();
    if check {
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            return Err(format!(
                "{} is stale: run `cargo run -p xtask -- schema`",
                path.display()
            ));
        }
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, want).map_err(|e| format!("{}: {e}", path.display()))
}
