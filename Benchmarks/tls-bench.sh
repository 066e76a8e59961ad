#!/usr/bin/env bash
# TLS benchmark: the same TLS client and server (Benchmarks/tls_bench_peer.py, Python's ssl module over
# OpenSSL) on three paths measured in turn in one run: direct, through `chaos proxy` intercepting TLS
# (its leaf from its own CA, TLS again to the server, verified against the server's CA), and through
# mitmproxy doing the same (mitmdump --mode reverse:tls://…). Every figure is printed with its ratio to
# the direct path and the chaos/mitmproxy ratio (absolute numbers mean little on a shared 2-core machine;
# ratios measured in the same run do).
#
#   Benchmarks/tls-bench.sh [--quick] [--markdown FILE] [--port-base N] [--idle N] [--workers N]
#                           [--no-build] [--chaos BIN] [--no-mitmproxy]
#
# --no-build takes .build/release/chaos as it is; --chaos BIN measures that binary instead (no build).
#
# Figures: one-connection throughput client->server in MB/s (10^6 bytes; 64 KiB writes for N seconds, the
# clock stopping when the server has counted every byte); new TLS connections per second (8 worker
# processes; each connection a full handshake, no resumption, then a 16-byte echo and close); KB of the
# proxy's RSS per idle TLS connection (1,000; 300 with --quick) that finished its handshake and one echo.
# Throughput and connections/s are medians of 3 interleaved rounds (1 round with --quick), the order of
# the paths rotating between rounds. Goals: chaos >= 0.5x direct throughput and >= 0.4x direct
# connections/s; a missed goal is printed, not an exit status (that is 1 only when something failed to run).
# Read the ratios knowing that a proxy decrypts and re-encrypts every byte and makes two handshakes per
# connection on the same 2 cores the endpoints use: were the endpoints as cheap as the proxy, even a
# proxy with no cost but its crypto would land near 0.5x of the direct path.
# Needs: python3 with trustme, ss; mitmproxy (pip-installed when missing). Listens on 127.0.0.1 ports base+1 .. base+3.
set -euo pipefail

QUICK=0
MARKDOWN=""
BASE=29500
IDLE=""
WORKERS=8
BUILD=1
CHAOS=""
MITM=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --markdown) MARKDOWN="$2"; shift ;;
        --port-base) BASE="$2"; shift ;;
        --idle) IDLE="$2"; shift ;;
        --workers) WORKERS="$2"; shift ;;
        --no-build) BUILD=0 ;;
        --chaos) CHAOS="$2"; BUILD=0; shift ;;
        --no-mitmproxy) MITM=0 ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tls-bench: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

if [[ $QUICK == 1 ]]; then
    TPUT_SECONDS=2; CHURN_SECONDS=2; IDLE_DEFAULT=300; ROUNDS=1
else
    TPUT_SECONDS=3; CHURN_SECONDS=3; IDLE_DEFAULT=1000; ROUNDS=3
fi
IDLE=${IDLE:-$IDLE_DEFAULT}

for tool in python3 ss; do
    command -v "$tool" >/dev/null || { echo "tls-bench: '$tool' is not installed" >&2; exit 2; }
done
python3 -c 'import trustme' 2>/dev/null || { echo "tls-bench: python3 cannot import trustme (pip install trustme)" >&2; exit 2; }
if [[ $MITM == 1 ]] && ! command -v mitmdump >/dev/null; then
    echo "installing mitmproxy (pip)..." >&2
    python3 -m pip install -q mitmproxy >&2 || python3 -m pip install -q --break-system-packages mitmproxy >&2
    hash -r
    command -v mitmdump >/dev/null || { echo "tls-bench: mitmdump is not on PATH after pip install (use --no-mitmproxy)" >&2; exit 2; }
fi

cd "$(dirname "$0")/.."
PEER="$PWD/Benchmarks/tls_bench_peer.py"
ulimit -n "$(ulimit -Hn)"
if (( $(ulimit -n) < 2 * IDLE + 100 )); then
    echo "tls-bench: open-file limit $(ulimit -n) is too low for $IDLE idle connections (use --idle)" >&2
    exit 2
fi

if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
    CHAOS="$(swift build -c release --show-bin-path)/chaos"
