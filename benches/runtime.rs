//! Runtime decisions per second on the local store through the library (what
//! a service calling `runtime::decide` gets), from 1 and from 8 processes:
//!
//! * `shared`: every process checks the same (entity, resource): one state
//!   item, every decision a conditional write racing the other processes;
//! * `spread`: each process its own entity: one state item each.
//!
//! Each decision is a `consume` against a rolling minute (amount 10^9, so
//! nothing is refused) and a concurrency limit (checked, no slot taken): one
//! read and one conditional write of the state item. `acquire` rows resolve
//! the level on every call too (the CLI's path); `decide` rows use a level
//! resolved once (a server's cached level).
//!
//! usage: cargo bench --bench runtime [-- SECONDS]   (default 3 per row)

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zae_limiter::runtime::{self, Mode, Request};
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::{Store, WriteOp};

/// The manifest builder the CLI tests use.
#[path = "../tests/common/manifest.rs"]
mod test_manifest;

const WORKER_ENV: &str = "ZAEL_BENCH_RUNTIME_WORKER";

fn setup(path: &Path) {
    use zae_limiter::items;
    let store = LocalStore::open(path, "bench").expect("open store");
    items::version::ensure_initialized(&store).expect("init");
    let ns = items::namespace::register(&store, "default")
        .expect("namespace")
        .id;
    let level = test_manifest::manifest(&[(
        "api",
        &[
            "rpm: {capacity: 1000000000, window: minute, rolling: true}",
            "in_flight: {concurrency: 1000}",
        ],
    )]);
    let m = zae_limiter::manifest::load_str("bench.yaml", &level)
        .unwrap_or_else(|_| panic!("the bench's manifest is invalid"))
        .manifest;
    let item = items::config::build_resource(&ns, "api", &m.resources["api"]).expect("item");
    store
        .write(WriteOp::Put {
            item,
            condition: None,
        })
        .expect("write level");
}

/// One process: decide until the deadline; prints "decisions admitted".
fn worker(spec: &str) {
    let mut parts = spec.splitn(4, ' ');
    let (path, entity, how, secs) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().parse::<f64>().unwrap(),
    );
    let store = LocalStore::open(Path::new(path), "bench").expect("open store");
    let ns = runtime::namespace_id(&store, "default").expect("namespace");
    let level = runtime::resolve(&store, &ns, entity, "api").expect("level");
    let req = Request::new(Mode::Consume);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut n, mut ok) = (0u64, 0u64);
    while Instant::now() < deadline {
        let now = chrono::Utc::now().timestamp_millis();
        let d = match how {
            "decide" => runtime::decide(&store, &ns, &level, &req, now),
            _ => runtime::acquire(&store, &ns, entity, "api", &req, now),
        }
        .expect("decision");
        n += 1;
        ok += u64::from(d.allowed && d.unavailable.is_none());
    }
    println!("{n} {ok}");
}

fn main() {
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        worker(&spec);
        return;
    }
    let secs: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3.0);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.sqlite");
    setup(&path);
    let exe = std::env::current_exe().expect("own path");
    println!(
        "local store, {secs} s per row, release build; {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<8} {:>9} {:<7} {:>12} {:>10}",
        "call", "processes", "items", "decisions/s", "admitted"
    );
    for how in ["decide", "acquire"] {
        for procs in [1usize, 8] {
            for spread in [false, true] {
                if procs == 1 && spread {
                    continue;
                }
                let started = Instant::now();
                let children: Vec<_> = (0..procs)
                    .map(|i| {
                        let entity = if spread {
                            format!("client-{i}")
                        } else {
                            "client".into()
                        };
                        Command::new(&exe)
                            .env(
                                WORKER_ENV,
                                format!("{} {entity} {how} {secs}", path.display()),
                            )
                            .stdout(Stdio::piped())
                            .spawn()
                            .expect("spawn worker")
                    })
                    .collect();
                let (mut n, mut ok) = (0u64, 0u64);
                for c in children {
                    let out = c.wait_with_output().expect("worker");
                    let text = String::from_utf8_lossy(&out.stdout);
                    let mut it = text
                        .split_whitespace()
                        .map(|v| v.parse::<u64>().unwrap_or(0));
                    n += it.next().unwrap_or(0);
                    ok += it.next().unwrap_or(0);
                }
                let wall = started.elapsed().as_secs_f64().max(secs);
                let items = if spread { "one each" } else { "shared" };
                println!(
                    "{how:<8} {procs:>9} {items:<7} {:>12.0} {:>10}",
                    n as f64 / wall,
                    if ok == n {
                        "all".to_string()
                    } else {
                        format!("{ok}/{n}")
                    }
                );
            }
        }
    }
}
