#!/usr/bin/env bash
# Offline audit throughput (issue 24): MB/s of `chaos audit` on a large capture of a pair carrying NDJSON lines (what
# tcpdump on an Ethernet link holds: 16 connections, both ends sending, delayed ACKs, paced at 1 Gbit/s), with
# segments of an Ethernet MTU (1448 bytes of payload) and small ones (200 bytes), next to a bare libpcap read loop
# (pcap_next_ex touching each packet) and `tshark -q -z io,stat,0` on the same file, in the same run. Medians of
# ROUNDS; every chaos audit must count every message written ok, none lost or duplicated, or the benchmark stops.
# Absolute numbers mean little on a shared 2-core machine; ratios measured in the same run do.
#
#   Benchmarks/offline-audit.sh [--megabytes N] [--rounds R] [--chaos PATH] [--no-build] [--markdown FILE]
#
# Needs: swift, python3, cc and libpcap-dev, tshark.
set -euo pipefail

MEGABYTES=300
ROUNDS=3
BUILD=1
CHAOS=""
MARKDOWN=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --megabytes) MEGABYTES="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --chaos) CHAOS="$2"; shift ;;
        --no-build) BUILD=0 ;;
        --markdown) MARKDOWN="$2"; shift ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "offline-audit: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
for tool in python3 cc tshark swift; do
    command -v "$tool" >/dev/null || { echo "offline-audit: '$tool' is not installed" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
if [[ $BUILD == 1 ]]; then
    echo "building (release)..." >&2
    swift build -c release --product chaos >&2
fi
CHAOS=${CHAOS:-$(swift build -c release --show-bin-path)/chaos}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/loop.c" <<'C'
#include <pcap/pcap.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char error[PCAP_ERRBUF_SIZE];
    pcap_t *handle = pcap_open_offline(argv[1], error);
    if (!handle) { fprintf(stderr, "%s\n", error); return 1; }
    struct pcap_pkthdr *header; const u_char *data; unsigned long sum = 0, packets = 0;
    while (pcap_next_ex(handle, &header, &data) == 1) { sum += data[header->caplen - 1]; packets++; }
    printf("%lu %lu\n", packets, sum);
    return 0;
}
C
cc -O2 -o "$WORK/loop" "$WORK/loop.c" -lpcap

cat >"$WORK/scenario.yaml" <<'YAML'
name: offline-audit
duration: 1h
seed: 1
proxies:
  - {name: bench, listen: "127.0.0.1:29403", upstream: "127.0.0.1:7000"}
protocol:
  framing: lines
  format: json
  seq: seq
  stream: stream
faults: []
YAML

seconds() {  # COMMAND...: prints the wall seconds it took
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    awk -v n=$((end - start)) 'BEGIN { printf "%.3f", n / 1e9 }'
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }

{
echo "offline audit throughput: ${MEGABYTES} MB captures of NDJSON lines, medians of $ROUNDS rounds ($CHAOS)"
printf '  %-22s %-26s %10s %12s  %s\n' "capture" "reader" "MB/s" "ratio" "seconds per round"
} | tee "$WORK/table"
for segment in 1448 200; do
    capture="$WORK/capture-$segment.pcap"
    echo "writing the capture with $segment-byte segments..." >&2
    messages=$(python3 Benchmarks/offline_capture.py "$capture" "$MEGABYTES" "$segment" | awk '/^messages/ {print $2}')
    size=$(stat -c %s "$capture")
    declare -A times=()
    for round in $(seq "$ROUNDS"); do
        echo "  round $round of $ROUNDS..." >&2
        times[loop]+="$(seconds "$WORK/loop" "$capture") "
        times[tshark]+="$(seconds tshark -q -r "$capture" -z io,stat,0) "
        rm -rf "$WORK/report"
        times[chaos]+="$(seconds "$CHAOS" audit "$capture" --protocol-from "$WORK/scenario.yaml" --out "$WORK/report") "
        python3 - "$WORK/report/report.json" "$messages" <<'PY' || { echo "offline-audit: the audit did not count every message" >&2; exit 1; }
import json, sys
totals, expected = json.load(open(sys.argv[1]))["totals"], int(sys.argv[2])
got = {key: totals.get(key) for key in ("sent", "delivered", "ok", "lost", "duplicated")}
want = {"sent": expected, "delivered": expected, "ok": expected, "lost": 0, "duplicated": 0}
if got != want:
    sys.exit("%s, expected %s" % (got, want))
PY
    done
    T=$(median <<<"${times[tshark]}")
    L=$(median <<<"${times[loop]}")
    C=$(median <<<"${times[chaos]}")
    label="$((size / 1000000)) MB, $segment B segments"
    {
    printf '  %-22s %-26s %10s %12s  %s\n' "$label" "libpcap loop" "$(rate "$size" "$L")" "" "${times[loop]}"
    printf '  %-22s %-26s %10s %12s  %s\n' "" "tshark -z io,stat,0" "$(rate "$size" "$T")" "" "${times[tshark]}"
    printf '  %-22s %-26s %10s %12s  %s\n' "" "chaos audit (lines)" "$(rate "$size" "$C")" \
        "$(awk -v t="$T" -v c="$C" 'BEGIN { printf "%.2fx tshark", t / c }')" "${times[chaos]}"
    echo "  ($messages messages in all, both ways; every one counted ok in every round)"
    } | tee -a "$WORK/table"
    rm -f "$capture"
done
[[ -n $MARKDOWN ]] && cp "$WORK/table" "$MARKDOWN"
exit 0
