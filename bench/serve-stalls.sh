#!/usr/bin/env bash
# Looks for rare stalls of `zae-limiter serve` on the local store: RUNS short
# wrk runs of 32 connections on 32 state items (bench/serve.yaml,
# bench/serve-check.lua), a fresh server and store file each run. One line a
# run: p99 and slowest request (wrk), decisions/s, the host's steal time over
# the run (ticks of 10 ms in /proc/stat, all CPUs), the server's event-loop
# lag histogram (wakes up to 10 / 25 / 50 ms late, and all), and any line the
# server logged about a late wake or a slow restart of its log
# (docs/serve.md#speed tells how to read them).
#
# usage: bench/serve-stalls.sh [RUNS] [SECONDS]   (defaults 30 and 6)
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-30}"
secs="${2:-6}"
command -v wrk >/dev/null || { echo "bench/serve-stalls.sh needs wrk: apt-get install wrk" >&2; exit 1; }
cargo build --release --quiet --bin zae-limiter
bin="$PWD/${CARGO_TARGET_DIR:-target}/release/zae-limiter"
export ZAEL_API_TOKEN="bench-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
steal() { awk '/^cpu / {print $9}' /proc/stat; }

pid=""
work=""
# The server and the run's files go however the script ends.
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ -n "$work" ]; then rm -rf "$work"; fi
  pid=""
  work=""
}
trap cleanup EXIT

for i in $(seq "$runs"); do
  work="$(mktemp -d)"
  "$bin" limits apply --local="$work/l.sqlite" -n bench -f bench/serve.yaml >/dev/null
  "$bin" serve --listen 127.0.0.1:0 --local="$work/l.sqlite" -n bench >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do grep -q '^listening on ' "$work/out" 2>/dev/null && break; sleep 0.1; done
  addr="$(sed -n 's/^listening on //p' "$work/out")"
  if [ -z "$addr" ]; then
    echo "run $i: the server did not start:" >&2
    cat "$work/err" >&2
    exit 1
  fi
  url="http://$addr"
  before=$(steal)
  ENTITIES=32 wrk -t2 -c32 -d"${secs}s" --latency -s bench/serve-check.lua "$url" >"$work/wrk"
  after=$(steal)
  lag=$(curl -s -H "Authorization: Bearer $ZAEL_API_TOKEN" "$url/metrics" |
    sed -n 's/^zael_event_loop_lag_seconds_bucket{le="\(0.01\|0.025\|0.05\|+Inf\)"} \(.*\)/\1=\2/p' | tr '\n' ' ')
  printf '%s run %d: p99 %s max %s %s/s steal %d lag[ %s] %s\n' "$(date -u +%H:%M:%S)" "$i" \
    "$(awk '$1=="99%" {print $2}' "$work/wrk")" \
    "$(awk '/Latency/ && !/Distribution/ {print $4}' "$work/wrk")" \
    "$(awk '/Requests\/sec/ {print $2}' "$work/wrk")" \
    $((after - before)) "$lag" \
    "$(grep -E 'held up|restart' "$work/err" | sed 's/^zae-limiter serve: //' | tr '\n' ' ' || true)"
  cleanup
done
