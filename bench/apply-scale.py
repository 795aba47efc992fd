#!/usr/bin/env python3
"""limits apply and plan at scale: time, peak memory and requests, on the
local store and on DynamoDB (moto), and Python 0.17 resolving sampled
entities of what was applied (docs/performance.md).

Usage (from the repository root):
  scripts/python-env >/dev/null
  cargo build --release
  .venv/bin/python bench/apply-scale.py [--local 10000,100000] [--moto 10000]
      [--bin target/release/zae-limiter] [--samples 20]

Manifests come from bench/gen_manifest.py --simple (every entity on 3
resources: 3 levels each, plus 1 system and 3 resource levels). Steps per
size and store, each on a fresh table: the first apply, a no-op plan, and a
no-op apply. Peak memory is /usr/bin/time's maximum resident set size; the
requests are the binary's own count (ZAEL_REQUEST_STATS=1: DynamoDB requests,
or local store operations and the items they carried). Without
ZAEL_TEST_DYNAMODB_ENDPOINT the script starts its own moto_server for the
moto runs (and stops it). The machine is not idle: run it twice.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def start_moto():
    out = subprocess.run([os.path.join(ROOT, "scripts", "moto-server")], capture_output=True, text=True, check=True)
    pid, port = out.stdout.split()
    return int(pid), f"http://127.0.0.1:{port}"


def run(binary, args, env):
    """One command under /usr/bin/time -v: (seconds, peak MB, requests, items, last stdout line)."""
    env = dict(os.environ, ZAEL_REQUEST_STATS="1", **env)
    t = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-v", binary] + args, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"{args} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    reqs = re.search(r"zae-limiter: (\d+) (DynamoDB requests|store operations)", out.stderr)
    items = re.search(r"store operations \(local\), (\d+) items", out.stderr)
    last = out.stdout.strip().splitlines()[-1:] or [""]
    return (
        elapsed,
        int(rss.group(1)) / 1024 if rss else None,
        int(reqs.group(1)) if reqs else None,
        int(items.group(1)) if items else None,
        last[0],
    )


def steps(binary, manifest, store_args, env):
    rows = []
    rows.append(("apply (first)",) + run(binary, ["limits", "apply", "-q", "-f", manifest] + store_args, env))
    rows.append(("plan (no-op)",) + run(binary, ["limits", "plan", "-q", "-f", manifest] + store_args, env))
    rows.append(("apply (no-op)",) + run(binary, ["limits", "apply", "-q", "-f", manifest] + store_args, env))
    return rows


def python_samples(table, entities, samples, env):
    """Python 0.17 resolves sampled (entity, resource) pairs as the manifest declares them."""
    rng = random.Random(7)
    picks = sorted({rng.randrange(entities) for _ in range(samples)} | {0, entities - 1})
    pairs = [f"user-{e:06d}/model-{e % 3}" for e in picks]
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "interop", "ref.py"), "resolve", table, "bench"] + pairs,
        capture_output=True, text=True, env=dict(os.environ, **env), cwd=ROOT,
    )
    if out.returncode != 0:
        sys.exit(f"ref.py resolve failed:\n{out.stderr}")
    got = json.loads(out.stdout)
    wrong = []
    for e, pair in zip(picks, pairs):
        limits = {l["name"]: l["capacity"] for l in got[pair]["limits"]}
        want = {"rpm": 100 + e % 900, "tpm": 10000 + e}
        if limits != want or got[pair]["source"] != "entity":
            wrong.append((pair, got[pair]))
    return len(pairs), wrong


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--local", default="10000,100000", help="entity counts for the local store ('' for none)")
    ap.add_argument("--moto", default="10000", help="entity counts for moto ('' for none)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "zae-limiter"))
    ap.add_argument("--samples", type=int, default=20)
    a = ap.parse_args()
    sizes = lambda s: [int(x) for x in s.split(",") if x]
    tmp = tempfile.mkdtemp()
    results = []

    def manifest(n):
        path = os.path.join(tmp, f"m{n}.yaml")
        if not os.path.exists(path):
            with open(path, "w") as f:
                subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_manifest.py"), "--simple", str(n)], stdout=f, check=True)
        return path

    header = f"{'store':<6} {'entities':>8} {'levels':>8}  {'step':<14} {'seconds':>8} {'peak MB':>8} {'requests':>9} {'items':>8}  result"

    def show(row):
        store, n, step, secs, rss, reqs, items, last = row
        print(f"{store:<6} {n:>8} {3 * n + 4:>8}  {step:<14} {secs:>8.1f} {rss or 0:>8.0f} {reqs if reqs is not None else '?':>9} {items if items is not None else '':>8}  {last}", flush=True)

    print(header, flush=True)
    for n in sizes(a.local):
        store = os.path.join(tmp, f"local-{n}.sqlite")
        for row in steps(a.bin, manifest(n), [f"--local={store}", "-n", "bench"], {}):
            results.append(("local", n) + row)
            show(results[-1])

    moto_pid = None
    if sizes(a.moto):
        endpoint = os.environ.get("ZAEL_TEST_DYNAMODB_ENDPOINT")
        if not endpoint:
            moto_pid, endpoint = start_moto()
        env = dict(AWS, AWS_ENDPOINT_URL=endpoint, ZAEL_TEST_DYNAMODB_ENDPOINT=endpoint)
        try:
            for n in sizes(a.moto):
                table = f"scale-{n}-{int(time.time())}"
                subprocess.run([a.bin, "table", "create", "-n", table], check=True, capture_output=True, env=dict(os.environ, **env))
                for row in steps(a.bin, manifest(n), ["-n", table], env):
                    results.append(("moto", n) + row)
                    show(results[-1])
                checked, wrong = python_samples(table, n, a.samples, env)
                print(f"moto {n}: Python 0.17 resolved {checked} sampled entity levels, {len(wrong)} wrong {wrong[:3]}")
        finally:
            if moto_pid:
                os.kill(moto_pid, 15)

    print()
    print(header)
    for row in results:
        show(row)


if __name__ == "__main__":
    main()
