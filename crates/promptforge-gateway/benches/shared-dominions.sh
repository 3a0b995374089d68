#!/usr/bin/env bash
# Dominions shared through Redis, measured in one run (issue 29): the added latency of a
# Redis admission per request against in-process admission, at 1 and 64 connections,
# and the throughput of 1, 2 and 3 replicas sharing one Redis behind an nginx
# round-robin load balancer. Prints a table.
#
#   crates/promptforge-gateway/benches/shared-dominions.sh
#
# Needs nginx (nginx-light), wrk and redis-server. Builds the gateway with
# `cargo build --release` unless GATEWAY_BIN points at a binary. Everything binds
# 127.0.0.1 and is stopped on exit. The dominion's limit (10000) is far above the load,
# so every request is admitted at once: what is measured is the admission round trip
# (one Lua script to acquire, one to release), not queueing.
#
# Knobs (environment): DURATION (seconds per measurement, default 5), ROUNDS (default 3:
# the paths are interleaved round by round and the median round is reported), PIN=1 (wrk
# on core 0, everything else on core 1), NGINX, WRK, REDIS.
set -euo pipefail

NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-/usr/bin/wrk}
REDIS=${REDIS:-$(command -v redis-server || echo /usr/bin/redis-server)}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-0}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)

for tool in "$NGINX" "$WRK" "$REDIS"; do
    [[ -x $tool ]] || { echo "missing $tool (apt-get install nginx-light wrk redis-server)" >&2; exit 2; }
done

if [[ -z ${GATEWAY_BIN:-} ]]; then
    (cd "$ROOT" && cargo build --release -p promptforge-gateway --bin promptforge-gateway >&2)
    GATEWAY_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/promptforge-gateway
fi

WORK=$(mktemp -d /tmp/pf-shared-bench.XXXXXX)
# shellcheck source=bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"
cleanup() {
    stop_children
    rm -rf "$WORK"
    return 0
}
trap cleanup EXIT

UP_PORT=$(free_port)
REDIS_PORT=$(free_port)
LOCAL_PORT=$(free_port)
SHARED_PORTS=("$(free_port)" "$(free_port)" "$(free_port)")
LB_PORTS=("$(free_port)" "$(free_port)" "$(free_port)")

