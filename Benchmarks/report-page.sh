#!/usr/bin/env bash
# report.html at a fleet's size: its bytes, and how long headless Chromium takes to open it (parse, the page's script,
# the first page of rows), for 1,000, 10,000 and 100,000 stream-directions.
#
#   Benchmarks/report-page.sh [--no-build] [--counts "1000 10000 100000"]
#
# The reports are a short quickstart run's report.json with its streams replaced by N synthetic ones (one in 997
# with losses). Two figures per size: the page's own clock at its load event (performance.now(), best of 3), and
# Chromium's whole run (start, load, dump, exit) less the same for an empty page. Needs Debian's `chromium`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
counts="1000 10000 100000"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) build=0 ;;
    --counts) counts="$2"; shift ;;
    *) echo "report-page: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
browser="$(command -v chromium || command -v chromium-browser || true)"
[[ -n "$browser" ]] || { echo "report-page: chromium is not installed (make deps, or apt-get install -y chromium)" >&2; exit 2; }
[[ $build = 0 ]] || swift build --product chaos -debug-info-format none >/dev/null
chaos=.build/debug/chaos

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$chaos" run Scenarios/quickstart.yaml --duration 5s --out "$work/base" >/dev/null 2>&1 || true
[[ -f "$work/base/report.json" ]] || { echo "report-page: the quickstart run wrote no report.json" >&2; exit 1; }

# Seconds for Chromium to open $1 and dump its DOM (best of 3), and the page's own clock at load (ms, best of 3).
open_page() {
  local page=$1 best=999 clock=999999
  for _ in 1 2 3; do
    local profile start end dom
    profile="$(mktemp -d)"
    start=$(date +%s.%N)
    dom=$("$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$profile" --dump-dom "file://$page" 2>/dev/null)
    end=$(date +%s.%N)
    rm -rf "$profile"
    best=$(echo "if ($end - $start < $best) $end - $start else $best" | bc)
    local loaded
    loaded=$(printf '%s' "$dom" | sed -n 's/.*<title>loaded \([0-9]*\)<\/title>.*/\1/p' | head -n 1)
    [[ -z "$loaded" ]] || [[ "$loaded" -ge "$clock" ]] || clock=$loaded
  done
  echo "$best $clock"
}

# The page's load time, as its own clock says: a copy of the page whose title becomes "loaded MS" at its load event.
stamp() {
  sed 's|</body></html>|<script>addEventListener("load",function(){setTimeout(function(){document.title="loaded "+Math.round(performance.now())},0)})</script></body></html>|' "$1" >"$2"
}

printf '<!DOCTYPE html><html><head><title>x</title></head><body></body></html>\n' >"$work/empty.html"
read -r empty _ <<<"$(open_page "$work/empty.html")"
printf '%-10s %12s %14s %16s\n' streams "html (KB)" "page load (ms)" "chromium (s, net)"
for n in $counts; do
  mkdir -p "$work/n$n"
  python3 - "$work/base/report.json" "$work/n$n/report.json" "$n" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
template = dict(report["streams"][0]) if report["streams"] else {}
streams = []
for index in range(int(sys.argv[3])):
    row = dict(template)
    lost = index % 7 + 1 if index % 997 == 13 else 0
    row.update(stream=f"device-{index}", direction="upstream" if index % 2 == 0 else "downstream", sent=100,
               delivered=100 - lost, ok=100 - lost, lost=lost, duplicated=0, redelivered=0, reordered=0, gaps=0,
               delivery_ratio=(100 - lost) / 100)
    streams.append(row)
report["streams"] = streams
json.dump(report, open(sys.argv[2], "w"))
PY
  "$chaos" report "$work/n$n" --format html >"$work/n$n/report.html"
  stamp "$work/n$n/report.html" "$work/n$n/stamped.html"
  read -r seconds clock <<<"$(open_page "$work/n$n/stamped.html")"
  printf '%-10s %12d %14s %16.2f\n' "$n" $(($(stat -c %s "$work/n$n/report.html") / 1024)) "$clock" "$(echo "$seconds - $empty" | bc)"
done
