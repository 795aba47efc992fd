//! An apply interrupted on a real DynamoDB API (moto) is finished by the next
//! apply: nothing lost, buckets synced, no item outside the managed set
//! touched. Interruptions: the process killed after its Nth write (like
//! `kill -9`, via the test-only ZAEL_FAULT_ABORT_AFTER_WRITES), and connections
//! dropped mid-request by a proxy (the store retries them).

mod common;
mod interop_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use interop_support::{default_nsid, describe, interop, Interop};
use serde_json::Value;

const V1: &str = include_str!("../scripts/interop/manifests/fixture.yaml");

/// V1 with user-1's gpt-4 rpm lowered, team-a's quota raised, api-key-123
/// dropped and a new entity added.
fn v2() -> String {
    let s = V1
        .replacen(
            "rpm:\n            capacity: 60",
            "rpm:\n            capacity: 7",
            1,
        )
        .replacen("capacity: 1000000", "capacity: 2000000", 1);
    let cut = s.find("  api-key-123:").expect("fixture has api-key-123");
    format!(
        "{}  newcomer:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 5\n",
        &s[..cut]
    )
}

/// What must be equal after an apply: every config item and the managed set,
/// with the namespace id elided; and no pending fan-out left.
fn comparable(items: &[Value]) -> BTreeMap<String, Value> {
    let ns = default_nsid(items);
    // The item as JSON with its namespace id written `{ns}`.
    let elide = |v: &Value| {
        let text = serde_json::to_string(v).unwrap_or_default();
        serde_json::from_str(&text.replace(&ns, "{ns}")).unwrap_or(Value::Null)
    };
    let mut out = BTreeMap::new();
    for i in items {
        let pk = i["PK"]["S"]
            .as_str()
            .unwrap_or_default()
            .replace(&ns, "{ns}");
        let sk = i["SK"]["S"].as_str().unwrap_or_default().to_string();
        let mut v = i.clone();
        if sk.starts_with("#PROVISIONER#PENDING#") {
            out.insert(
                format!("{pk} {sk}"),
                Value::String("pending fan-out left behind".into()),
            );
        } else if sk == "#PROVISIONER" {
            if let Value::Object(m) = &mut v {
                m.remove("last_applied");
                m.remove("zael_counts");
                m.remove("zael_write");
            }
            out.insert(format!("{pk} {sk}"), elide(&v));
        } else if sk.starts_with("#CONFIG")
            || sk.starts_with("#RESOURCES")
            || sk.starts_with("#ENTITY_CONFIG")
        {
            // The counts' recount stamp differs from apply to apply.
            if let Value::Object(m) = &mut v {
                m.remove("zael#recount");
            }
            out.insert(format!("{pk} {sk}"), elide(&v));
        }
    }
    out
}

/// Equal maps, or a panic naming the keys that differ.
fn same(got: &BTreeMap<String, Value>, want: &BTreeMap<String, Value>, ctx: &str) {
    let diff: Vec<String> = got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| format!("{k}:\n  got  {:?}\n  want {:?}", got.get(k), want.get(k)))
        .collect();
    assert!(diff.is_empty(), "{ctx}: items differ\n{}", diff.join("\n"));
}

fn bucket_rpm(items: &[Value], entity: &str) -> Option<String> {
    items
        .iter()
        .find(|i| {
            i["PK"]["S"]
                .as_str()
                .is_some_and(|pk| pk.ends_with(&format!("/BUCKET#{entity}#gpt-4#0")))
        })
        .and_then(|b| b["b_rpm_cp"]["N"].as_str().map(str::to_string))
}

fn apply(
    it: &Interop,
    manifest: &str,
    envs: &[(&str, &str)],
    endpoint: &str,
) -> std::process::Output {
    it.ours_env(
        &[
            "limits",
            "apply",
            "-n",
            &it.table,
            "-f",
            manifest,
            "--endpoint-url",
            endpoint,
        ],
        envs,
    )
}

/// A table with V1 applied, a live bucket for user-1/gpt-4 and an unmanaged
/// resource level written by the Python client.
fn prepared(tag: &str) -> Option<(Interop, String, String)> {
    let it = interop(tag)?;
    let m1 = it.write_file("v1.yaml", V1).to_string_lossy().into_owned();
    let m2 = it
        .write_file("v2.yaml", &v2())
        .to_string_lossy()
        .into_owned();
    it.create_table();
    let out = apply(&it, &m1, &[], &it.endpoint);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    it.reference_many(&[
        &[
            "acquire", &it.table, "default", "user-1", "gpt-4", "rpm", "1",
        ],
        &["set-unmanaged", &it.table, "default"],
    ]);
    Some((it, m1, m2))
}

/// The comparable dumps of a clean apply's table with V1 and after V2's apply.
type CleanEnds = [BTreeMap<String, Value>; 2];

