#!/usr/bin/env bash
# `limits validate` (release build) against the reference's own parser
# (`LimitsManifest.from_yaml` in zae-limiter 0.17) on the same generated manifest.
#
# usage: bench/validate-vs-reference.sh [--flow | --both] [ENTITIES] [RESOURCES]
#   (default 10000 3, block style)
#   --flow  the manifest in flow style (bench/gen_manifest.py --flow)
#   --both  block style, then flow style, in one run
# needs: the reference venv (scripts/python-env, or ZAEL_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."

styles=(block)
case "${1:-}" in
  --flow) styles=(flow); shift ;;
  --both) styles=(block flow); shift ;;
  -*) echo "usage: $0 [--flow | --both] [ENTITIES] [RESOURCES]" >&2; exit 2 ;;
esac
entities="${1:-10000}"
resources="${2:-3}"
python="${ZAEL_PYTHON:-$(scripts/python-env)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# `-p`: xtask depends on zae-limiter with default features; selecting only this
# package keeps the SDK out.
cargo build --release --quiet -p zae-limiter --no-default-features --bin zae-limiter
bin="${CARGO_TARGET_DIR:-target}/release/zae-limiter"

manifests=()
for style in "${styles[@]}"; do
  manifest="$work/$style.yaml"
  flag=()
  [[ "$style" == flow ]] && flag=(--flow)
  python3 bench/gen_manifest.py "${flag[@]}" "$entities" "$resources" > "$manifest"
  manifests+=("$style=$manifest")
done

# Three rounds, each 4 runs of ours then 1 of the reference, so both sample the
# same stretch of machine load; the best of each is reported. Wall-clock time
# is what a user waits; CPU time (user + system, ours counting both of its
# threads) hardly moves when other work shares the machine, so its ratio is the
# steadier figure under load. Timed by python3 (no bc needed).
python3 - "$bin" "$python" "$entities" "$resources" "${manifests[@]}" <<'PY'
import os, resource, subprocess, sys, time
ours_bin, ref_python, entities, resources = sys.argv[1:5]
ref_code = (
    "import sys\n"
    "from zae_limiter_provisioner.manifest import LimitsManifest\n"
    "LimitsManifest.from_yaml(open(sys.argv[1]).read())\n"
)

def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def run(cmd, best):
    """One run of `cmd`; `best` keeps the lowest (wall, cpu) seen."""
    t0, c0 = time.perf_counter(), cpu()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall, used = time.perf_counter() - t0, cpu() - c0
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    best[0], best[1] = min(best[0], wall), min(best[1], used)

def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"

for arg in sys.argv[5:]:
    style, manifest = arg.split("=", 1)
    lines = sum(1 for _ in open(manifest, "rb"))
    print(f"manifest ({style} style): {entities} entities x {resources} resources, "
          f"{os.path.getsize(manifest)} bytes, {lines} lines")
    load_before = load()
    ours, ref = [float("inf")] * 2, [float("inf")] * 2
    for _ in range(3):
        for _ in range(4):
            run([ours_bin, "limits", "validate", manifest], ours)
        run([ref_python, "-c", ref_code, manifest], ref)
    print(f"load average (1 min)        : {load_before} before, {load()} after")
    print(f"zae-limiter limits validate : {ours[0]:8.3f} s wall {ours[1]:8.3f} s CPU  (best of 12)")
    print(f"reference from_yaml         : {ref[0]:8.3f} s wall {ref[1]:8.3f} s CPU  (best of 3)")
    print(f"speed-up                    : {ref[0] / ours[0]:8.1f}x wall {ref[1] / ours[1]:7.1f}x CPU")
PY
