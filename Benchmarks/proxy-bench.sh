#!/usr/bin/env bash
# Proxy benchmark: the direct loopback path, socat, haproxy (mode tcp), a bare SwiftNIO glue proxy
# (the floor for any NIO proxy: `chaos-bench glue-proxy`) and `chaos proxy` three ways: its default relay
# (`chaos`: epoll threads, splicing bulk bytes), NIO alone (`chaos-nio`: --no-epoll-relay) and the shaped path a soak
# with a link profile takes (`chaos-shaped`: a 0 ms latency toxic both ways, posted on its Toxiproxy API), each in
# front of the same upstreams, measured in turn in one run; every figure is printed with its ratio to the direct path
# (absolute numbers mean little on a shared 2-core machine; ratios do), and each proxy's throughput per CPU-second
# (its process's CPU time over every throughput run).
#
#   Benchmarks/proxy-bench.sh [--quick] [--markdown FILE] [--port-base N] [--idle N] [--no-build] [--baseline CHAOS]
#
# --baseline CHAOS adds another chaos binary (e.g. a release build of the previous commit) as the column
# `chaos-base`, measured in the same run as this checkout's `chaos`: a change's effect without the machine's noise.
#
# Figures: iperf3 bulk throughput over 1 and 8 connections, client->server and server->client, and per CPU-second;
# 64-byte ping-pong round trips p50/p99; connections opened-echoed-closed per second by 50 workers;
# memory per idle connection; and a 1 GiB (64 MiB with --quick) byte-for-byte echo check.
# Throughput, latency and churn are medians of 3 interleaved rounds (1 round with --quick).
# Needs: swift, socat, haproxy, iperf3, jq, ss, curl. Listens on 127.0.0.1 ports base+1 .. base+74.
set -euo pipefail

QUICK=0
MARKDOWN=""
BASE=29000
IDLE=""
BUILD=1
BASELINE=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --markdown) MARKDOWN="$2"; shift ;;
        --port-base) BASE="$2"; shift ;;
        --idle) IDLE="$2"; shift ;;
        --no-build) BUILD=0 ;;
        --baseline) BASELINE="$2"; shift ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "proxy-bench: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

if [[ $QUICK == 1 ]]; then
    SECONDS_IPERF=2; PINGS=5000; CHURN_SECONDS=2; IDLE_DEFAULT=2000; INTEGRITY_BYTES=$((64 << 20)); ROUNDS=1
else
    SECONDS_IPERF=3; PINGS=10000; CHURN_SECONDS=3; IDLE_DEFAULT=9900; INTEGRITY_BYTES=$((1 << 30)); ROUNDS=3
fi
# 9,900 rather than 10,000: a proxied connection costs the proxy two descriptors and the hard
# open-file limit here is 20,000, which the proxy's listeners and event loops also draw on.
IDLE=${IDLE:-$IDLE_DEFAULT}

for tool in socat haproxy iperf3 jq ss swift curl; do
    command -v "$tool" >/dev/null || { echo "proxy-bench: '$tool' is not installed" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)"
if (( $(ulimit -n) < 2 * IDLE + 100 )); then
    echo "proxy-bench: open-file limit $(ulimit -n) is too low for $IDLE idle connections (use --idle)" >&2
    exit 2
fi

if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
    swift build -c release --product chaos-bench >&2
fi
BIN=$(swift build -c release --show-bin-path)
CHAOS="$BIN/chaos"
BENCH="$BIN/chaos-bench"

