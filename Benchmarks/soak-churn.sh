#!/usr/bin/env bash
# Accelerated soak: at least 50,000 reconnect cycles (Tests/Fixtures/scenarios/soak-churn.yaml: 20 resilient
# clients, a disconnect every 50-300 ms, live audit and capture ring on) with the release build. Samples the
# `chaos run` process's RSS and open descriptors at the start (after WARMUP s), the middle and the end, and
# prints lost, duplicated, the reconnect cycles (connections opened), the flatness of RSS and descriptors
# (target: within 5 %) and the wall time. Not part of `make test`.
#
#   bash Benchmarks/soak-churn.sh                 # DURATION=8m
#   DURATION=2m bash Benchmarks/soak-churn.sh     # a shorter look
#
# Environment: DURATION (8m), WARMUP (90, seconds: past the audit's 60 s grace for closed connections), CHAOS (.build/release/chaos, built when missing),
# OUT (a fresh folder under /tmp). Exit 0 when lost and duplicated are 0 and both curves are flat, else 1.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-8m}
WARMUP=${WARMUP:-90}
CHAOS=${CHAOS:-.build/release/chaos}
OUT=${OUT:-$(mktemp -d /tmp/chaos-soak-churn.XXXXXX)}
if [ ! -x "$CHAOS" ]; then swift build -c release --product chaos >&2; fi
ulimit -n "$(ulimit -Hn)"

started=$(date +%s)
"$CHAOS" run Tests/Fixtures/scenarios/soak-churn.yaml --duration "$DURATION" --out "$OUT/run" >"$OUT/chaos.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
sample() { printf '%s\t%s\t%s\n' "$1" "$(awk '/^VmRSS:/ { print $2 }' /proc/$pid/status)" "$(ls /proc/$pid/fd | wc -l)"; }
seconds=$(awk -v d="$DURATION" 'BEGIN { n = d + 0; u = substr(d, length(d)); print (u == "m" ? n * 60 : u == "h" ? n * 3600 : n) }')
printf 'when\trss_kib\tfds\n'
sleep "$WARMUP"; start=$(sample start); echo "$start"
sleep $(( (seconds - WARMUP) / 2 )); middle=$(sample middle); echo "$middle"
sleep $(( (seconds - WARMUP) / 2 - 5 )); end=$(sample end); echo "$end"
status=0
wait "$pid" || status=$?
wall=$(( $(date +%s) - started ))
echo "chaos run exited with $status after ${wall}s wall time"
jq -r '"verdict \(.verdict): \(.totals.ok) ok, \(.totals.lost) lost, \(.totals.duplicated) duplicated, \(.totals.redelivered) redelivered; " +
       "\(.connections.opened) connections opened (reconnect cycles), \(.connections.cut_by_fault) cut by \(.faults | length) faults"' \
  "$OUT/run/report.json"
flat=$(printf '%s\n%s\n%s\n' "$start" "$middle" "$end" | awk -F'\t' '
  NR == 1 { r0 = $2; f0 = $3 } { r = $2; f = $3 }
  { dr = (r - r0) / r0 * 100; df = (f - f0) / f0 * 100; if (dr > mr) mr = dr; if (-dr > mr) mr = -dr; if (df > mf) mf = df; if (-df > mf) mf = -df }
  END { printf "RSS within %.1f %% of the start, descriptors within %.1f %% (target 5 %%)\n", mr, mf; exit (mr <= 5 && mf <= 5) ? 0 : 1 }') && ok=1 || ok=0
echo "$flat"
cycles=$(jq '.connections.opened' "$OUT/run/report.json")
echo "reconnect cycles: $cycles (target >= 50000)"
[ "$ok" = 1 ] && [ "$(jq '.totals.lost + .totals.duplicated' "$OUT/run/report.json")" = 0 ] && [ "$cycles" -ge 50000 ]
