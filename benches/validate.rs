//! `limits validate` speed without the CLI: YAML parse alone, and parse + validate,
//! on a manifest from bench/gen_manifest.py (default 10,000 entities × 3 resources,
//! block style; `--flow` for flow style).
//!
//! usage: cargo bench -p zae-limiter --no-default-features --bench validate [-- [--flow] ENTITIES]
//! Needs python3 (runs the generator). Prints best-of-5 wall times; the side-by-side
//! comparison with the reference lives in bench/validate-vs-reference.sh.

use std::process::Command;
use std::time::{Duration, Instant};

use zae_limiter::manifest::{load_str, yaml};

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(f());
            t0.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let entities = std::env::args()
        .skip(1)
        .find(|a| a.parse::<u32>().is_ok())
        .unwrap_or_else(|| "10000".into());
    let flow = std::env::args().any(|a| a == "--flow");
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg(format!("{root}/bench/gen_manifest.py"))
        .args(flow.then_some("--flow"))
        .args([entities.as_str(), "3"])
        .output()
        .expect("python3 bench/gen_manifest.py");
    let text = String::from_utf8(out.stdout).expect("generator writes UTF-8");
    println!(
        "manifest: {entities} entities x 3 resources, {} style, {} bytes",
        if flow { "flow" } else { "block" },
        text.len()
    );
    assert!(
        load_str("bench.yaml", &text).is_ok(),
        "generated manifest must be valid"
    );

    let parse = best_of(5, || yaml::parse(&text).map(|d| d.root.is_some()));
    println!("yaml::parse          : {:8.3} s", parse.as_secs_f64());
    let full = best_of(5, || load_str("bench.yaml", &text).is_ok());
    println!("load_str (validate)  : {:8.3} s", full.as_secs_f64());
}