WORK=$(mktemp -d /tmp/proxy-bench.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        # socat forks a child per connection; stop those too.
        for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill "$child" 2>/dev/null || true; done
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ECHO_PORT=$((BASE + 1));  IPERF_PORT=$((BASE + 2))
declare -A ECHO_AT=([direct]=$ECHO_PORT [socat]=$((BASE + 11)) [haproxy]=$((BASE + 21)) [nio-glue]=$((BASE + 41)) [chaos]=$((BASE + 31))
    [chaos-nio]=$((BASE + 61)) [chaos-shaped]=$((BASE + 71)))
declare -A IPERF_AT=([direct]=$IPERF_PORT [socat]=$((BASE + 12)) [haproxy]=$((BASE + 22)) [nio-glue]=$((BASE + 42)) [chaos]=$((BASE + 32))
    [chaos-nio]=$((BASE + 62)) [chaos-shaped]=$((BASE + 72)))
declare -A MEMORY_PID=() IPERF_PID=()
PATHS=(direct socat haproxy nio-glue chaos chaos-nio chaos-shaped)
if [[ -n $BASELINE ]]; then
    [[ -x $BASELINE ]] || { echo "proxy-bench: --baseline '$BASELINE' is not an executable" >&2; exit 2; }
    ECHO_AT[chaos-base]=$((BASE + 51)); IPERF_AT[chaos-base]=$((BASE + 52))
    PATHS+=(chaos-base)
fi

# start NAME LOGFILE COMMAND...: runs COMMAND in the background and remembers its pid in STARTED.
start() {
    local log="$WORK/$1.log"; shift
    "$@" >"$log" 2>&1 &
    STARTED=$!
    PIDS+=("$STARTED")
}

wait_listening() {
    local port=$1
    for _ in $(seq 1 200); do
        if [[ -n $(ss -Hltn "sport = :$port") ]]; then return 0; fi
        sleep 0.05
    done
    echo "proxy-bench: nothing listens on port $port; logs in $WORK:" >&2
    tail -n 5 "$WORK"/*.log >&2
    exit 1
}

for port in "${ECHO_AT[@]}" "${IPERF_AT[@]}"; do
    if [[ -n $(ss -Hltn "sport = :$port") ]]; then
        echo "proxy-bench: port $port is in use (use --port-base)" >&2
        exit 2
    fi
done

echo "starting upstreams and proxies (ports $BASE+)..." >&2
start echo "$BENCH" echo-server --port "$ECHO_PORT"
MEMORY_PID[direct]=$STARTED
start iperf3-server iperf3 -s -p "$IPERF_PORT"

start socat-echo socat "TCP-LISTEN:${ECHO_AT[socat]},bind=127.0.0.1,fork,reuseaddr,backlog=4096" "TCP:127.0.0.1:$ECHO_PORT"
MEMORY_PID[socat]=$STARTED
start socat-iperf socat "TCP-LISTEN:${IPERF_AT[socat]},bind=127.0.0.1,fork,reuseaddr,backlog=4096" "TCP:127.0.0.1:$IPERF_PORT"
IPERF_PID[socat]=$STARTED

HAPROXY_MAXCONN=$(( ($(ulimit -n) - 100) / 2 ))
cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 2
    maxconn $HAPROXY_MAXCONN
defaults
    mode tcp
    maxconn $HAPROXY_MAXCONN
    timeout connect 10s
    timeout client 1h
    timeout server 1h
frontend echo
    bind 127.0.0.1:${ECHO_AT[haproxy]} backlog 4096
    default_backend echo
frontend iperf
    bind 127.0.0.1:${IPERF_AT[haproxy]} backlog 4096
    default_backend iperf
backend echo
    server echo 127.0.0.1:$ECHO_PORT
backend iperf
    server iperf 127.0.0.1:$IPERF_PORT
EOF
start haproxy haproxy -db -f "$WORK/haproxy.cfg"
MEMORY_PID[haproxy]=$STARTED
IPERF_PID[haproxy]=$STARTED

start glue-echo "$BENCH" glue-proxy --port "${ECHO_AT[nio-glue]}" --upstream-port "$ECHO_PORT"
MEMORY_PID[nio-glue]=$STARTED
start glue-iperf "$BENCH" glue-proxy --port "${IPERF_AT[nio-glue]}" --upstream-port "$IPERF_PORT"
IPERF_PID[nio-glue]=$STARTED

start chaos-echo "$CHAOS" proxy --listen "127.0.0.1:${ECHO_AT[chaos]}" --upstream "127.0.0.1:$ECHO_PORT"
MEMORY_PID[chaos]=$STARTED
start chaos-iperf "$CHAOS" proxy --listen "127.0.0.1:${IPERF_AT[chaos]}" --upstream "127.0.0.1:$IPERF_PORT"
IPERF_PID[chaos]=$STARTED
start nio-echo "$CHAOS" proxy --no-epoll-relay --listen "127.0.0.1:${ECHO_AT[chaos-nio]}" --upstream "127.0.0.1:$ECHO_PORT"
MEMORY_PID[chaos-nio]=$STARTED
start nio-iperf "$CHAOS" proxy --no-epoll-relay --listen "127.0.0.1:${IPERF_AT[chaos-nio]}" --upstream "127.0.0.1:$IPERF_PORT"
IPERF_PID[chaos-nio]=$STARTED
SHAPED_API=( $((BASE + 73)) $((BASE + 74)) )
start shaped-echo "$CHAOS" proxy --api "127.0.0.1:${SHAPED_API[0]}" --listen "127.0.0.1:${ECHO_AT[chaos-shaped]}" --upstream "127.0.0.1:$ECHO_PORT"
MEMORY_PID[chaos-shaped]=$STARTED
start shaped-iperf "$CHAOS" proxy --api "127.0.0.1:${SHAPED_API[1]}" --listen "127.0.0.1:${IPERF_AT[chaos-shaped]}" --upstream "127.0.0.1:$IPERF_PORT"
IPERF_PID[chaos-shaped]=$STARTED
if [[ -n $BASELINE ]]; then
    start base-echo "$BASELINE" proxy --listen "127.0.0.1:${ECHO_AT[chaos-base]}" --upstream "127.0.0.1:$ECHO_PORT"
    MEMORY_PID[chaos-base]=$STARTED
    start base-iperf "$BASELINE" proxy --listen "127.0.0.1:${IPERF_AT[chaos-base]}" --upstream "127.0.0.1:$IPERF_PORT"
    IPERF_PID[chaos-base]=$STARTED
fi

for port in "${ECHO_AT[@]}" "${IPERF_AT[@]}" "${SHAPED_API[@]}"; do wait_listening "$port"; done
# The shaped path: a 0 ms latency toxic each way, as a Toxiproxy client posts it; every connection is then shaped (NIO).
for api in "${SHAPED_API[@]}"; do
    for stream in upstream downstream; do
        curl -fsS -X POST "http://127.0.0.1:$api/proxies/proxy/toxics" \
            -d "{\"name\":\"zero-$stream\",\"type\":\"latency\",\"stream\":\"$stream\",\"attributes\":{\"latency\":0,\"jitter\":0}}" >/dev/null \
            || { echo "proxy-bench: the shaped proxy on :$api refused its toxic" >&2; exit 1; }
    done
done

# ---------------------------------------------------------------------------------------------
declare -A RESULT=()
FIGURES=()
declare -A UNIT=() BETTER=()

figure() { FIGURES+=("$1"); UNIT[$1]=$2; BETTER[$1]=$3; }
# field KEY TEXT: the value of KEY=value in a chaos-bench output line.
field() { { grep -o "$1=[^ ]*" <<<"$2" || true; } | head -1 | cut -d= -f2; }
note() { printf '  %-8s %-34s %s\n' "$1" "$2" "$3" >&2; }

run_bench() { # run_bench LABEL PATH ARGS...: chaos-bench output, or "" on failure (logged)
    local label=$1 path=$2; shift 2
    local out
    if out=$("$BENCH" "$@" 2>"$WORK/last.err"); then
        echo "$out"
    else
        note "$path" "$label" "FAILED: $(tr '\n' ' ' <"$WORK/last.err")"
        echo ""
    fi
}

echo "measuring (idle=$IDLE; $ROUNDS round(s) of iperf ${SECONDS_IPERF}s, churn ${CHURN_SECONDS}s, $PINGS pings)..." >&2

# Idle memory first, while every process is fresh (freed memory from earlier figures would be
# reused by the allocator and hide the cost).
figure idle "KB per idle connection ($IDLE conns)" lower
for path in "${PATHS[@]}"; do
    out=$(run_bench idle "$path" idle --port "${ECHO_AT[$path]}" --count "$IDLE" --pid "${MEMORY_PID[$path]}")
    RESULT[idle,$path]=$(field kb_per_conn "$out")
    note "$path" "idle" "$out"
    sleep 1
done

# Throughput, latency and churn: ROUNDS rounds, each measuring every path in turn, and the median
# of the rounds is kept, so a burst of load from elsewhere on the machine hits one round of one
# path rather than a whole column.
record() { VALUES[$1,$2]="${VALUES[$1,$2]:-} ${3:-}"; }
declare -A VALUES=() TICKS=() BYTES=()
# cpu_ticks PATH: the CPU time (clock ticks, its own and its reaped children's) of PATH's iperf proxy; "" for none.
cpu_ticks() { [[ -n ${IPERF_PID[$1]:-} ]] && awk '{ print $14 + $15 + $16 + $17 }' "/proc/${IPERF_PID[$1]}/stat" 2>/dev/null || true; }
for streams in 1 8; do
    for reverse in "" "-R"; do
        direction=$([[ -z $reverse ]] && echo "client->server" || echo "server->client")
        figure "tput${streams}${reverse}" "Gbit/s, $streams conn$([[ $streams == 8 ]] && echo s), $direction" higher
    done
done
figure p50 "ping-pong p50 (µs, 64 B)" lower
figure p99 "ping-pong p99 (µs, 64 B)" lower
figure churn "connections/s (50 workers)" higher
for round in $(seq 1 "$ROUNDS"); do
    for streams in 1 8; do
        for reverse in "" "-R"; do
            key="tput${streams}${reverse}"
            for path in "${PATHS[@]}"; do
                gbps=""
                before=$(cpu_ticks "$path")
                if json=$(iperf3 -c 127.0.0.1 -p "${IPERF_AT[$path]}" -t "$SECONDS_IPERF" -P "$streams" $reverse -J 2>"$WORK/last.err"); then
                    bps=$(jq -r '.end.sum_received.bits_per_second // empty' <<<"$json")
                    [[ -n $bps ]] && gbps=$(awk -v b="$bps" 'BEGIN { printf "%.2f", b / 1e9 }')
                    bytes=$(jq -r '.end.sum_received.bytes // 0' <<<"$json")
                    if [[ -n $before ]]; then
                        TICKS[$path]=$(( ${TICKS[$path]:-0} + $(cpu_ticks "$path") - before ))
                        BYTES[$path]=$(awk -v a="${BYTES[$path]:-0}" -v b="$bytes" 'BEGIN { printf "%.0f", a + b }')
                    fi
                fi
                record "$key" "$path" "$gbps"
                note "$path" "$key (round $round)" "${gbps:-FAILED} Gbit/s"
            done
        done
    done
    for path in "${PATHS[@]}"; do
        out=$(run_bench pingpong "$path" pingpong --port "${ECHO_AT[$path]}" --count "$PINGS")
        record p50 "$path" "$(field p50_us "$out")"
        record p99 "$path" "$(field p99_us "$out")"
        note "$path" "pingpong (round $round)" "$out"
    done
    for path in "${PATHS[@]}"; do
        out=$(run_bench churn "$path" churn --port "${ECHO_AT[$path]}" --workers 50 --seconds "$CHURN_SECONDS")
        record churn "$path" "$(field conns_per_s "$out")"
        note "$path" "churn (round $round)" "$out"
        sleep 1
    done
done
for key in tput1 tput1-R tput8 tput8-R p50 p99 churn; do
    for path in "${PATHS[@]}"; do
        RESULT[$key,$path]=$(tr ' ' '\n' <<<"${VALUES[$key,$path]:-}" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    done
done

# Throughput per CPU-second: the Gbit each proxy moved in every throughput run over the CPU time it spent on them.
figure percpu "Gbit per CPU-second (all throughput runs)" higher
CLOCK_TICKS=$(getconf CLK_TCK)
for path in "${PATHS[@]}"; do
    [[ -n ${TICKS[$path]:-} && ${TICKS[$path]} -gt 0 ]] || continue
    RESULT[percpu,$path]=$(awk -v b="${BYTES[$path]}" -v t="${TICKS[$path]}" -v hz="$CLOCK_TICKS" 'BEGIN { printf "%.2f", b * 8 / 1e9 / (t / hz) }')
done

figure integrity "MB/s echoing $((INTEGRITY_BYTES >> 20)) MiB, every byte checked" higher
INTEGRITY_OK=1
for path in "${PATHS[@]}"; do
    out=$(run_bench integrity "$path" integrity --port "${ECHO_AT[$path]}" --bytes "$INTEGRITY_BYTES")
    RESULT[integrity,$path]=$(field mb_per_s "$out")
    [[ $(field integrity "$out") == OK ]] || INTEGRITY_OK=0
    note "$path" "integrity" "$out"
done

# ---------------------------------------------------------------------------------------------
cell() { # cell FIGURE PATH: "value (ratio x)"
    local value=${RESULT[$1,$2]:-} direct=${RESULT[$1,direct]:-}
    if [[ -z $value ]]; then [[ $1 == percpu ]] && echo "-" || echo "failed"; return; fi
    if [[ $2 == direct || -z $direct ]]; then echo "$value"; return; fi
    awk -v v="$value" -v d="$direct" 'BEGIN { if (d + 0 == 0) print v; else printf "%s (%.2f×)", v, v / d }'
}

print_table() { # print_table text|markdown
    local format=$1 path
    if [[ $format == markdown ]]; then
        printf '| figure |'; for path in "${PATHS[@]}"; do printf ' %s |' "$path"; done; echo
        printf '|---|'; for path in "${PATHS[@]}"; do printf -- '---:|'; done; echo
    else
        printf '%-48s %12s' figure direct; for path in "${PATHS[@]:1}"; do printf ' %18s' "$path"; done; echo
    fi
    for key in "${FIGURES[@]}"; do
        local row=("${UNIT[$key]}")
        for path in "${PATHS[@]}"; do row+=("$(cell "$key" "$path")"); done
        if [[ $format == markdown ]]; then
            printf '|'; printf ' %s |' "${row[@]}"; echo
        else
            printf '%-48s %12s' "${row[0]}" "${row[1]}"; printf ' %18s' "${row[@]:2}"; echo
        fi
    done
}

compare() { awk -v a="$1" -v b="$2" "BEGIN { exit !(a $3 b) }"; }
verdict() { if [[ -n $2 ]] && eval "$2"; then echo "PASS  $1"; else echo "FAIL  $1"; fi; }

targets() {
    local r=RESULT
    verdict "throughput, 1 conn, both ways >= socat's (chaos ${RESULT[tput1,chaos]:-?}/${RESULT[tput1-R,chaos]:-?} vs socat ${RESULT[tput1,socat]:-?}/${RESULT[tput1-R,socat]:-?} Gbit/s)" \
        'compare "${RESULT[tput1,chaos]:-0}" "${RESULT[tput1,socat]:-0}" ">=" && compare "${RESULT[tput1-R,chaos]:-0}" "${RESULT[tput1-R,socat]:-0}" ">="'
    local added
    added=$(awk -v c="${RESULT[p50,chaos]:-0}" -v d="${RESULT[p50,direct]:-0}" 'BEGIN { printf "%.1f", c - d }')
    verdict "added p50 latency <= 30 µs over direct (chaos adds $added µs)" \
        '[[ -n ${RESULT[p50,chaos]:-} ]] && compare "$added" 30 "<="'
    verdict "<= 20 KB per idle connection (chaos ${RESULT[idle,chaos]:-?} KB)" \
        '[[ -n ${RESULT[idle,chaos]:-} ]] && compare "${RESULT[idle,chaos]}" 20 "<="'
    local ratio
    ratio=$(awk -v c="${RESULT[churn,chaos]:-0}" -v d="${RESULT[churn,direct]:-1}" 'BEGIN { printf "%.2f", c / d }')
    verdict "churn >= 0.6 × direct (chaos ${ratio}×)" 'compare "$ratio" 0.6 ">="'
    verdict "no byte changed over $((INTEGRITY_BYTES >> 20)) MiB through chaos" \
        '[[ -n ${RESULT[integrity,chaos]:-} ]]'
}

echo
echo "proxy benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $([[ $QUICK == 1 ]] && echo quick || echo full) run"
print_table text
echo
echo "chaos targets:"
targets

if [[ -n $MARKDOWN ]]; then
    {
        echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
            "$(uname -sr), $([[ $QUICK == 1 ]] && echo 'quick run' || echo 'full run'): \`Benchmarks/proxy-bench.sh$([[ $QUICK == 1 ]] && echo ' --quick')\`"
        echo
        print_table markdown
        echo
        targets | sed 's/^/    /'
    } >"$MARKDOWN"
    echo "markdown written to $MARKDOWN" >&2
fi

[[ $INTEGRITY_OK == 1 ]]
