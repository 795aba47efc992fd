#!/usr/bin/env bash
# `limits validate` (release build) against the reference's own parser
# (`LimitsManifest.from_yaml` in zae-limiter 0.17) on the same generated manifest.
#
# usage: bench/validate-vs-reference.sh [ENTITIES] [RESOURCES]   (default 10000 3)
# needs: the reference venv (scripts/python-env, or ZAEL_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."

entities="${1:-10000}"
resources="${2:-3}"
python="${ZAEL_PYTHON:-$(scripts/python-env)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
manifest="$work/manifest.yaml"

python3 bench/gen_manifest.py "$entities" "$resources" > "$manifest"
echo "manifest: $entities entities x $resources resources, $(wc -c < "$manifest") bytes, $(wc -l < "$manifest") lines"

cargo build --release --quiet --no-default-features --bin zae-limiter
bin="${CARGO_TARGET_DIR:-target}/release/zae-limiter"

# Best of 3 wall-clock runs of each, timed by python3 (no bc needed).
python3 - "$bin" "$python" "$manifest" <<'PY'
import subprocess, sys, time
ours_bin, ref_python, manifest = sys.argv[1:4]
ref_code = (
    "import sys\n"
    "from zae_limiter_provisioner.manifest import LimitsManifest\n"
    "LimitsManifest.from_yaml(open(sys.argv[1]).read())\n"
)

def best_of_3(cmd):
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
        best = t if best is None else min(best, t)
    return best

def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"

# Both sides slow down alike when other work shares the machine; the load
# average shows how busy it was.
load_before = load()
ours = best_of_3([ours_bin, "limits", "validate", manifest])
ref = best_of_3([ref_python, "-c", ref_code, manifest])
print(f"load average (1 min)        : {load_before} before, {load()} after")
print(f"zae-limiter limits validate : {ours:8.3f} s")
print(f"reference from_yaml         : {ref:8.3f} s")
print(f"speed-up                    : {ref / ours:8.1f}x")
PY
