#!/usr/bin/env bash
# Memory soak: does the harness's RSS stay flat on a long run?
#
# Runs Tests/Fixtures/scenarios/soak-rss.yaml (the resilient demo pair at 1,000 messages per second per
# direction, a disconnect every 5-30 s) with the release build for $DURATION, samples the `chaos run`
# process's VmRSS from /proc every $INTERVAL seconds, prints the curve, and compares the largest
# deviation after the first minute with the RSS at one minute against the 5 % target.
# Not part of `make test`.
#
#   DURATION=30m bash Benchmarks/soak-rss.sh          # the acceptance run
#   DURATION=5m INTERVAL=5 bash Benchmarks/soak-rss.sh
#
# Environment: DURATION (30m), INTERVAL (10, seconds), WARMUP (60, seconds), TARGET (5, percent),
# CHAOS (.build/release/chaos, built when missing), LISTEN_PORT / UPSTREAM_PORT (7120 / 7121),
# OUT (a fresh folder under /tmp). Exit 0 when within the target, 1 when not, 2 when the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30m}
INTERVAL=${INTERVAL:-10}
WARMUP=${WARMUP:-60}
TARGET=${TARGET:-5}
CHAOS=${CHAOS:-.build/release/chaos}
LISTEN_PORT=${LISTEN_PORT:-7120}
UPSTREAM_PORT=${UPSTREAM_PORT:-7121}
OUT=${OUT:-$(mktemp -d /tmp/chaos-soak-rss.XXXXXX)}
SCENARIO=Tests/Fixtures/scenarios/soak-rss.yaml

if [ ! -x "$CHAOS" ]; then
  echo "building $CHAOS (swift build -c release --product chaos)" >&2
  swift build -c release --product chaos >&2
fi
mkdir -p "$OUT"
samples="$OUT/rss.tsv"

"$CHAOS" run "$SCENARIO" --duration "$DURATION" --out "$OUT/run" \
  --set "proxies.stream.listen=127.0.0.1:$LISTEN_PORT" --set "proxies.stream.upstream=127.0.0.1:$UPSTREAM_PORT" \
  >"$OUT/chaos.log" 2>&1 &
pid=$!
# Ctrl-C stops the run cleanly (it writes its report), then the curve so far is printed.
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM

echo "soak-rss: $SCENARIO for $DURATION, chaos pid $pid, output in $OUT"
printf 't_s\trss_kib\n' | tee "$samples"
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss" ] || break
  printf '%d\t%d\n' "$(( $(date +%s) - start ))" "$rss" | tee -a "$samples"
  sleep "$INTERVAL"
done
status=0
wait "$pid" || status=$?
trap - INT TERM

echo
echo "chaos run exited with $status; its last lines:"
tail -n 6 "$OUT/chaos.log" | sed 's/^/  /'
if command -v jq >/dev/null && [ -f "$OUT/run/report.json" ]; then
  jq -r '"  report: verdict \(.verdict), \(.totals.ok) ok, \(.totals.lost) lost, \(.totals.redelivered) redelivered, " +
         "\(.connections.opened) connections (\(.connections.cut_by_fault) cut), \(.faults | length) faults, " +
         "elapsed \(.elapsed_s | floor) s"' "$OUT/run/report.json"
fi
echo

# The curve after the warm-up, against the RSS at the end of the warm-up.
awk -v warmup="$WARMUP" -v target="$TARGET" -F'\t' '
  NR == 1 { next }
  { all++; last = $2 }
  $1 >= warmup && base == "" { base = $2; base_t = $1 }
  $1 >= warmup { n++; if ($2 > max) max = $2; if (min == "" || $2 < min) min = $2 }
  END {
    if (n < 2) { printf "too few samples after the %d s warm-up (%d in all): run longer\n", warmup, all; exit 2 }
    up = (max - base) * 100 / base; down = (base - min) * 100 / base
    dev = up > down ? up : down
    printf "RSS at %d s: %.1f MiB; after it: min %.1f MiB, max %.1f MiB, last %.1f MiB (%d samples)\n",
           base_t, base / 1024, min / 1024, max / 1024, last / 1024, n
    printf "max deviation after the first minute: %+.2f%% / -%.2f%% -> %.2f%% (target %s%%): %s\n",
           up, down, dev, target, dev <= target ? "PASS" : "FAIL"
    exit dev <= target ? 0 : 1
  }' "$samples" && verdict=0 || verdict=$?

if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then exit 2; fi
exit "$verdict"