/// [`prepared`] for `tag`, and the [`CleanEnds`] reached from the same start
/// on a table of its own (`{tag}clean`).
fn prepared_with_clean_ends(tag: &str) -> Option<(Interop, String, String, CleanEnds)> {
    let (it, m1, m2) = prepared(tag)?;
    let (clean, _, clean_m2) = prepared(&format!("{tag}clean"))?;
    let with_v1 = comparable(&clean.dump());
    let out = apply(&clean, &clean_m2, &[], &clean.endpoint);
    assert!(out.status.success(), "{}", describe(&out));
    Some((it, m1, m2, [with_v1, comparable(&clean.dump())]))
}

#[test]
fn a_killed_apply_is_finished_by_the_next_one() {
    let Some((it, m1, m2, [want1, want2])) = prepared_with_clean_ends("kill") else {
        return;
    };
    assert_ne!(want1, want2);

    let before = it.dump();
    let unmanaged = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|i| {
                i["PK"]["S"]
                    .as_str()
                    .is_some_and(|pk| pk.ends_with("/RESOURCE#legacy"))
            })
            .cloned()
            .collect()
    };
    assert_eq!(unmanaged(&before).len(), 1);
    assert_eq!(bucket_rpm(&before, "user-1").as_deref(), Some("60000"));

    // Kill at an early and a late write; each repair runs after the
    // dead apply's leases ran out, and alternates the manifests.
    let mut clock = 0i64;
    let mut kills = 0;
    for (n, (manifest, want, rpm)) in [(2, (&m2, &want2, "7000")), (5, (&m1, &want1, "60000"))] {
        let n_text = n.to_string();
        let offset = clock.to_string();
        let killed = apply(
            &it,
            manifest,
            &[
                ("ZAEL_FAULT_ABORT_AFTER_WRITES", &n_text),
                ("ZAEL_TEST_CLOCK_OFFSET_MS", &offset),
            ],
            &it.endpoint,
        );
        match killed.status.code() {
            None => kills += 1,
            // Fewer than n writes: the apply finished; the repair must change nothing.
            Some(0) => {}
            Some(c) => panic!(
                "write {n}: exit {c}\n{}",
                String::from_utf8_lossy(&killed.stderr)
            ),
        }
        clock += 2_000_000;
        let offset = clock.to_string();
        let repair = apply(
            &it,
            manifest,
            &[("ZAEL_TEST_CLOCK_OFFSET_MS", &offset)],
            &it.endpoint,
        );
        assert!(
            repair.status.success(),
            "write {n}: repair failed\n{}",
            describe(&repair)
        );
        let items = it.dump();
        same(
            &comparable(&items),
            want,
            &format!("after a kill at write {n}"),
        );
        assert_eq!(
            bucket_rpm(&items, "user-1").as_deref(),
            Some(rpm),
            "the bucket follows the manifest (kill at {n})"
        );
        assert_eq!(
            unmanaged(&items),
            unmanaged(&before),
            "unmanaged level touched (kill at {n})"
        );
    }
    eprintln!("{kills} of 2 applies were killed mid-way");
    assert!(kills >= 1, "no apply was interrupted");
}

/// Forwards to `upstream`, but cuts every `every`-th request: the request is
/// read and the connection closed without an answer.
fn flaky_proxy(upstream: &str, every: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let addr = listener.local_addr().expect("proxy address");
    let target = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let cut = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let cut_out = cut.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&target) else {
                continue;
            };
            let (seen, cut) = (seen.clone(), cut.clone());
            let (mut c_read, mut s_write) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let (mut s_read, mut c_write) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                loop {
                    let n = match c_read.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if buf[..n].starts_with(b"POST ")
                        && seen.fetch_add(1, Ordering::SeqCst) % every == every - 1
                    {
                        cut.fetch_add(1, Ordering::SeqCst);
                        let _ = c_read.shutdown(Shutdown::Both);
                        let _ = s_write.shutdown(Shutdown::Both);
                        break;
                    }
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
                let _ = c_write.shutdown(Shutdown::Both);
            });
        }
    });
    (format!("http://{addr}"), cut_out)
}

#[test]
fn dropped_connections_are_retried_and_lose_nothing() {
    let Some((it, _m1, m2, [_, want])) = prepared_with_clean_ends("conn") else {
        return;
    };

    let (proxy, cut) = flaky_proxy(&it.endpoint, 4);
    let out = apply(&it, &m2, &[], &proxy);
    let cut = cut.load(Ordering::SeqCst);
    assert!(cut >= 3, "the proxy cut only {cut} requests");
    assert!(
        out.status.success(),
        "apply through a flaky connection failed\n{}",
        describe(&out)
    );
    let items = it.dump();
    same(&comparable(&items), &want, "after dropped connections");
    assert_eq!(bucket_rpm(&items, "user-1").as_deref(), Some("7000"));
}
