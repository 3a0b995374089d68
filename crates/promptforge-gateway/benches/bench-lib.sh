# Helpers the gateway's shell benchmarks share (sourced, not run): free loopback ports,
# core pinning, throwaway nginx configurations, waiting for a port, one wrk measurement,
# a process's CPU time. The caller sets WORK (a temp dir), WRK, DURATION and PIN, and
# writes its wrk script to $WORK/post.lua.

# The chat completion every benchmark's nginx upstream answers.
REPLY='{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"up-bench","choices":[{"index":0,"message":{"role":"assistant","content":"The capital of France is Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}'

# The background processes to stop on exit (stop_children kills and reaps them).
PIDS=()
stop_children() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pin() { # pin CORE CMD...: run CMD pinned to CORE when PIN=1
    local core=$1
    shift
    # exec: a backgrounded `pin` is then the process itself, so its $! is what cleanup kills.
    if [[ $PIN == 1 ]]; then exec taskset -c "$core" "$@"; else exec "$@"; fi
}

nginx_conf() { # nginx_conf NAME WORKERS HTTP-BLOCK-BODY -> the config's directory
    local dir=$WORK/$1
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<NGINX
daemon off;
master_process on;
worker_processes $2;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    $3
}
NGINX
    echo "$dir"
}

upstream_server() { # upstream_server PORT -> the server block answering $REPLY
    echo "
    server {
        listen 127.0.0.1:$1;
        client_body_buffer_size 64k;
        location /v1/chat/completions {
            default_type application/json;
            return 200 '$REPLY';
        }
    }"
}

wait_port() {
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "nothing listens on $1" >&2
    cat "$WORK"/*/logs/error.log "$WORK"/*/stderr >&2 || true
    exit 1
}

# cpu_ticks PID -> the process's user + system time so far, in clock ticks
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# run_wrk PORT CONNECTIONS THREADS -> "rps p50_ms non2xx errors requests"
run_wrk() {
    local out
    out=$(pin 0 "$WRK" -t"$3" -c"$2" -d"${DURATION}s" --latency -s "$WORK/post.lua" \
        "http://127.0.0.1:$1/v1/chat/completions")
    python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
m = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
errors = re.search(r"Socket errors:.*", out)
total = int(re.search(r"(\d+) requests in", out).group(1))
print(f"{rps:.0f} {float(m.group(1)) * scale:.4f} {bad.group(1) if bad else 0} {'E' if errors else '-'} {total}")
PY
}

# write_post_lua: the wrk script posting one chat request for model `bench` with the
# bench key, to $WORK/post.lua.
write_post_lua() {
    cat >"$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"What is the capital of France?"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench-key"
LUA
}

# check_answers PORT...: every path must answer 200 with the reply before anything is
# measured.
check_answers() {
    local port body
    for port in "$@"; do
        body=$(curl -sS -f -X POST "http://127.0.0.1:$port/v1/chat/completions" \
            -H 'Authorization: Bearer bench-key' -H 'Content-Type: application/json' \
            -d '{"model":"bench","messages":[{"role":"user","content":"hi"}]}')
        [[ $body == *"capital of France"* ]] || { echo "port $port answered: $body" >&2; exit 1; }
    done
}
