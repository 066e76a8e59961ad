#!/usr/bin/env bash
# How close latency, bandwidth, partition and loss faults come to their targets on real loopback sockets: a 100 ms
# latency measured as the median added round trip against the direct path in the same run; a 1 MB/s cap measured over
# 5 s; a 2 s partition as the receiver's longest gap, with what the sender had acknowledged during it (on the kernel
# dead path, as root: nothing); a 5 % loss as the pieces the seeded model lost and the stalls the receiver saw, each a
# 200 ms retransmission timeout. Prints each measurement and its ratio to the target (1.000 is exact); exits 1 when
# latency is off by more than 2 ms, bandwidth by more than 5 %, the partition's gap by more than 100 ms, or the loss
# model's count outside a binomial's range. Run it on a quiet machine: it measures the machine's timers as much as
# chaos. `make test` tests the same behaviour in virtual time.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests ${SWIFT_BUILD_FLAGS--debug-info-format none} >/dev/null  # the flags make test builds with: one build for both
# The partition on the kernel dead path (as root; elsewhere the proxy holds, and the figures say so).
CHAOS_DEAD_PATH=${CHAOS_DEAD_PATH-kernel} CHAOS_ACCURACY_BENCH=1 swift test --skip-build --filter FaultAccuracyBenchmarks 2>&1 | tee /tmp/chaos-fault-accuracy.log \
  | grep -E "^accuracy:|Test run with" || true
grep -q "Test run with .* passed" /tmp/chaos-fault-accuracy.log
