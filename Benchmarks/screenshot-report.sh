#!/usr/bin/env bash
# Renders a run's report.html in headless Chromium and saves a PNG of the timeline.
#
#   Benchmarks/screenshot-report.sh [RUN_DIR] [OUT.png]
#
# Without RUN_DIR it builds a sample run (the "Sample run" test of ChaosReportTests: a quickstart-like
# 90 s run with a naive client) and renders that. Needs Debian's `chromium` (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
run_dir="${1:-}"
out="${2:-docs/report-timeline.png}"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "screenshot-report: chromium is not installed (apt-get install -y chromium)" >&2
  exit 2
fi

if [[ -z "$run_dir" ]]; then
  run_dir="$(mktemp -d)"
  CHAOS_SAMPLE_REPORT_DIR="$run_dir" swift test --filter "SampleRunTests" >/dev/null
fi
[[ -f "$run_dir/report.html" ]] || { echo "screenshot-report: no report.html in $run_dir" >&2; exit 2; }

mkdir -p "$(dirname "$out")"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --window-size=1180,900 --screenshot="$PWD/$out" "file://$(cd "$run_dir" && pwd)/report.html" >/dev/null 2>&1
[[ -s "$out" ]] || { echo "screenshot-report: chromium wrote no screenshot" >&2; exit 1; }
echo "screenshot-report: wrote $out from $run_dir/report.html"
