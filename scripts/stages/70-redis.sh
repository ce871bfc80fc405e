#!/usr/bin/env bash
# The Redis backend against real servers: a standalone redis-server and a
# 3-node Redis Cluster on loopback, free ports, started and stopped here.
# Runs cellrate-redis's server tests and cellrate-tower's tests on Redis
# (the gateway example's among them), and stops every server on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server redis-tools
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A loopback port with nothing listening on it, nor on port + 10000 (the
# cluster bus). Each server is up before the next port is chosen.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        if ! in_use "$p" && ! in_use $((p + 10000)); then
            echo "$p"
            return
        fi
    done
}

wait_ping() {
    for _ in $(seq 1 100); do
        if redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; then
            return 0
        fi
        sleep 0.1
    done
    echo "redis-server on port $1 did not start" >&2
    exit 1
}

start_server() { # port dir [extra args...]
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no \
        --daemonize no "$@" >"$dir/log" 2>&1 &
    pids+=("$!")
    wait_ping "$port"
}

port=$(free_port)
start_server "$port" "$work/standalone"
export CELLRATE_REDIS_URL="redis://127.0.0.1:$port/"

nodes=()
urls=()
for i in 1 2 3; do
    p=$(free_port)
    start_server "$p" "$work/node$i" --cluster-enabled yes \
        --cluster-config-file "$work/node$i/nodes.conf" --cluster-node-timeout 2000
    nodes+=("127.0.0.1:$p")
    urls+=("redis://127.0.0.1:$p/")
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$work/create.log"
for _ in $(seq 1 100); do
    ok=0
    for n in "${nodes[@]}"; do
        if redis-cli -h 127.0.0.1 -p "${n#*:}" cluster info | grep -q 'cluster_state:ok'; then
            ok=$((ok + 1))
        fi
    done
    [ "$ok" -eq 3 ] && break
    sleep 0.1
done
[ "$ok" -eq 3 ] || { echo "cluster did not become ok" >&2; cat "$work/create.log" >&2; exit 1; }
CELLRATE_REDIS_CLUSTER=$(IFS=,; echo "${urls[*]}")
export CELLRATE_REDIS_CLUSTER
CELLRATE_REDIS_SERVER=$(command -v redis-server)
export CELLRATE_REDIS_SERVER
echo "standalone $CELLRATE_REDIS_URL; cluster $CELLRATE_REDIS_CLUSTER"

# The tests that need a server are `#[ignore]`d (plain `cargo test` reports
# them as ignored, never as passed); here they run with `--include-ignored`,
# against the servers above. `counted` fails the stage unless each named
# test binary ran at least MIN tests and ignored none: a test that returned
# early, or a filter that matched nothing, cannot pass unnoticed.
counted() { # log binary min
    awk -v bin="$2" -v min="$3" '
        /^ *Running / { current = ($2 == bin) }
        current && /^test result:/ {
            for (i = 1; i <= NF; i++) {
                if ($(i + 1) ~ /^passed/) passed += $i
                if ($(i + 1) ~ /^ignored/) ignored += $i
            }
            seen = 1; current = 0
        }
        END {
            if (!seen) { print "FAIL: no test result for " bin; exit 1 }
            printf "%s: %d passed, %d ignored\n", bin, passed, ignored
            if (passed < min || ignored > 0) {
                print "FAIL: " bin " must run at least " min " tests and ignore none"; exit 1
            }
        }' "$1"
}

cargo clippy -p cellrate-redis --all-targets --features metrics -- -D warnings
# (`--include-ignored` is for the test binaries only: the doc tests' ignored
# blocks are programs that need a server.)
cargo test -p cellrate-redis --lib --tests -- --include-ignored 2>&1 | tee "$work/test.log"
counted "$work/test.log" tests/redis.rs 25
counted "$work/test.log" tests/redis_algorithms.rs 11
counted "$work/test.log" tests/redis_reconfigure.rs 7
# The tower layer on both Redis clients through an outage (tests/tower_redis.rs),
# the gateway example on Redis (tests/gateway.rs) and a layer configured onto
# Redis (tests/tower_config.rs; `serde` on in the same build), a window
# tier and a scoped tier's override configured onto Redis
# (tests/tower_config_rules.rs), and the admin endpoint masking a Redis
# URL's password (tests/admin.rs).
cargo clippy -p cellrate-tower --all-targets --features redis,axum,tracing,serde -- -D warnings
cargo build -p cellrate-tower --features redis,axum,tracing,serde --example gateway
cargo test -p cellrate-tower --features redis,axum,tracing,serde --test tower_redis --test gateway \
    --test tower_config --test tower_config_rules --test tower_redis_reload --test admin \
    -- --include-ignored 2>&1 | tee "$work/tower.log"
cargo test -p cellrate-tower --features redis,axum,tracing,serde --doc -- config
counted "$work/tower.log" tests/tower_redis.rs 4
counted "$work/tower.log" tests/gateway.rs 5
counted "$work/tower.log" tests/tower_config.rs 5
counted "$work/tower.log" tests/tower_config_rules.rs 7
counted "$work/tower.log" tests/tower_redis_reload.rs 4
counted "$work/tower.log" tests/admin.rs 10