UP_DIR=$(nginx_conf upstream 1 "$(upstream_server "$UP_PORT")")
lb_blocks=""
for n in 1 2 3; do
    servers=""
    for i in $(seq 0 $((n - 1))); do
        servers+="server 127.0.0.1:${SHARED_PORTS[$i]}; "
    done
    lb_blocks+="
    upstream replicas$n { $servers keepalive 128; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:${LB_PORTS[$((n - 1))]};
        location / {
            proxy_pass http://replicas$n;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
done
LB_DIR=$(nginx_conf lb auto "$lb_blocks")

pin 1 "$NGINX" -p "$UP_DIR" -c "$UP_DIR/nginx.conf" -e "$UP_DIR/logs/error.log" &
PIDS+=($!)
pin 1 "$NGINX" -p "$LB_DIR" -c "$LB_DIR/nginx.conf" -e "$LB_DIR/logs/error.log" &
PIDS+=($!)
pin 1 "$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$WORK" >/dev/null 2>&1 &
REDIS_PID=$!
PIDS+=($REDIS_PID)

gateway() { # gateway NAME PORT STORE-TABLE: starts one replica in the background
    mkdir -p "$WORK/$1/profiles"
    cat >"$WORK/$1/gateway.toml" <<TOML
[server]
bind = "127.0.0.1:$2"
api_key = "bench-key"
max_connections = 4096

[[endpoint]]
id = "nginx"
base_url = "http://127.0.0.1:$UP_PORT/v1"
dominion = "pool"

[[model]]
name = "bench"
description = "the nginx upstream"
context = 8192
upstream = "up-bench"
endpoints = ["nginx"]

[[dominion]]
id = "pool"
kind = "remote"
max_concurrency = 10000
$3
TOML
    echo 'include = ["../gateway.toml"]' >"$WORK/$1/profiles/main.toml"
    pin 1 "$GATEWAY_BIN" serve "$WORK/$1/gateway.toml" --profile main \
        >"$WORK/$1/stdout" 2>"$WORK/$1/stderr" &
    PIDS+=($!)
    GW_PID[$1]=$!
}
declare -A GW_PID

wait_port "$UP_PORT"
wait_port "$REDIS_PORT"
gateway local "$LOCAL_PORT" ""
STORE="[dominion_store]
url = \"redis://127.0.0.1:$REDIS_PORT\"
key_prefix = \"bench\""
for i in 0 1 2; do
    gateway "shared$i" "${SHARED_PORTS[$i]}" "$STORE"
done
for port in "$LOCAL_PORT" "${SHARED_PORTS[@]}" "${LB_PORTS[@]}"; do
    wait_port "$port"
done

write_post_lua

check_answers "$LOCAL_PORT" "${SHARED_PORTS[@]}" "${LB_PORTS[@]}"
status=$(curl -sS -H 'Authorization: Bearer bench-key' "http://127.0.0.1:${SHARED_PORTS[0]}/admin/status")
[[ $status == *'"mode":"shared"'* ]] || { echo "replica 1 is not shared: $status" >&2; exit 1; }

declare -A RPS P64 P1 GWCPU RCPU
TICK_US=$((1000000 / $(getconf CLK_TCK)))
PATHS=(local shared lb1 lb2 lb3)
declare -A PORT=([local]=$LOCAL_PORT [shared]=${SHARED_PORTS[0]} [lb1]=${LB_PORTS[0]} [lb2]=${LB_PORTS[1]} [lb3]=${LB_PORTS[2]})
N=${#PATHS[@]}
for path in "${PATHS[@]}"; do
    DURATION=1 run_wrk "${PORT[$path]}" 64 2 >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
    order=("${PATHS[@]:$((round % N))}" "${PATHS[@]:0:$((round % N))}")
    for path in "${order[@]}"; do
        gw_pid=${GW_PID[$([[ $path == local ]] && echo local || echo shared0)]}
        gw_before=$(cpu_ticks "$gw_pid")
        redis_before=$(cpu_ticks "$REDIS_PID")
        read -r rps p64 bad err total < <(run_wrk "${PORT[$path]}" 64 2)
        if [[ $path == local || $path == shared ]]; then
            # CPU per request at 64 connections: the gateway's, and redis-server's.
            GWCPU[$path]+="$(( ($(cpu_ticks "$gw_pid") - gw_before) * TICK_US * 1000 / (total > 0 ? total : 1) )) "
            RCPU[$path]+="$(( ($(cpu_ticks "$REDIS_PID") - redis_before) * TICK_US * 1000 / (total > 0 ? total : 1) )) "
        fi
        [[ $bad == 0 && $err == - ]] || echo "warning: $path at 64 connections: $bad non-2xx, socket errors: $err" >&2
        RPS[$path]+="$rps "
        P64[$path]+="$p64 "
        if [[ $path == local || $path == shared ]]; then
            read -r _ p1 bad _ _ < <(run_wrk "${PORT[$path]}" 1 1)
            [[ $bad == 0 ]] || echo "warning: $path at 1 connection: $bad non-2xx" >&2
            P1[$path]+="$p1 "
        fi
    done
done

python3 - "$ROUNDS" "$DURATION" "$PIN" "${RPS[local]}" "${RPS[shared]}" "${RPS[lb1]}" "${RPS[lb2]}" \
    "${RPS[lb3]}" "${P64[local]}" "${P64[shared]}" "${P1[local]}" "${P1[shared]}" \
    "${GWCPU[local]}" "${GWCPU[shared]}" "${RCPU[local]}" "${RCPU[shared]}" <<'PY'
import statistics, sys
rounds, duration, pin = sys.argv[1:4]
rps = {k: list(map(float, v.split())) for k, v in zip(["local", "shared", "lb1", "lb2", "lb3"], sys.argv[4:9])}
p64 = {k: list(map(float, v.split())) for k, v in zip(["local", "shared"], sys.argv[9:11])}
p1 = {k: list(map(float, v.split())) for k, v in zip(["local", "shared"], sys.argv[11:13])}
gwcpu = {k: list(map(float, v.split())) for k, v in zip(["local", "shared"], sys.argv[13:15])}
rcpu = {k: list(map(float, v.split())) for k, v in zip(["local", "shared"], sys.argv[15:17])}
med = statistics.median
print(f"wrk, {rounds} interleaved rounds x {duration}s per measurement, median round; pinned: {'yes' if pin == '1' else 'no'}")
print()
print("| admission | req/s at 64 conns | p50 at 64 conns (ms) | p50 at 1 conn (ms) | gateway CPU per request (us) | redis-server CPU per request (us) | rounds (req/s) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, key in [("in-process (no store)", "local"), ("Redis (`[dominion_store]`)", "shared")]:
    print(f"| {name} | {med(rps[key]):.0f} | {med(p64[key]):.3f} | {med(p1[key]):.3f} | {med(gwcpu[key]) / 1000:.1f} | {med(rcpu[key]) / 1000:.1f} | {' '.join(f'{x:.0f}' for x in rps[key])} |")
print()
print(f"added by Redis admission: p50 {med(p1['shared']) - med(p1['local']):+.3f} ms at 1 connection, "
      f"{med(p64['shared']) - med(p64['local']):+.3f} ms at 64; throughput at 64 connections "
      f"{med(rps['shared']) / med(rps['local']):.2f}x of in-process")
print()
print("| replicas behind nginx round-robin | req/s at 64 conns | vs 1 replica | rounds (req/s) |")
print("| --- | --- | --- | --- |")
for n in (1, 2, 3):
    r = rps[f"lb{n}"]
    print(f"| {n} | {med(r):.0f} | {med(r) / med(rps['lb1']):.2f} | {' '.join(f'{x:.0f}' for x in r)} |")
PY
