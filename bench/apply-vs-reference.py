#!/usr/bin/env python3
"""plan and apply of a manifest with thousands of levels: ours versus the
reference provisioner (zae-limiter 0.17's handler called in-process), against
the same moto server. Counts HTTP requests and wall time for each step.

Usage (from the repository root):
  scripts/python-env >/dev/null
  cargo build --release
  .venv/bin/python bench/apply-vs-reference.py [--entities 1200] [--bin target/release/zae-limiter]

Without ZAEL_TEST_DYNAMODB_ENDPOINT it starts its own moto_server (and stops it).
Levels = 1 system + 10 resources + 2 per entity. Steps, each on a fresh table
per side: first apply, no-op plan, apply after changing 10% of the entity levels,
apply after dropping 10% of the entities (their levels deleted).
Ours also runs the no-op plan and a 10% apply (changing those levels back) with
--no-refresh, which reads only the levels the manifest changes.
Our request counts come from the binary (ZAEL_REQUEST_STATS=1), the
reference's from a counter on botocore's HTTP send.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "interop"))


def start_moto():
    out = subprocess.run(
        [os.path.join(ROOT, "scripts", "moto-server")], capture_output=True, text=True, check=True
    )
    pid, port = out.stdout.split()
    return int(pid), f"http://127.0.0.1:{port}"


def manifest(entities, changed=0, dropped=0):
    lines = ["namespace: default", "system:", "  limits:", "    rpm:", "      capacity: 1000", "resources:"]
    for r in range(10):
        lines += [f"  model-{r}:", "    limits:", "      rpm:", f"        capacity: {100 + r}"]
    lines.append("entities:")
    for e in range(entities - dropped):
        cap = 60 + (1 if e < changed else 0)
        lines += [
            f"  user-{e:05d}:",
            "    resources:",
            "      model-0:",
            "        limits:",
            "          rpm:",
            f"            capacity: {cap}",
            "          tpm:",
            "            capacity: 20000",
            "      _default_:",
            "        limits:",
            "          rph:",
            "            capacity: 3000",
            "            refill_period: 3600",
        ]
    return "\n".join(lines) + "\n"


class Counter:
    """Counts botocore HTTP sends (retries included) in this process."""

    def __init__(self):
        import botocore.endpoint

        self.n = 0
        original = botocore.endpoint.Endpoint._send
        counter = self

        def send(endpoint, request):
            counter.n += 1
            return original(endpoint, request)

        botocore.endpoint.Endpoint._send = send


def ours(binary, endpoint, args):
    env = dict(os.environ, ZAEL_REQUEST_STATS="1", AWS_ENDPOINT_URL=endpoint)
    t = time.perf_counter()
    out = subprocess.run([binary] + args + ["--endpoint-url", endpoint], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t
    if out.returncode not in (0, 2):
        sys.exit(f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    m = re.search(r"zae-limiter: (\d+) DynamoDB requests", out.stderr)
    return elapsed, int(m.group(1)) if m else None, out.stdout.strip().splitlines()[-1:]


def reference(counter, table, ns_id, action, manifest_dict):
    from zae_limiter_provisioner.handler import on_event

    before = counter.n
    t = time.perf_counter()
    res = on_event({"action": action, "table_name": table, "namespace_id": ns_id, "manifest": manifest_dict}, None)
    elapsed = time.perf_counter() - t
    summary = {k: res.get(k) for k in ("created", "updated", "deleted", "unchanged", "pending") if k in res}
    if res.get("errors"):
        summary["errors"] = len(res["errors"])
    if action == "plan":
        summary["changes"] = len(res.get("changes", []))
    return elapsed, counter.n - before, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=1200)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "zae-limiter"))
    ap.add_argument("--skip-reference", action="store_true")
    a = ap.parse_args()

    moto_pid = None
    endpoint = os.environ.get("ZAEL_TEST_DYNAMODB_ENDPOINT")
    if not endpoint:
        moto_pid, endpoint = start_moto()
        os.environ["ZAEL_TEST_DYNAMODB_ENDPOINT"] = endpoint
    try:
        import yaml
        import zl

        levels = 1 + 10 + 2 * a.entities
        changed = a.entities // 10
        tmp = tempfile.mkdtemp()
        first, second = os.path.join(tmp, "first.yaml"), os.path.join(tmp, "second.yaml")
        third = os.path.join(tmp, "third.yaml")
        with open(first, "w") as f:
            f.write(manifest(a.entities))
        with open(second, "w") as f:
            f.write(manifest(a.entities, changed))
        with open(third, "w") as f:
            f.write(manifest(a.entities, 0, changed))
        print(f"levels: {levels}; second apply changes {changed} entity levels; endpoint {endpoint}")
        rows = []
        stamp = int(time.time())

        t_ours = f"bench-ours-{stamp}"
        subprocess.run([a.bin, "table", "create", "-n", t_ours, "--endpoint-url", endpoint], check=True, capture_output=True)
        rows.append(("ours", "apply (first)") + ours(a.bin, endpoint, ["limits", "apply", "-q", "-n", t_ours, "-f", first]))
        rows.append(("ours", "plan (no-op)") + ours(a.bin, endpoint, ["limits", "plan", "-q", "-n", t_ours, "-f", first]))
        rows.append(("ours", "plan --no-refresh") + ours(a.bin, endpoint, ["limits", "plan", "-q", "--no-refresh", "-n", t_ours, "-f", first]))
        rows.append(("ours", f"apply ({changed} changed)") + ours(a.bin, endpoint, ["limits", "apply", "-q", "-n", t_ours, "-f", second]))
        # Back to the first manifest: the same number of levels change.
        rows.append(("ours", f"apply --no-refresh ({changed})") + ours(a.bin, endpoint, ["limits", "apply", "-q", "--no-refresh", "-n", t_ours, "-f", first]))
        rows.append(("ours", f"apply ({2 * changed} deleted)") + ours(a.bin, endpoint, ["limits", "apply", "-q", "-n", t_ours, "-f", third]))

        if not a.skip_reference:
            counter = Counter()
            t_ref = f"bench-ref-{stamp}"
            zl.create_table(t_ref)
            ns_id = zl.open_repo(t_ref).namespace_id
            m1, m2, m3 = (yaml.safe_load(open(p)) for p in (first, second, third))
            rows.append(("reference", "apply (first)") + reference(counter, t_ref, ns_id, "apply", m1))
            rows.append(("reference", "plan (no-op)") + reference(counter, t_ref, ns_id, "plan", m1))
            rows.append(("reference", f"apply ({changed} changed)") + reference(counter, t_ref, ns_id, "apply", m2))
            # Back to the first manifest, as ours did, then the deletes.
            reference(counter, t_ref, ns_id, "apply", m1)
            rows.append(("reference", f"apply ({2 * changed} deleted)") + reference(counter, t_ref, ns_id, "apply", m3))

        print(f"{'side':<10} {'step':<28} {'seconds':>9} {'requests':>9}  result")
        for side, step, secs, reqs, summary in rows:
            print(f"{side:<10} {step:<28} {secs:>9.2f} {reqs if reqs is not None else '?':>9}  {json.dumps(summary)}")
    finally:
        if moto_pid:
            os.kill(moto_pid, 15)


if __name__ == "__main__":
    main()
