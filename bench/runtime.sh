#!/usr/bin/env bash
# The runtime's speed (release build), in three parts:
#  1. decisions per second on the local store through the library, from 1 and
#     8 processes (benches/runtime.rs);
#  2. `zae-limiter acquire` processes per second on the local store, one after
#     another and from 8 shells at once (what a shell job pays per check);
#  3. requests per decision on DynamoDB (moto), from ZAEL_REQUEST_STATS=1: each
#     command reads the namespace and version records (one BatchGetItem), the
#     level's config items and the state item (one BatchGetItem), and writes
#     the state once when it counts something; then 8 processes at once on one
#     state item (conditional writes racing: the losers read and write again).
#
# usage: bench/runtime.sh [SECONDS]   (per library row; default 3)
# Starts and stops its own moto server (scripts/moto-server).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-3}"
work="$(mktemp -d)"
moto_pid=
cleanup() {
  [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 1. library decisions per second (cargo bench --bench runtime -- $secs)"
cargo bench --quiet --bench runtime -- "$secs"

cargo build --release --quiet --bin zae-limiter
bin="$PWD/${CARGO_TARGET_DIR:-target}/release/zae-limiter"

echo
echo "== 2. acquire processes per second, local store"
store="--local=$work/local.sqlite -n demo"
# shellcheck disable=SC2086
"$bin" limits apply $store -f fixtures/runtime/jobs.yaml >/dev/null
loop() { # N ENTITY: N consumes of 0 rows, one process each
  local i
  for ((i = 0; i < $1; i++)); do
    # shellcheck disable=SC2086
    "$bin" acquire "$2" -r exports --cost rows_per_hour=0 --cost exports_per_minute=0 $store >/dev/null
  done
}
start=$(date +%s.%N); loop 300 serial; end=$(date +%s.%N)
echo "1 shell, 300 processes:    $(echo "300 / ($end - $start)" | bc -l | xargs printf '%.0f') acquires/s"
start=$(date +%s.%N)
for s in $(seq 8); do loop 100 shared & done
wait
end=$(date +%s.%N)
echo "8 shells, 800 processes, one state item: $(echo "800 / ($end - $start)" | bc -l | xargs printf '%.0f') acquires/s"

echo
echo "== 3. requests per command on DynamoDB (moto)"
read -r moto_pid port < <(scripts/moto-server)
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 \
  AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_ENDPOINT_URL ZAEL_LOCAL_STORE
ddb="-n bench-runtime --endpoint-url http://127.0.0.1:$port"
# shellcheck disable=SC2086
"$bin" table create $ddb >/dev/null
# shellcheck disable=SC2086
"$bin" limits apply $ddb -f fixtures/runtime/jobs.yaml >/dev/null
count() { # LABEL COMMAND...: requests and writes from ZAEL_REQUEST_STATS
  local out requests writes
  out=$(ZAEL_REQUEST_STATS=1 "${@:2}" 2>&1 >/dev/null || true)
  requests=$(sed -n 's/^zae-limiter: \([0-9]*\) DynamoDB requests$/\1/p' <<<"$out")
  writes=$(sed -n 's/^zae-limiter:   write: \([0-9]*\) calls.*/\1/p' <<<"$out")
  printf '%-44s %8s %7s\n' "$1" "${requests:-?}" "${writes:-0}"
}
printf '%-44s %8s %7s\n' command requests writes
# shellcheck disable=SC2086
{
count "acquire (consume, uncontended)" "$bin" acquire a -r exports $ddb
count "acquire --mode preview" "$bin" acquire a -r exports --mode preview $ddb
id=$("$bin" acquire a -r exports --mode reserve $ddb 2>/dev/null)
count "acquire --mode reserve" "$bin" acquire a -r exports --mode reserve $ddb
count "acquire --mode reserve (third slot)" "$bin" acquire a -r exports --mode reserve $ddb
count "acquire --mode reserve (refused: 3 held)" "$bin" acquire a -r exports --mode reserve $ddb
count "reservation extend" "$bin" reservation extend "$id" --ttl 10m $ddb
count "reservation commit --cost" "$bin" reservation commit "$id" --cost rows_per_hour=100 $ddb
count "reservation release (already committed)" "$bin" reservation release "$id" $ddb
}
# 8 processes at once on one state item.
for s in $(seq 8); do
  # shellcheck disable=SC2086
  ( ZAEL_REQUEST_STATS=1 "$bin" acquire b -r exports --cost exports_per_minute=0 $ddb 2>"$work/race.$s" >/dev/null || true ) &
done
wait
total=$(cat "$work"/race.* | sed -n 's/^zae-limiter: \([0-9]*\) DynamoDB requests$/\1/p' | paste -sd+ | bc)
writes=$(cat "$work"/race.* | sed -n 's/^zae-limiter:   write: \([0-9]*\) calls.*/\1/p' | paste -sd+ | bc)
echo "8 acquires at once on one item: $total requests, $writes writes ($(echo "$writes / 8" | bc -l | xargs printf '%.2f') writes per decision)"
