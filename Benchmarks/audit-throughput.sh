#!/usr/bin/env bash
# Audit throughput (issue 24): one producer pushes MESSAGES messages of ~SIZE bytes through each path into a sink, in
# one run: the direct loopback path, `chaos proxy` (relay only), and `chaos run` auditing them as NDJSON lines, as
# WebSocket text frames, as gRPC messages, as MQTT QoS 1 PUBLISHes (issue 36) and as Socket.IO events over Engine.IO's
# WebSocket (issue 38). Prints messages per second (medians of ROUNDS interleaved rounds), each path's ratio to the
# direct path, the WebSocket, gRPC, MQTT and Socket.IO audits' ratio to the lines audit, the MQTT audit's ratio to `chaos proxy` relaying the same packets, how long the relay
# waited for the audit (the report's audit_backpressure_s), and checks that each run's report counted every
# message sent and delivered, none lost or duplicated. Absolute numbers mean little on a shared 2-core machine;
# ratios measured in the same run do.
#
#   Benchmarks/audit-throughput.sh [--messages N] [--size BYTES] [--rounds R] [--port-base P] [--chaos PATH]
#                                  [--no-build] [--markdown FILE]
#
# Peers: socat (as a user's own quick test would), the producer `socat FILE!!/dev/null TCP:…` and the sink
# `socat TCP-LISTEN:… ANSWER!!/dev/null`; the sink first writes what the protocol's server says first (a 101 upgrade;
# HTTP/2 SETTINGS and response headers). Timed from the producer's start to the sink's exit (every byte arrived).
# --chaos runs another build (an earlier commit's binary) for an A/B comparison.
# Needs: swift, socat, python3, ss. Listens on 127.0.0.1 ports base+1 .. base+3.
set -euo pipefail

MESSAGES=2000000
SIZE=100
ROUNDS=3
BASE=29200
BUILD=1
CHAOS=""
MARKDOWN=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) MESSAGES="$2"; shift ;;
        --size) SIZE="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --port-base) BASE="$2"; shift ;;
        --chaos) CHAOS="$2"; shift ;;
        --no-build) BUILD=0 ;;
        --markdown) MARKDOWN="$2"; shift ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "audit-throughput: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
for tool in socat python3 ss swift; do
    command -v "$tool" >/dev/null || { echo "audit-throughput: '$tool' is not installed" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
fi
CHAOS=${CHAOS:-$(swift build -c release --show-bin-path)/chaos}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

SINK_PORT=$((BASE + 1)) PROXY_PORT=$((BASE + 2)) RUN_PORT=$((BASE + 3))
echo "writing $MESSAGES messages of ~$SIZE bytes as lines, WebSocket frames and gRPC messages..." >&2
python3 Benchmarks/audit_traffic.py "$WORK" "$MESSAGES" "$SIZE"

wait_listening() {  # PORT: waits (at most 20 s) until something listens on it
    for _ in $(seq 200); do
        ss -ltnH "sport = :$1" | grep -q . && return 0
        sleep 0.1
    done
    echo "audit-throughput: nothing listens on port $1" >&2
    exit 1
}

# One push of FRAMING's traffic to PORT, into a fresh sink; prints messages per second.
push() {  # FRAMING PORT
    socat -t 0 TCP-LISTEN:$SINK_PORT,reuseaddr "OPEN:$WORK/$1.answer,rdonly,ignoreeof!!OPEN:/dev/null,wronly" & local sink=$!
    wait_listening "$SINK_PORT"
    local start end
    start=$(date +%s%N)
    socat "OPEN:$WORK/$1.bin,rdonly!!OPEN:/dev/null,wronly" "TCP:127.0.0.1:$2" & local producer=$!
    wait "$sink"
    end=$(date +%s%N)
    wait "$producer" || true
    echo $(( MESSAGES * 1000000000 / (end - start) ))
}

protocol_yaml() {  # FRAMING
    case "$1" in
        lines) printf '  framing: lines\n  format: json\n  seq: seq\n  stream: stream\n' ;;
        websocket) printf '  framing: websocket\n  format: json\n  seq: seq\n  stream: stream\n' ;;
        grpc) printf '  framing: grpc\n  format: protobuf\n  seq: "1"\n  stream: header:x-session\n' ;;
        mqtt) printf '  framing: mqtt\n  format: json\n  seq: seq\n  stream: topic\n' ;;
        socketio) printf '  framing: socketio\n  format: json\n  seq: 1.seq\n  stream: 1.stream\n' ;;
    esac
}

