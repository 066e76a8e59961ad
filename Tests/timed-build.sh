#!/usr/bin/env bash
# The build of `make test`, timed: every line of `swift build`'s output gets the time it was printed, and the build
# ends with where its time went, per module (Tests/run-tests.sh prints the table; .build/test-logs/build.log keeps it).
#
# SwiftPM prints `[n/m] Compiling MODULE file…` (or `Emitting module MODULE`, `Linking X`) as each job ends. The
# time from one such line to the next is charged to the module of the later line: with two cores and two jobs at a
# time this is an estimate, not a profile, but it shows which modules hold the wall clock (a dependency's C files,
# one of our modules, the tests, the link).
#
# Usage: Tests/timed-build.sh SWIFT FLAGS… (the output on stdout, the table last; exit status of `swift build`).
set -uo pipefail
SWIFT=$1
shift
# Each line with its time, kept beside make test's logs (for a closer look at a phase: the resolution, one module).
if [ -d .build/test-logs ]; then
  stamps=.build/test-logs/build-stamps.tsv
  : >"$stamps"
else
  stamps=$(mktemp)
  trap 'rm -f "$stamps"' EXIT
fi
began=$EPOCHREALTIME
"$SWIFT" build "$@" 2>&1 | while IFS= read -r line; do
  printf '%s\n' "$line"
  printf '%s\t%s\n' "$EPOCHREALTIME" "$line" >>"$stamps"
done
status=${PIPESTATUS[0]}
# The modules of this package (the folders of Sources/ and Tests/), to tell them from the dependencies'.
ours=""
for folder in Sources/*/ Tests/*/; do
  folder=${folder%/}
  ours+="${folder##*/} "
done
awk -F '\t' -v ours="$ours" -v began="$began" -v ended="$EPOCHREALTIME" '
  # The module a line of swift build starts a job for ("" when the line starts none: a warning, a note).
  function module(text,   m) {
    if (text ~ /\] Compiling plugin /) return "(resolving, fetching, planning)"
    if (text ~ /\] (Planning|Write) /) return "(resolving, fetching, planning)"
    if (match(text, /\] (Compiling|Emitting module|Wrapping AST for|Linking) [^ ]+/)) {
      m = substr(text, RSTART, RLENGTH)
      sub(/^\] (Compiling|Emitting module|Wrapping AST for|Linking) /, "", m)
      sub(/,$/, "", m)
      if (text ~ /\] Linking /) return "(linking) " m
      return m
    }
    return ""
  }
  BEGIN {
    n = split(ours, list, " "); for (i = 1; i <= n; i++) own[list[i]] = 1
    last = began
  }
  {
    m = module($2)
    if (m == "") next
    spent[m] += $1 - last
    last = $1
  }
  END {
    spent["(the end)"] += ended - last
    for (m in spent) {
      name = m; sub(/^\(linking\) /, "", name)
      if (m ~ /^\(linking\)/) link += spent[m]
      else if (name in own) mine += spent[m]
      else if (m ~ /^\(/) other += spent[m]
      else deps += spent[m]
    }
    printf "\nbuild: where the time went (wall seconds, each charged to the module of the job that ended; 2 jobs at a time)\n"
    printf "  %-40s %8.1f\n", "dependencies", deps
    printf "  %-40s %8.1f\n", "this package (Sources/, Tests/)", mine
    printf "  %-40s %8.1f\n", "linking", link
    printf "  %-40s %8.1f\n", "resolving, fetching, planning", other
    printf "  %-40s %8.1f\n", "all", ended - began
    printf "  the twelve slowest:\n"
    cmd = "sort -t \"\t\" -k2,2nr | head -n 12"
    for (m in spent) printf "%s\t%.1f\n", m, spent[m] | cmd
    close(cmd)
  }
' "$stamps" | sed -E 's/^([^\t]+)\t(.*)$/    \1: \2 s/'
exit "$status"
