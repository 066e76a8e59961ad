#!/usr/bin/env bash
# `make test`: the checks, the build, then every test, and a table of where the time went.
#
# The tests run straight from the built test binary (no `swift test`: it holds a lock on .build, so two could not run
# at once, and costs seconds per call). They run in lanes at the same time:
# - the unit lane: every suite outside ChaosEndToEndTests (EmbeddedChannel and virtual time for the most part, plus
#   socket tests with no wall-clock tolerance). It is CPU-bound, so it runs at a low CPU priority (nice 10): it gives way to the other lanes but keeps about a tenth
#   of a busy core (at nice 19, beside a CPU hog and the pair lanes, it got none for five minutes, and its suites'
#   time limits fired on tests that had not run).
# - the commands lane: the rest of ChaosEndToEndTests (the chaos binary run as a user runs it: bad input, validate,
#   lifecycle, short runs). At normal priority: a child process of a niced lane is niced too, and a pair command that
#   exits at once must be seen to exit within the start-up window. Then the fuzz corpus replay (niced as the unit lane)
#   and the shipped Kubernetes scenarios' validation.
# - the pair lanes: the suites whose runs take real time (a scenario of 15-60 s against a pair of processes, Python
#   peers among them, tcpdump, network namespaces). Eleven workers (the pair lanes) take them from one queue, longest
#   first, each the next when it ends one; the workers run side by side. They wait on the clock far more than they use the CPU, and nice keeps the unit lane out of their way.
# Nothing here asserts a wall-clock tolerance: timing is tested in virtual time, and measured by `make bench`.
#
# Usage: Tests/run-tests.sh (from make test; SWIFT and SWIFT_BUILD_FLAGS as the Makefile sets them).
# The logs of each phase are in .build/test-logs/; a failing phase's failures and tail are printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
read -r -a BUILD_FLAGS <<<"${SWIFT_BUILD_FLAGS:-}"
LOGS=.build/test-logs
TESTS=.build/debug/chaosPackageTests.xctest

# The pair suites, longest first (their seconds in fresh-clone runs: the gRPC pairs about 300, chaos shrink 160-330,
# the MQTT pairs 275, … the loopback capture 1). PAIR_LANES workers run them side by side, and each, when it ends a
# suite, takes the next that no worker has taken: the longest start first, and the short ones fill in behind them
# wherever a worker comes free, so a suite that runs long in one run (the shrink, whose runs follow the failure rate
# it measures) holds one worker while the others share out the rest. (Fixed lanes, each its own list, waited on their
# own longest member: s79q3's shrink lane took 380 s where the others took 265-301.) The workers share two cores with
# the unit lane and each other, and together keep them busy (a fresh-clone run's table gives each phase's CPU seconds:
# the pairs' chaos processes are debug builds), so a suite's time is set as much by the others as by itself, and the
# phase as a whole by their CPU. A worker starts LANE_STAGGER seconds after the one before, so that the first runs do
# not all start their peers in the same second. Two suites run commands that run a pair again and again (chaos shrink,
# chaos run --repeat; the quickstart's shrink with the fleet in network namespaces).
PAIR_SUITES=(
  ShrinkCommandTests GRPCPairTests MQTTPairTests TLSPairTests TLSCaptureAuditTests SocketIOPairTests
  ShippedMobileDayScenarioTests ShippedGRPCScenarioTests QuickstartShrinkTests ShippedWebSocketScenarioTests
  WebSocketPairTests FleetMergeTests LivePageTests SocketIORoomPairTests ToxiproxyClientTests SSEPairTests
  ShrinkInputTests DeliveredMeansAcknowledgedTests FleetNamespaceTests MQTTRetainedPairTests MQTTTransportPairTests
  ChatFanoutPairTests RepeatRunTests KeepaliveHangTests DeadPathTests QUICPairTests QUICNoMigrationPairTests
  CaptureAuditTests QUICHTTP3PairTests AuditBackpressureTests PrometheusScrapeTests KernelLossPathTests
  LoopbackCaptureTests
)
PAIR_LANES=11

# The test-ID regex of a suite. Swift Testing matches --filter and --skip against the whole ID, source file included,
# so a bare name also takes in every test written in a file of that name: a phase named after a file that extends two
# suites ran three tests that their own suites' phases ran too. Anchored at the suite's name in the ID
# (`Module.Suite/test(…)`), it takes the suite's tests, wherever they are written, and no other's.
suite_regex() { echo "\\.$1/"; }

# Seconds between the starts of two pair lanes.
LANE_STAGGER=2
# Ports per lane (CHAOS_TEST_PORTS): the unit lane's from 20000, the commands lane's next, then each pair lane's, all
# below the kernel's ephemeral range (32768).
PORTS_PER_LANE=800
lane_ports() { echo "$((20000 + $1 * PORTS_PER_LANE))-$((20000 + ($1 + 1) * PORTS_PER_LANE - 1))"; }

