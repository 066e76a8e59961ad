#!/usr/bin/env bash
# UDP proxy benchmark: 1,200-byte datagrams to a UDP echo (`chaos-bench udp-echo`), directly and through
# `chaos proxy --listen udp://… --upstream udp://…`, measured in turn in one run (medians of interleaved rounds), each
# figure with its ratio to the direct path; then the proxy's memory per flow (N flows held open) as flows per GB.
#
#   Benchmarks/udp-bench.sh [--quick] [--no-build] [--port-base N] [--flows N]
#
# Needs: swift. Listens on 127.0.0.1 ports base+1 and base+2 (UDP).
set -euo pipefail

ROUNDS=3; SECONDS_FLOOD=3; BASE=29500; BUILD=1; FLOWS=5000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) ROUNDS=1; SECONDS_FLOOD=2; FLOWS=1000 ;;
        --no-build) BUILD=0 ;;
        --port-base) BASE="$2"; shift ;;
        --flows) FLOWS="$2"; shift ;;
        -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "udp-bench: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)"
if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
    swift build -c release --product chaos-bench >&2
fi
BIN=$(swift build -c release --show-bin-path)
ECHO=$((BASE + 1)); PROXY=$((BASE + 2))

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$BIN/chaos-bench" udp-echo --port "$ECHO" & pids+=($!)
"$BIN/chaos" proxy --listen "udp://127.0.0.1:$PROXY" --upstream "udp://127.0.0.1:$ECHO" >/dev/null 2>&1 & CHAOS=$!; pids+=($CHAOS)
sleep 1

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
direct=(); proxied=(); directMB=(); proxiedMB=()
for round in $(seq "$ROUNDS"); do
    read -r _ d _ dmb _ _ < <("$BIN/chaos-bench" udp-flood --port "$ECHO" --seconds "$SECONDS_FLOOD")
    read -r _ p _ pmb _ _ < <("$BIN/chaos-bench" udp-flood --port "$PROXY" --seconds "$SECONDS_FLOOD")
    direct+=("$d"); proxied+=("$p"); directMB+=("$dmb"); proxiedMB+=("$pmb")
    echo "round $round: direct $d datagrams/s, chaos $p datagrams/s" >&2
done
d=$(printf '%s\n' "${direct[@]}" | median); p=$(printf '%s\n' "${proxied[@]}" | median)
dmb=$(printf '%s\n' "${directMB[@]}" | median); pmb=$(printf '%s\n' "${proxiedMB[@]}" | median)

rss() { awk '/^VmRSS/ { print $2 * 1024 }' "/proc/$1/status"; }
before=$(rss "$CHAOS")
"$BIN/chaos-bench" udp-flows --port "$PROXY" --count "$FLOWS" --hold 3 > /tmp/udp-bench-flows.$$ & FLOWER=$!; pids+=($FLOWER)
while ! grep -q flows /tmp/udp-bench-flows.$$ 2>/dev/null; do sleep 0.2; done
after=$(rss "$CHAOS")
held=$(awk '{ print $2 }' /tmp/udp-bench-flows.$$)
rm -f /tmp/udp-bench-flows.$$
wait "$FLOWER" 2>/dev/null || true
perFlow=$(( (after - before) / (held > 0 ? held : 1) ))

echo "UDP proxy, 1,200-byte datagrams echoed, 32 in flight (median of $ROUNDS rounds):"
printf '  %-28s %12s %10s %8s\n' "" "datagrams/s" "MB/s" "ratio"
printf '  %-28s %12s %10s %8s\n' "direct" "$d" "$dmb" "1.00"
printf '  %-28s %12s %10s %8s\n' "chaos proxy (udp://)" "$p" "$pmb" "$(awk -v a="$p" -v b="$d" 'BEGIN { printf "%.2f", a / b }')"
echo "  flows held: $held; memory per flow: $perFlow bytes; flows per GB: $(( perFlow > 0 ? 1073741824 / perFlow : 0 ))"
