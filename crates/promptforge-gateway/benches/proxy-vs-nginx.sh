#!/usr/bin/env bash
# Side by side, in one run: wrk straight to an nginx upstream, through a bare nginx
# reverse proxy, and through the release promptforge-gateway (metrics on, as always),
# at 64 connections (requests/s) and at 1 connection (p50 latency). Prints a table.
#
#   crates/promptforge-gateway/benches/proxy-vs-nginx.sh
#
# Needs nginx (nginx-light) and wrk. Builds the gateway with `cargo build --release`
# unless GATEWAY_BIN points at a binary. Everything binds 127.0.0.1; the nginx
# processes run in the foreground as children of this script (own prefix and temp
# config under a temp dir) and, like the gateway, are stopped on exit.
#
# Knobs (environment): DURATION (seconds per measurement, default 5), ROUNDS (default
# 3: the paths are interleaved round by round and the median round is reported),
# PIN=1 (pin wrk to core 0 and the upstream, proxy and gateway to core 1), NGINX,
# WRK, PERF=1 (record `perf record -g` of the gateway during its first 64-connection
# measurement into $OUT/perf.data, OUT defaulting to the temp dir, kept when set),
# BASELINE_BIN (a second gateway binary, e.g. a build from before a change, measured
# as a fourth path in the same interleaved rounds: before/after in one run).
#
# Besides requests/s and p50, the table gives each gateway's CPU time per request at 64
# connections (its user + system time over the measurement, from /proc, divided by the
# requests wrk completed): on a machine shared with other work, requests/s follows
# whatever else runs, while the CPU a request costs the gateway does not.
set -euo pipefail

NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-/usr/bin/wrk}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-0}
PERF=${PERF:-0}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)

for tool in "$NGINX" "$WRK"; do
    [[ -x $tool ]] || { echo "missing $tool (apt-get install nginx-light wrk)" >&2; exit 2; }
done

if [[ -z ${GATEWAY_BIN:-} ]]; then
    (cd "$ROOT" && cargo build --release -p promptforge-gateway --bin promptforge-gateway >&2)
    GATEWAY_BIN=$ROOT/target/release/promptforge-gateway
fi

WORK=$(mktemp -d /tmp/pf-proxy-bench.XXXXXX)
OUT=${OUT:-$WORK}
# shellcheck source=bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"
cleanup() {
    stop_children
    [[ $OUT == "$WORK" && $PERF == 0 ]] && rm -rf "$WORK"
    return 0
}
trap cleanup EXIT
UP_PORT=$(free_port)
PROXY_PORT=$(free_port)
GW_PORT=$(free_port)
BASE_PORT=$(free_port)

UP_DIR=$(nginx_conf upstream 1 "$(upstream_server "$UP_PORT")")
PROXY_DIR=$(nginx_conf proxy auto "
    upstream backend {
        server 127.0.0.1:$UP_PORT;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$PROXY_PORT;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering on;
        }
    }")

pin 1 "$NGINX" -p "$UP_DIR" -c "$UP_DIR/nginx.conf" -e "$UP_DIR/logs/error.log" &
PIDS+=($!)
pin 1 "$NGINX" -p "$PROXY_DIR" -c "$PROXY_DIR/nginx.conf" -e "$PROXY_DIR/logs/error.log" &
PIDS+=($!)

mkdir -p "$WORK/gw/profiles"
cat >"$WORK/gw/gateway.toml" <<EOF
[server]
bind = "127.0.0.1:$GW_PORT"
api_key = "bench-key"
max_connections = 4096

[[endpoint]]
id = "nginx"
base_url = "http://127.0.0.1:$UP_PORT/v1"

[[model]]
name = "bench"
description = "the nginx upstream"
context = 8192
upstream = "up-bench"
endpoints = ["nginx"]
EOF
echo 'include = ["../gateway.toml"]' >"$WORK/gw/profiles/main.toml"
pin 1 "$GATEWAY_BIN" serve "$WORK/gw/gateway.toml" --profile main >"$WORK/gw/stdout" 2>"$WORK/gw/stderr" &
GW_PID=$!
PIDS+=($GW_PID)
if [[ -n ${BASELINE_BIN:-} ]]; then
    mkdir -p "$WORK/base/profiles"
    sed "s/127.0.0.1:$GW_PORT/127.0.0.1:$BASE_PORT/" "$WORK/gw/gateway.toml" >"$WORK/base/gateway.toml"
    cp "$WORK/gw/profiles/main.toml" "$WORK/base/profiles/main.toml"
    pin 1 "$BASELINE_BIN" serve "$WORK/base/gateway.toml" --profile main >"$WORK/base/stdout" 2>"$WORK/base/stderr" &
    BASE_PID=$!
    PIDS+=($BASE_PID)
fi

wait_port "$UP_PORT"
wait_port "$PROXY_PORT"
wait_port "$GW_PORT"
[[ -z ${BASELINE_BIN:-} ]] || wait_port "$BASE_PORT"

write_post_lua