mkdir -p .build
rm -rf "$LOGS"
mkdir -p "$LOGS"
# Every test's files (run folders, the peers' configs and logs, captures) go under one folder of the clone's own
# (TMPDIR, which Foundation, Python and the peers all honour): a passing run's are removed at the end, a failing run's
# kept there for a look; nothing is left behind in the machine's /tmp.
TEST_TMP=$PWD/.build/test-tmp
rm -rf "$TEST_TMP"
mkdir -p "$TEST_TMP"
chmod 0755 "$TEST_TMP"
export TMPDIR=$TEST_TMP
# The test peers' python3 as a link to the interpreter itself, first on PATH: where python3 is a version manager's shim
# (pyenv's is a bash script that runs a few more), each of the tests' hundreds of python3 starts costs 70 ms of CPU
# more, which the lanes share (about 20 CPU seconds a run).
mkdir -p "$TEST_TMP/bin"
if python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$python" ]; then
  ln -sf "$python" "$TEST_TMP/bin/python3"
  export PATH=$TEST_TMP/bin:$PATH
fi
started=$(date +%s.%N)

# Runs one phase: `phase NAME LANE COMMAND…`, its output in $LOGS/NAME.log, its time and status in $LOGS/NAME.time.
phase() {
  local name=$1 lane=$2
  shift 2
  local t0 t1 status
  t0=$(date +%s.%N)
  # In a subshell of its own, whose `times` then gives the CPU time of the phase's processes (the children it waited
  # for, and theirs): the lanes share two cores, so a phase's CPU seconds say what it costs the others.
  (
    "$@" >"$LOGS/$name.log" 2>&1
    status=$?
    times >"$LOGS/$name.cpu"
    exit $status
  )
  status=$?
  t1=$(date +%s.%N)
  cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } printf "%.1f", s }' "$LOGS/$name.cpu")
  echo "$name $lane $t0 $t1 $status $cpu" >"$LOGS/$name.time"
  return $status
}

# A phase whose failure stops make test at once (the checks and the build).
step() {
  local name=$1
  shift
  echo "== $name"
  if ! phase "$name" setup "$@"; then
    echo "make test: $name failed:" >&2
    tail -n 80 "$LOGS/$name.log" >&2
    exit 1
  fi
}

# Runs the test binary on the suites a regex names (--filter) or on all others (--skip).
swift_testing() {
  timeout --kill-after=10 900 "$TESTS" --testing-library swift-testing "$@"
}

step deps make -s deps
# The two checks that need no build run beside it: the build's first half minute (resolving the dependencies, compiling
# their manifests and plugins) keeps one core busy, not two. Their results are read when the build ends.
echo "== manifests, style (beside the build)"
phase manifests setup Tests/deploy/check-manifests.sh &
manifests_pid=$!
phase style setup Tests/style/check-format.sh &
style_pid=$!
step build Tests/timed-build.sh "$SWIFT" --build-tests "${BUILD_FLAGS[@]}"
for check in manifests:$manifests_pid style:$style_pid; do
  if ! wait "${check#*:}"; then
    echo "make test: ${check%%:*} failed:" >&2
    tail -n 80 "$LOGS/${check%%:*}.log" >&2
    exit 1
  fi
done
step docs Tests/docs/check-docs.sh .build/debug/chaos

# End-to-end suites that run in the unit lane, after its own suites (none today).
UNIT_LANE_PAIR_SUITES=""

lane_regexes=()
for suite in $UNIT_LANE_PAIR_SUITES "${PAIR_SUITES[@]}"; do lane_regexes+=("$(suite_regex "$suite")"); done
every_pair_suite=$(
  IFS='|'
  echo "${lane_regexes[*]}"
)

