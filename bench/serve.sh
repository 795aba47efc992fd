#!/usr/bin/env bash
# `zae-limiter serve` (release build), in two parts:
#  1. decisions per second and latency on the local store, measured by wrk
#     (the Debian package `wrk`; bench/serve-check.lua posts the checks):
#     1 connection, 32 connections on one state item, 32 connections on 32
#     items. Each decision is a consume against a rolling minute and a
#     concurrency limit (bench/serve.yaml): one read and one conditional
#     write of the state item, the level from the config cache.
#  2. store requests per decision on DynamoDB (moto), from the server's own
#     /metrics counters: warm config cache (the default) and --config-ttl 0.
#
# usage: bench/serve.sh [SECONDS]   (per wrk run; default 10)
# Starts and stops its own servers and moto (scripts/moto-server).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-10}"
command -v wrk >/dev/null || { echo "bench/serve.sh needs wrk: apt-get install wrk" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --quiet --bin zae-limiter
bin="$PWD/${CARGO_TARGET_DIR:-target}/release/zae-limiter"
export ZAEL_API_TOKEN="bench-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# serve ARGS...: starts a server, sets $url, waits until it listens.
serve() {
  "$bin" serve --listen 127.0.0.1:0 "$@" >"$work/out" 2>"$work/err" &
  pids+=($!)
  for _ in $(seq 100); do
    if grep -q '^listening on ' "$work/out" 2>/dev/null; then
      url="http://$(sed -n 's/^listening on //p' "$work/out")"
      return
    fi
    sleep 0.1
  done
  cat "$work/err" >&2; exit 1
}

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
echo "== 1. decisions per second, local store (wrk, $secs s each)"
store="--local=$work/local.sqlite -n bench"
# shellcheck disable=SC2086
"$bin" limits apply $store -f bench/serve.yaml >/dev/null
# shellcheck disable=SC2086
serve $store
run() { # LABEL THREADS CONNECTIONS ENTITIES
  echo "-- $1: wrk -t$2 -c$3 -d${secs}s --latency -s bench/serve-check.lua (ENTITIES=$4)"
  ENTITIES=$4 wrk -t"$2" -c"$3" -d"${secs}s" --latency -s bench/serve-check.lua "$url" |
    grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|not 200|requests in|Socket errors'
  echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}
run "1 connection" 1 1 1
run "32 connections, one state item" 2 32 1
run "32 connections, 32 state items" 2 32 32
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

echo
echo "== 2. store requests per decision, DynamoDB (moto)"
read -r moto_pid moto_port < <(scripts/moto-server)
pids+=("$moto_pid")
export AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_REGION=us-east-1
dyn="-n bench-serve --endpoint-url http://127.0.0.1:$moto_port"
# shellcheck disable=SC2086
"$bin" table create $dyn >/dev/null
# shellcheck disable=SC2086
"$bin" limits apply $dyn -f bench/serve.yaml >/dev/null
metric() { curl -s -H "Authorization: Bearer $ZAEL_API_TOKEN" "$url/metrics" | sed -n "s/^zael_store_requests_total{op=\"$1\"} //p"; }
check() {
  curl -s -o /dev/null -H "Authorization: Bearer $ZAEL_API_TOKEN" "$url/v1/checks" \
    -d '{"subject": {"id": "tenant-1"}, "action": "search", "mode": "consume"}'
}
count() { # LABEL SERVE-ARGS...
  local label=$1; shift
  # shellcheck disable=SC2086
  serve $dyn "$@"
  check # warms the cache (when there is one)
  local g0 b0 w0 g1 b1 w1 n=100
  g0=$(metric get); b0=$(metric batch_get); w0=$(metric write)
  for _ in $(seq $n); do check; done
  g1=$(metric get); b1=$(metric batch_get); w1=$(metric write)
  printf '%s: %d decisions: GetItem %d, BatchGetItem %d, PutItem %d => %s requests, %s writes per decision\n' \
    "$label" $n $((g1 - ${g0:-0})) $((b1 - ${b0:-0})) $((w1 - ${w0:-0})) \
    "$(echo "(${g1:-0} - ${g0:-0} + ${b1:-0} - ${b0:-0} + ${w1:-0} - ${w0:-0}) / $n" | bc -l | xargs printf '%.2f')" \
    "$(echo "(${w1:-0} - ${w0:-0}) / $n" | bc -l | xargs printf '%.2f')"
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
}
count "warm config cache (--config-ttl 60s)"
count "no config cache (--config-ttl 0)" --config-ttl 0