fi
# --no-build reads the release build where it is, without asking SwiftPM (which would wait on the lock
# of a build running in this checkout).
CHAOS=${CHAOS:-.build/release/chaos}
[[ -x $CHAOS ]] || { echo "tls-bench: no chaos binary at '$CHAOS' (build it, or drop --no-build)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/tls-bench.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVER_PORT=$((BASE + 1))
declare -A PORT_AT=([direct]=$SERVER_PORT [chaos]=$((BASE + 2)) [mitmproxy]=$((BASE + 3)))
declare -A CA_FOR=([direct]="$WORK/certs/ca.pem" [chaos]="$WORK/chaos-ca.pem" [mitmproxy]="$WORK/mitmproxy/mitmproxy-ca-cert.pem")
PATHS=(direct chaos)
[[ $MITM == 1 ]] && PATHS+=(mitmproxy)

# start NAME COMMAND...: runs COMMAND in the background (output to $WORK/NAME.log) and remembers its pid.
start() {
    local log="$WORK/$1.log"; shift
    "$@" >"$log" 2>&1 &
    PIDS+=("$!")
}

# listener_pid PORT: the pid of the process listening on PORT (waiting up to 30 s for it), whatever
# wrapper (a pyenv shim, env) started it; that process's RSS is the one measured.
listener_pid() {
    local port=$1 pid
    for _ in $(seq 1 600); do
        pid=$(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
        if [[ -n $pid ]]; then echo "$pid"; return 0; fi
        sleep 0.05
    done
    echo "tls-bench: nothing listens on port $port; logs in $WORK:" >&2
    tail -n 5 "$WORK"/*.log >&2
    return 1
}

for path in "${PATHS[@]}"; do
    if [[ -n $(ss -Hltn "sport = :${PORT_AT[$path]}") ]]; then
        echo "tls-bench: port ${PORT_AT[$path]} is in use (use --port-base)" >&2
        exit 2
    fi
done

echo "starting the TLS server and the proxies (ports $BASE+)..." >&2
python3 "$PEER" certs "$WORK/certs"
start server python3 "$PEER" server --port "$SERVER_PORT" --dir "$WORK/certs"

export CHAOS_HOME="$WORK/chaos-home"
"$CHAOS" ca --export "$WORK/chaos-ca.pem" >"$WORK/chaos-ca.log" 2>&1 || {
    echo "tls-bench: '$CHAOS ca --export' failed:" >&2; cat "$WORK/chaos-ca.log" >&2; exit 1; }
start chaos "$CHAOS" proxy --listen "127.0.0.1:${PORT_AT[chaos]}" --upstream "127.0.0.1:$SERVER_PORT" \
    --tls-upstream "$WORK/certs/ca.pem" --tls-server-name localhost

if [[ $MITM == 1 ]]; then
    # mitmproxy keeps every TCP message of a live flow in flow.messages: gigabytes in a throughput run.
    # This addon drops each message once relayed (mitmdump shows and saves nothing here anyway).
    mkdir -p "$WORK/mitmproxy"
    cat >"$WORK/mitmproxy/forget.py" <<'EOF'
def tcp_message(flow):
    flow.messages.clear()
EOF
    # reverse:tls:// terminates the client's TLS with a leaf from mitmproxy's CA (made in confdir on
    # start) and opens TLS to the server, verified against the server's CA as chaos does.
    start mitmproxy mitmdump --mode "reverse:tls://127.0.0.1:$SERVER_PORT@127.0.0.1:${PORT_AT[mitmproxy]}" \
        --set confdir="$WORK/mitmproxy" --set ssl_verify_upstream_trusted_ca="$WORK/certs/ca.pem" \
        -s "$WORK/mitmproxy/forget.py" -q
fi

declare -A MEMORY_PID=()
for path in "${PATHS[@]}"; do MEMORY_PID[$path]=$(listener_pid "${PORT_AT[$path]}"); done
[[ -s ${CA_FOR[mitmproxy]} || $MITM == 0 ]] || { echo "tls-bench: mitmproxy made no CA in $WORK/mitmproxy" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
declare -A RESULT=() VALUES=() NEGOTIATED=()
FAILED=0
field() { { grep -o "$1=[^ ]*" <<<"$2" || true; } | head -1 | cut -d= -f2; }
note() { printf '  %-10s %-26s %s\n' "$1" "$2" "$3" >&2; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# client LIMIT LABEL PATH SUBCOMMAND ARGS...: the peer's output line, or "" on failure (noted, and the run fails).
client() {
    local limit=$1 label=$2 path=$3; shift 3
    local out
    if out=$(timeout "$limit" python3 "$PEER" "$@" --port "${PORT_AT[$path]}" --ca "${CA_FOR[$path]}" 2>"$WORK/last.err"); then
        note "$path" "$label" "$out"
        echo "$out"
    else
        note "$path" "$label" "FAILED: $(tail -n 3 "$WORK/last.err" | tr '\n' ' ')"
        echo "FAILED" >>"$WORK/failures"
        echo ""
    fi
}

echo "measuring ($ROUNDS round(s) of throughput ${TPUT_SECONDS}s and connections ${CHURN_SECONDS}s with $WORKERS workers; $IDLE idle)..." >&2

# Idle memory first, while every process is fresh (memory freed after the other figures would be
# reused by the allocator and hide the cost). The direct path has no proxy to weigh.
for path in "${PATHS[@]:1}"; do
    out=$(client 600 idle "$path" idle --count "$IDLE" --pid "${MEMORY_PID[$path]}")
    RESULT[idle,$path]=$(field kb_per_conn "$out")
    sleep 1
done

for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order each round, so that no path always runs first (or right after another's load).
    order=("${PATHS[@]:$(( (round - 1) % ${#PATHS[@]} ))}" "${PATHS[@]:0:$(( (round - 1) % ${#PATHS[@]} ))}")
    for path in "${order[@]}"; do
        out=$(client $((TPUT_SECONDS + 120)) "tput (round $round)" "$path" tput --seconds "$TPUT_SECONDS")
        VALUES[tput,$path]="${VALUES[tput,$path]:-} $(field mb_per_s "$out")"
        NEGOTIATED[$path]=$(field tls "$out")
        sleep 1
    done
    for path in "${order[@]}"; do
        out=$(client $((CHURN_SECONDS + 120)) "conns/s (round $round)" "$path" churn --seconds "$CHURN_SECONDS" --workers "$WORKERS")
        VALUES[churn,$path]="${VALUES[churn,$path]:-} $(field conns_per_s "$out")"
        sleep 1
    done
done
for key in tput churn; do
    for path in "${PATHS[@]}"; do RESULT[$key,$path]=$(median "${VALUES[$key,$path]:-}"); done
done
[[ -e $WORK/failures ]] && FAILED=1

# ---------------------------------------------------------------------------------------------
FIGURES=(tput churn idle)
declare -A UNIT=(
    [tput]="MB/s, 1 conn, client->server"
    [churn]="new TLS conns/s ($WORKERS workers)"
    [idle]="KB per idle TLS conn ($IDLE conns)"
)
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.2f", a / b }'; }
cell() { # cell FIGURE PATH: "value (ratio× direct)"
    local value=${RESULT[$1,$2]:-} direct=${RESULT[$1,direct]:-} r
    if [[ $1 == idle && $2 == direct ]]; then echo "-"; return; fi
    if [[ -z $value ]]; then echo "failed"; return; fi
    r=$(ratio "$value" "$direct")
    if [[ $2 == direct || -z $r ]]; then echo "$value"; else echo "$value (${r}×)"; fi
}
versus() { # versus FIGURE: chaos / mitmproxy
    local r; r=$(ratio "${RESULT[$1,chaos]:-}" "${RESULT[$1,mitmproxy]:-}")
    [[ -n $r ]] && echo "${r}×" || echo "-"
}

print_table() { # print_table text|markdown
    local format=$1 key path row
    local head=(figure "${PATHS[@]}")
    [[ $MITM == 1 ]] && head+=(chaos/mitmproxy)
    if [[ $format == markdown ]]; then
        printf '|'; printf ' %s |' "${head[@]}"; echo
        printf '|---|'; for _ in "${head[@]:1}"; do printf -- '---:|'; done; echo
    else
        printf '%-38s' "${head[0]}"; printf ' %16s' "${head[@]:1}"; echo
    fi
    for key in "${FIGURES[@]}"; do
        row=("${UNIT[$key]}")
        for path in "${PATHS[@]}"; do row+=("$(cell "$key" "$path")"); done
        [[ $MITM == 1 ]] && row+=("$(versus "$key")")
        if [[ $format == markdown ]]; then
            printf '|'; printf ' %s |' "${row[@]}"; echo
        else
            printf '%-38s' "${row[0]}"; printf ' %16s' "${row[@]:1}"; echo
        fi
    done
}

goal() { # goal FIGURE MINIMUM TEXT
    local r; r=$(ratio "${RESULT[$1,chaos]:-}" "${RESULT[$1,direct]:-}")
    if [[ -z $r ]]; then echo "not measured  $3 >= ${2}× direct"
    elif awk -v r="$r" -v m="$2" 'BEGIN { exit !(r >= m) }'; then echo "goal met      $3 >= ${2}× direct (chaos ${r}×)"
    else echo "goal missed   $3 >= ${2}× direct (chaos ${r}×)"; fi
}
goals() {
    goal tput 0.5 "throughput through chaos"
    goal churn 0.4 "new TLS connections/s through chaos"
}

echo
echo "TLS benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $([[ $QUICK == 1 ]] && echo quick || echo full) run ($ROUNDS round(s))"
print_table text
echo "(TLS as the client saw it: $(for path in "${PATHS[@]}"; do printf '%s %s; ' "$path" "${NEGOTIATED[$path]:-?}"; done | sed 's/; $//'))"
echo
goals

if [[ -n $MARKDOWN ]]; then
    {
        echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
            "$(uname -sr), $([[ $QUICK == 1 ]] && echo 'quick run' || echo 'full run'), mitmproxy $([[ $MITM == 1 ]] && mitmdump --version 2>/dev/null | awk '/^Mitmproxy:/ { print $2 }' || echo 'not run'):" \
            "\`Benchmarks/tls-bench.sh$([[ $QUICK == 1 ]] && echo ' --quick')\`"
        echo
        print_table markdown
        echo
        goals | sed 's/^/    /'
    } >"$MARKDOWN"
    echo "markdown written to $MARKDOWN" >&2
fi

[[ $FAILED == 0 ]]