tests_started=$(date +%s.%N)
echo "== tests: the unit lane, the commands lane and $PAIR_LANES pair lanes side by side (logs in $LOGS/)"
pids=()
# Each lane draws the ports of its tests' processes from a range of its own (ChaosCLI.freePort reads
# CHAOS_TEST_PORTS): a port one lane checked free and handed to a process cannot be taken meanwhile by another lane's
# process, which keeps its own list (a fleet test's demo server once found its port taken and could not listen).
(
  CHAOS_TEST_PORTS=$(lane_ports 0)
  export CHAOS_TEST_PORTS
  phase unit unit nice -n 10 timeout --kill-after=10 900 "$TESTS" --testing-library swift-testing \
    --skip "ChaosEndToEndTests|$every_pair_suite"
  for suite in $UNIT_LANE_PAIR_SUITES; do phase "$suite" unit swift_testing --filter "$(suite_regex "$suite")"; done
) &
pids+=($!)
# The commands lane (about 30 s of chaos processes started and stopped) beside the pair lanes, each of those a few
# seconds after the one before, so that their first runs do not all start their peers in the same second. (What keeps
# a slow start from mattering is in the scenarios: their clients say `ready: connected`, so the faults count from the
# pair's connections, not from the proxies' start.) The commands lane once ran first, alone: 29 s on the critical path.
# Then the fuzz corpus replay and the Kubernetes scenarios' validation, at the unit lane's priority: at the end of the
# unit lane they made it the longest (s80q1: 246 s of suites, then 85 s of replay).
(
  CHAOS_TEST_PORTS=$(lane_ports 1)
  export CHAOS_TEST_PORTS
  phase commands commands swift_testing --filter ChaosEndToEndTests --skip "$every_pair_suite"
  phase fuzz-replay commands nice -n 10 .build/debug/chaos-fuzz replay Fuzz/corpus
  phase validate-deploy commands sh -c '.build/debug/chaos validate deploy/kubernetes/base/scenario.yaml &&
    .build/debug/chaos validate deploy/kubernetes/sidecar/scenario.yaml'
) &
pids+=($!)
# The queue of pair suites: one per line, the next at the top; a worker takes it under a lock.
QUEUE=$LOGS/pair-suites.queue
printf '%s\n' "${PAIR_SUITES[@]}" >"$QUEUE"
# Takes the next pair suite off the queue and prints it (nothing when none is left).
next_pair_suite() {
  (
    flock 9
    head -n 1 "$QUEUE"
    sed -i 1d "$QUEUE"
  ) 9>"$QUEUE.lock"
}
for index in $(seq 1 "$PAIR_LANES"); do
  (
    CHAOS_TEST_PORTS=$(lane_ports $((index + 1)))
    export CHAOS_TEST_PORTS
    sleep $(((index - 1) * LANE_STAGGER))
    while suite=$(next_pair_suite) && [ -n "$suite" ]; do
      phase "$suite" "pairs-$index" swift_testing --filter "$(suite_regex "$suite")"
    done
  ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
finished=$(date +%s.%N)

# The table: every phase with its lane, its time, its tests and its result; then each lane's total and the whole.
strip() { sed -E 's/\x1b\[[0-9;]*m//g' "$1"; }
passed=0
failed=0
failures=()
printf '\n%-34s %-9s %8s %8s %6s  %s\n' phase lane seconds "cpu secs" tests result
while read -r name lane t0 t1 status cpu; do
  log="$LOGS/$name.log"
  tests=$(strip "$log" | sed -nE 's/.*Test run with ([0-9]+) tests?( in [0-9]+ suites?)? (passed|failed).*/\1/p' | tail -n 1)
  failing=$(strip "$log" | grep -cE '^✘ Test ".* failed after' || true)
  if [ -n "$tests" ]; then
    passed=$((passed + tests - failing))
    failed=$((failed + failing))
  fi
  result=ok
  if [ "$status" != 0 ]; then
    result="FAILED (exit $status)"
    failures+=("$name")
    if [ "$failing" = 0 ] && [ -n "$tests" ]; then failed=$((failed + 1)); fi
  fi
  printf '%-34s %-9s %8.1f %8s %6s  %s\n' "$name" "$lane" "$(echo "$t1 - $t0" | bc)" "$cpu" "${tests:--}" "$result"
done < <(cat "$LOGS"/*.time | sort -k3,3n)
for lane in unit commands $(seq -f 'pairs-%g' 1 "$PAIR_LANES"); do
  total=$(cat "$LOGS"/*.time | awk -v lane="$lane" '$2 == lane { s += $4 - $3; c += $6 } END { printf "%.1f %.1f", s, c }')
  printf '%-34s %-9s %8s %8s\n' "lane $lane" "" $total
done
printf '%-34s %-9s %8s %8s\n' "tests' CPU (two cores)" "" "" "$(cat "$LOGS"/*.time | awk '$2 != "setup" { c += $6 } END { printf "%.1f", c }')"
printf '%-34s %-9s %8.1f\n' "tests (lanes side by side)" "" "$(echo "$finished - $tests_started" | bc)"
printf '%-34s %-9s %8.1f\n' "make test (all of the above)" "" "$(echo "$finished - $started" | bc)"
# And the build's own table (Tests/timed-build.sh): the dependencies, this package, the link, the slowest modules.
sed -n '/^build: where the time went/,$p' "$LOGS/build.log"

for name in "${failures[@]}"; do
  echo
  echo "---- $name failed ($LOGS/$name.log): its failing tests and issues, then its last lines"
  # Each issue with the message lines that follow it (a check's numbers: `↳ ...` and their continuation lines), which
  # the last lines alone lose when other tests ran after it (CI of e78dc54e: TLSCaptureAuditTests' numbers, cut).
  strip "$LOGS/$name.log" | awk '/^✘ /{print; keep=/recorded an issue/; lines=0; next}
    keep && !/^(◇|✔|✘)/ && lines < 16 {print; lines++; next} {keep=0}' | head -n 120
  strip "$LOGS/$name.log" | tail -n 40
done
echo
if [ ${#failures[@]} = 0 ]; then
  rm -rf "$TEST_TMP"
else
  echo "the tests' files (run folders, peers' logs): $TEST_TMP"
fi
echo "tests: $passed passed, $failed failed"
[ ${#failures[@]} = 0 ]