check_answers "$UP_PORT" "$PROXY_PORT" "$GW_PORT" ${BASELINE_BIN:+"$BASE_PORT"}

TICK_US=$((1000000 / $(getconf CLK_TCK)))

declare -A RPS P50 CPU
PATHS=(direct nginx gateway)
declare -A PORT=([direct]=$UP_PORT [nginx]=$PROXY_PORT [gateway]=$GW_PORT [baseline]=$BASE_PORT)
declare -A PID=([gateway]=$GW_PID [baseline]=${BASE_PID:-})
[[ -z ${BASELINE_BIN:-} ]] || PATHS+=(baseline)
N=${#PATHS[@]}
# Warm-up: every path, 1 s at 64 connections.
for path in "${PATHS[@]}"; do
    DURATION=1 run_wrk "${PORT[$path]}" 64 2 >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order every round so drifting background load hits every path alike.
    order=("${PATHS[@]:$((round % N))}" "${PATHS[@]:0:$((round % N))}")
    for path in "${order[@]}"; do
        perf_pid=
        if [[ $PERF == 1 && $round == 1 && $path == gateway ]]; then
            mkdir -p "$OUT"
            timeout -s INT "$DURATION" perf record -g -F 999 -p "$GW_PID" -o "$OUT/perf.data" \
                >"$OUT/perf.log" 2>&1 &
            perf_pid=$!
        fi
        pid=${PID[$path]:-}
        [[ -z $pid ]] || before=$(cpu_ticks "$pid")
        read -r rps _ bad err total < <(run_wrk "${PORT[$path]}" 64 2)
        if [[ -n $pid ]]; then
            after=$(cpu_ticks "$pid")
            CPU[$path]+="$(( (after - before) * TICK_US * 1000 / (total > 0 ? total : 1) )) "
        fi
        if [[ -n $perf_pid ]]; then wait "$perf_pid" || true; fi
        [[ $bad == 0 && $err == - ]] || echo "warning: $path at 64 connections: $bad non-2xx, socket errors: $err" >&2
        RPS[$path]+="$rps "
        read -r _ p50 bad err < <(run_wrk "${PORT[$path]}" 1 1)
        [[ $bad == 0 ]] || echo "warning: $path at 1 connection: $bad non-2xx" >&2
        P50[$path]+="$p50 "
    done
done

python3 - "$ROUNDS" "$DURATION" "$PIN" "${RPS[direct]}" "${RPS[nginx]}" "${RPS[gateway]}" \
    "${P50[direct]}" "${P50[nginx]}" "${P50[gateway]}" "${CPU[gateway]}" \
    ${BASELINE_BIN:+"${RPS[baseline]}" "${P50[baseline]}" "${CPU[baseline]}"} <<'EOF'
import statistics, sys
rounds, duration, pin = sys.argv[1:4]
rps = [list(map(float, a.split())) for a in sys.argv[4:7]]
p50 = [list(map(float, a.split())) for a in sys.argv[7:10]]
cpu = [None, None, list(map(float, sys.argv[10].split()))]
names = ["direct to nginx upstream", "through nginx reverse proxy", "through promptforge-gateway"]
if len(sys.argv) > 11:
    rps.append(list(map(float, sys.argv[11].split())))
    p50.append(list(map(float, sys.argv[12].split())))
    cpu.append(list(map(float, sys.argv[13].split())))
    names.append("through the baseline gateway (BASELINE_BIN)")
med = lambda xs: statistics.median(xs)
d_rps, d_p50 = med(rps[0]), med(p50[0])
print(f"wrk, {rounds} interleaved rounds x {duration}s per measurement, median round; pinned: {'yes' if pin == '1' else 'no'}")
print()
print("| path | req/s at 64 conns | ratio to direct | p50 at 1 conn (ms) | added p50 (ms) | CPU per request (us) | rounds (req/s) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, r, p, c in zip(names, rps, p50, cpu):
    cost = f"{med(c) / 1000:.1f}" if c else "-"
    print(f"| {name} | {med(r):.0f} | {med(r) / d_rps:.2f} | {med(p):.3f} | {med(p) - d_p50:+.3f} | {cost} | {' '.join(f'{x:.0f}' for x in r)} |")
print()
print(f"gateway / nginx proxy throughput at 64 connections: {med(rps[2]) / med(rps[1]):.2f} (goal >= 0.80)")
print(f"gateway added p50 at 1 connection: {med(p50[2]) - d_p50:.3f} ms (goal <= 0.040), nginx proxy: {med(p50[1]) - d_p50:.3f} ms")
if len(rps) > 3:
    print(f"gateway / baseline gateway throughput: {med(rps[2]) / med(rps[3]):.2f}; added p50 {med(p50[2]) - d_p50:.3f} vs {med(p50[3]) - d_p50:.3f} ms")
    print(f"gateway / baseline CPU per request: {med(cpu[2]) / med(cpu[3]):.2f} ({med(cpu[2]) / 1000:.1f} vs {med(cpu[3]) / 1000:.1f} us)")
EOF
