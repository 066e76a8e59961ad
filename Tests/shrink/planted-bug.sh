#!/usr/bin/env bash
# Issue 35's shrink acceptance, measured: the demo pair with a planted, sequence-dependent server bug (a takeover
# from a connection the server has not seen die skips what it wrote there) in a 200 s soak of 100 mixed faults
# (Tests/shrink/planted-soak.yaml) fails; `chaos shrink` must return at most 2 faults in a run of at most 60 s that
# fails at least 8 of 10 final runs (a flaky bug: fails at all, with its measured rate), within the budget.
# Usage: Tests/shrink/planted-bug.sh [RATE] [OUT] [PORT]   RATE: the bug's share of takeovers (1 steady, 0.33 flaky);
# PORT: the proxy's (the server's is the next; default 7020), so that two can run at once.
# Prints one line of figures; exit 0 when the bounds hold. Uses $CHAOS, default .build/debug/chaos (make build first).
set -euo pipefail
cd "$(dirname "$0")/../.."
rate=${1:-1}
out=${2:-Reports/planted-$rate}
port=${3:-7020}
budget=${PLANTED_BUDGET:-15m}
chaos=${CHAOS:-$PWD/.build/debug/chaos}
rm -rf "$out" && mkdir -p "$out"
sed -e "s/--takeover-bug 1 /--takeover-bug $rate /" -e "s/127.0.0.1:7020/127.0.0.1:$port/" \
  -e "s/127.0.0.1:7021/127.0.0.1:$((port + 1))/" Tests/shrink/planted-soak.yaml > "$out/planted-soak.yaml"
soak_start=$(date +%s)
code=0
"$chaos" run "$out/planted-soak.yaml" --out "$out/run" > "$out/run.log" 2>&1 || code=$?
soak_s=$(( $(date +%s) - soak_start ))
if [ "$code" != 1 ]; then
  echo "planted-bug: FAIL: the soak should fail (exit 1), exited $code after ${soak_s}s; see $out/run.log" >&2
  exit 1
fi
shrink_start=$(date +%s)
code=0
"$chaos" shrink "$out/run" --budget "$budget" > "$out/shrink.log" 2>&1 || code=$?
shrink_s=$(( $(date +%s) - shrink_start ))
python3 - "$out" "$rate" "$soak_s" "$shrink_s" "$code" <<'PY'
import json, sys
out, rate, soak_s, shrink_s, code = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
summary = json.load(open(f"{out}/run/shrink/shrink.json"))
report = json.load(open(f"{out}/run/report.json"))
runs = sum(len(t["runs"]) for t in summary["trials"])
figures = (f"soak {report['elapsed_s']:.0f}s, {len(report['faults'])} faults, lost {report['totals']['lost']} ({soak_s}s); "
           f"shrink {shrink_s}s, {len(summary['trials'])} candidates, {runs} runs: {summary['headline']}")
reproducer = summary.get("reproducer")
problems = []
if code != 0 or reproducer is None:
    problems.append(f"no reproducer (chaos shrink exit {code})")
else:
    faults = len(reproducer["occurrences"])
    run_s = 3 + reproducer["span_seconds"] + 8  # the default warm-up and settle
    failures, final = reproducer["failures"], reproducer["runs"]
    if faults > 2: problems.append(f"{faults} faults (at most 2)")
    if run_s > 60: problems.append(f"a {run_s:.0f}s run (at most 60s)")
    if rate >= 1 and failures < 8 * final / 10: problems.append(f"fails {failures} of {final} (at least 8 of 10)")
    if failures == 0: problems.append("the reproducer never failed in its final runs")
    figures += f" | reproducer: occurrences {reproducer['occurrences']}, a {run_s:.0f}s run, fails {failures}/{final}"
print(("planted-bug: FAIL: " + "; ".join(problems) + " | " if problems else "planted-bug: OK: ") + f"rate {rate}: " + figures)
sys.exit(1 if problems else 0)
PY