# One audited push: a fresh `chaos run` of a scenario with one proxy and FRAMING's audit; checks its report.
audited_push() {  # FRAMING ROUND
    local folder="$WORK/run-$1-$2"
    cat >"$WORK/$1.yaml" <<YAML
name: audit-throughput-$1
duration: 1h
seed: 1
proxies:
  - {name: bench, listen: "127.0.0.1:$RUN_PORT", upstream: "127.0.0.1:$SINK_PORT"}
protocol:
$(protocol_yaml "$1")
faults: []
YAML
    "$CHAOS" run "$WORK/$1.yaml" --out "$folder" >"$folder.log" 2>&1 & local run=$!
    wait_listening "$RUN_PORT"
    local rate
    rate=$(push "$1" "$RUN_PORT")
    kill -INT "$run" 2>/dev/null || true
    wait "$run" || true
    python3 - "$folder/report.json" "$MESSAGES" "$1" >>"$WORK/checks" <<'PY' || { echo "audit-throughput: $1 round $2: the report does not count every message (see $folder.log)" >&2; cat "$folder.log" >&2; exit 1; }
import json, sys
report = json.load(open(sys.argv[1]))
totals, expected = report["totals"], int(sys.argv[2])
got = {key: totals.get(key) for key in ("sent", "delivered", "ok", "lost", "duplicated")}
want = {"sent": expected, "delivered": expected, "ok": expected, "lost": 0, "duplicated": 0}
if got != want:
    sys.exit("%s: %s, expected %s" % (sys.argv[3], got, want))
print("%s %.3f" % (sys.argv[3], report.get("audit_backpressure_s", 0)))
PY
    echo "$rate"
}

"$CHAOS" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream "127.0.0.1:$SINK_PORT" >"$WORK/proxy.log" 2>&1 & PIDS+=($!)
wait_listening "$PROXY_PORT"

declare -A rates
for round in $(seq "$ROUNDS"); do
    echo "round $round of $ROUNDS..." >&2
    rates[direct]+="$(push lines "$SINK_PORT") "
    rates[proxy]+="$(push lines "$PROXY_PORT") "
    rates[proxy-mqtt]+="$(push mqtt "$PROXY_PORT") "
    for framing in lines websocket grpc mqtt socketio; do
        rates[direct-$framing]+="$(push "$framing" "$SINK_PORT") "
        rates[run-$framing]+="$(audited_push "$framing" "$round") "
    done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
backpressure() { awk -v f="$1" '$1 == f { if ($2 > m) m = $2 } END { printf "%.2f", m }' "$WORK/checks"; }
D=$(median <<<"${rates[direct]}")
P=$(median <<<"${rates[proxy]}")
L=$(median <<<"${rates[run-lines]}")
{
    echo "audit throughput: $MESSAGES messages of ~$SIZE bytes, one producer, medians of $ROUNDS rounds ($CHAOS)"
    printf '  %-34s %12s  %-14s  %s\n' "path" "messages/s" "ratio" "rounds"
    printf '  %-34s %12s  %-14s  %s\n' "direct (lines)" "$D" "1.00x" "${rates[direct]}"
    printf '  %-34s %12s  %-14s  %s\n' "chaos proxy (no audit)" "$P" "$(awk -v a="$P" -v d="$D" 'BEGIN{printf "%.2fx direct", a/d}')" "${rates[proxy]}"
    PM=$(median <<<"${rates[proxy-mqtt]}")
    printf '  %-34s %12s  %-14s  %s\n' "chaos proxy, MQTT packets" "$PM" "$(awk -v a="$PM" -v d="$(median <<<"${rates[direct-mqtt]}")" 'BEGIN{printf "%.2fx direct", a/d}')" "${rates[proxy-mqtt]}"
    for framing in lines websocket grpc mqtt socketio; do
        R=$(median <<<"${rates[run-$framing]}")
        DF=$(median <<<"${rates[direct-$framing]}")
        ratio=$(awk -v a="$R" -v d="$DF" 'BEGIN{printf "%.2fx direct", a/d}')
        [[ $framing != lines ]] && ratio+=$(awk -v a="$R" -v l="$L" 'BEGIN{printf ", %.2fx lines", a/l}')
        [[ $framing == mqtt ]] && ratio+=$(awk -v a="$R" -v p="$PM" 'BEGIN{printf ", %.2fx proxy (goal >= 0.5x)", a/p}')
        [[ $framing == socketio ]] && ratio+=" (goal >= 0.5x lines)"
        printf '  %-34s %12s  %-14s  %s  (backpressure up to %s s)\n' "chaos run, $framing audit" "$R" "$ratio" "${rates[run-$framing]}" "$(backpressure "$framing")"
    done
    echo "  every audited round's report: sent = delivered = ok = $MESSAGES, lost 0, duplicated 0"
} | tee "$WORK/table"
[[ -n $MARKDOWN ]] && cp "$WORK/table" "$MARKDOWN"
exit 0
