#!/usr/bin/env bash
# Audit throughput: NDJSON lines (~100-byte messages) echoed through `chaos proxy` (no audit) and
# through `chaos run` with the live audit (lines framing, every message read, written and
# acknowledged by the consumer's TCP, both ways), in turn in one run; prints messages per second
# and the ratio of the audited path to the bare proxy (absolute numbers mean little on a shared
# 2-core machine; ratios do).
#
#   Benchmarks/audit-throughput.sh [--messages N] [--rounds R] [--port-base P] [--chaos PATH] [--no-build]
#
# --chaos runs another build (an earlier commit's binary) for an A/B comparison in the same run.
# Needs: swift, python3. Listens on 127.0.0.1 ports base+1 .. base+3.
set -euo pipefail

MESSAGES=400000
ROUNDS=3
BASE=29200
BUILD=1
CHAOS=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) MESSAGES="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --port-base) BASE="$2"; shift ;;
        --chaos) CHAOS="$2"; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "audit-throughput: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")/.."
if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
    swift build -c release --product chaos-bench >&2
fi
BIN=$(swift build -c release --show-bin-path)
CHAOS=${CHAOS:-$BIN/chaos}
BENCH="$BIN/chaos-bench"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

ECHO_PORT=$((BASE + 1)) PROXY_PORT=$((BASE + 2)) RUN_PORT=$((BASE + 3))
"$BENCH" echo-server --port "$ECHO_PORT" & PIDS+=($!)
"$CHAOS" proxy --listen "127.0.0.1:$PROXY_PORT" --upstream "127.0.0.1:$ECHO_PORT" >"$WORK/proxy.log" 2>&1 & PIDS+=($!)
cat >"$WORK/audit.yaml" <<EOF
name: audit-throughput
duration: 1h
seed: 1
proxies:
  - {name: lines, listen: "127.0.0.1:$RUN_PORT", upstream: "127.0.0.1:$ECHO_PORT"}
protocol:
  framing: lines
  format: json
  seq: seq
  stream: stream
faults: []
EOF
"$CHAOS" run "$WORK/audit.yaml" --out "$WORK/run" >"$WORK/run.log" 2>&1 & RUN_PID=$!; PIDS+=($RUN_PID)
sleep 2

# One client: sends N lines and reads the echo back; prints messages per second (one way).
cat >"$WORK/client.py" <<'EOF'
import socket, sys, threading, time
port, count = int(sys.argv[1]), int(sys.argv[2])
pad = "x" * 48
blob = b"".join(b'{"type":"MSG","stream":"b","seq":%d,"payload":"%s"}\n' % (seq, pad.encode()) for seq in range(1, count + 1))
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
start = time.monotonic()
sender = threading.Thread(target=sock.sendall, args=(blob,))
sender.start()
got = 0
while got < len(blob):
    chunk = sock.recv(1 << 20)
    if not chunk:
        sys.exit("connection closed after %d of %d bytes" % (got, len(blob)))
    got += len(chunk)
elapsed = time.monotonic() - start
sender.join()
sock.close()
print("%.0f" % (count / elapsed))
EOF

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bare=() audited=()
for round in $(seq "$ROUNDS"); do
    bare+=("$(python3 "$WORK/client.py" "$PROXY_PORT" "$MESSAGES")")
    audited+=("$(python3 "$WORK/client.py" "$RUN_PORT" "$MESSAGES")")
done
B=$(printf '%s\n' "${bare[@]}" | median)
A=$(printf '%s\n' "${audited[@]}" | median)
kill -INT "$RUN_PID" 2>/dev/null || true
wait "$RUN_PID" 2>/dev/null || true
delivered=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["delivered"])' "$WORK/run/report.json" 2>/dev/null || echo "?")
echo "audit throughput ($MESSAGES NDJSON messages of ~100 bytes, echoed; medians of $ROUNDS rounds; $CHAOS)"
echo "  chaos proxy (no audit)     $B messages/s each way   rounds: ${bare[*]}"
echo "  chaos run (live audit)     $A messages/s each way   rounds: ${audited[*]}"
awk -v a="$A" -v b="$B" 'BEGIN { printf "  ratio audited / bare:      %.2fx\n", a / b }'
echo "  the audit delivered $delivered messages (expected $((2 * MESSAGES * ROUNDS)): both ways, every round)"
