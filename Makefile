# chaos: a network chaos test harness. `make demo` and `make test` do all the set-up on a fresh
# Debian machine with Swift: they install the Debian packages that are missing, then build.

SWIFT ?= swift
APT_PACKAGES := libpcap-dev zlib1g-dev tshark tcpdump socat haproxy iperf3 iproute2 jq python3
CHAOS := .build/debug/chaos

.PHONY: all deps build demo test bench fuzz clean check-manifests scale dist image action-check

all: build

# Installs only what is missing, non-interactively (tshark's package asks a question otherwise).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | $$SUDO debconf-set-selections && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@python3 -c 'import scapy' 2>/dev/null || python3 -m pip install -q scapy
	@python3 -c 'import websockets' 2>/dev/null || python3 -m pip install -q websockets
	@python3 -c 'import aiohttp' 2>/dev/null || python3 -m pip install -q aiohttp
	@python3 -c 'import aiohttp_sse' 2>/dev/null || python3 -m pip install -q aiohttp-sse
	@python3 -c 'import grpc' 2>/dev/null || python3 -m pip install -q grpcio
	@python3 -c 'import google.protobuf' 2>/dev/null || python3 -m pip install -q protobuf
	@python3 -c 'import toxiproxy' 2>/dev/null || python3 -m pip install -q toxiproxy-python
	@python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus_client
	@python3 -c 'import trustme' 2>/dev/null || python3 -m pip install -q trustme

build: deps
	$(SWIFT) build --product chaos

# Runs the quickstart scenario against the built-in reference pair and prints where the report is.
demo: build
	$(CHAOS) run Scenarios/quickstart.yaml

# The capture comparisons (a live audit against tcpdump of the same run, with third-party pairs) run on their
# own after the rest: each drives a whole run and a tcpdump, and the two cores are enough for one at a time.
# The Toxiproxy client checks (one chaos process each, a bandwidth measured as a ratio) run with them.
# Nothing here asserts a wall-clock tolerance: timing is tested in virtual time, and measured by `make bench`.
# Every protocol's third-party pair suite (`<Protocol>PairTests`) but gRPC's and SSE's is one of them, whatever the protocol.
# The SSE pair (aiohttp-sse) runs alone after them: started in the heavy phase's first burst of Python peers, its
# clients connected after the first faults (two streams where four were expected).
HEAVY_SUITES := \.CaptureAuditTests|LoopbackCaptureTests|DeliveredMeansAcknowledgedTests|\.(?!GRPC|SSE)\w+PairTests|ToxiproxyClientTests|ShippedWebSocketScenarioTests|ShippedMobileDayScenarioTests
# The gRPC pairs (Python grpcio, then the grpc-swift reference pair) last, one at a time: their consumers are the
# slowest, and the comparison with their logs wants the machine to themselves.
GRPC_SUITES := GRPCPairTests|ShippedGRPCScenarioTests
# The offline TLS audits of third-party pairs (Python websockets and grpcio, tcpdump, tshark) on their own too: run
# beside the heavy suites, their Python processes slowed the SSE pair's start past its first faults.
TLS_CAPTURE_SUITES := TLSCaptureAuditTests
# The audit held back on purpose (two runs, about 12 s) on its own: started beside the heavy suites, it slowed their
# Python peers' start past the first faults.
BACKPRESSURE_SUITES := AuditBackpressureTests
# The fleet (several chaos agents and a demo pair per test, then 300 streams across network namespaces) alone, one
# test at a time: beside the heavy suites, its load delayed the Python peers' start and its own pair's connects.
FLEET_SUITES := FleetMergeTests|FleetNamespaceTests

# The Kubernetes manifests (deploy/kubernetes): kustomize renders every overlay, kubernetes-validate --strict checks
# the output against the Kubernetes 1.30 schemas, and the conventions (hardening, token, --agent) hold (~5 s).
check-manifests:
	Tests/deploy/check-manifests.sh

test: deps check-manifests
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip "$(HEAVY_SUITES)|SSEPairTests|$(GRPC_SUITES)|$(TLS_CAPTURE_SUITES)|$(BACKPRESSURE_SUITES)|$(FLEET_SUITES)"
	$(SWIFT) test --skip-build --filter "$(HEAVY_SUITES)"
	$(SWIFT) test --skip-build --filter SSEPairTests
	$(SWIFT) test --skip-build --filter "$(BACKPRESSURE_SUITES)"
	$(SWIFT) test --skip-build --filter FleetMergeTests
	$(SWIFT) test --skip-build --filter FleetNamespaceTests
	$(SWIFT) test --skip-build --filter "$(TLS_CAPTURE_SUITES)"
	$(SWIFT) test --skip-build --filter GRPCPairTests
	$(SWIFT) test --skip-build --filter ShippedGRPCScenarioTests
	.build/debug/chaos-fuzz replay Fuzz/corpus
	.build/debug/chaos validate deploy/kubernetes/base/scenario.yaml >/dev/null
	.build/debug/chaos validate deploy/kubernetes/sidecar/scenario.yaml >/dev/null

# A release tarball (dist/chaos-<version>-linux-<arch>.tar.gz + .sha256): a release build with the Swift runtime and
# Foundation linked in (.build-release/, at idle CPU priority), checked to need only glibc, libpcap and zlib (ldd), and
# run from the unpacked tarball with an empty environment (--version, validate, a 5 s run).
dist: deps
	dist/make-dist.sh
	Tests/dist/check-tarball.sh $$(ls -t dist/chaos-*-linux-$$(uname -m).tar.gz | head -n 1)

# The container image: built from Containerfile by podman, buildah or docker when one works; otherwise assembled from
# the tarball as an OCI layout in dist/image/ (no engine needed), then checked (digests, config, and chaos run inside
# its own root).
image: dist
	dist/make-image.sh
	Tests/dist/check-image.sh $$(ls -td dist/image/chaos-*-oci/ | head -n 1)

# The GitHub Action (.github/actions/chaos): its YAML and scripts linted, and its steps run here against the tarball.
action-check: dist
	Tests/dist/check-action.sh $$(ls -t dist/chaos-*-linux-$$(uname -m).tar.gz | head -n 1)

# The fleet at scale (PRODUCT.md section 12; root): SCALE_STREAMS streams of the reference pair through SCALE_AGENTS
# agents, each in a network namespace of its own, for SCALE_SECONDS of disconnects and a herd disconnect; the merged
# report is compared with the pair's logs stream by stream (Tests/fleet/netns-fleet.sh; make test runs 300 streams).
# Each stream sends a message each way every 1/SCALE_RATE s and a heartbeat every SCALE_HEARTBEAT, and reconnects
# over two agents in turn (its WiFi and its LTE path); a disconnect every 5-30 s cuts SCALE_SHARE of the connections,
# before and after a herd disconnect of everything at 200 s; reconnects back off up to 30 s (a herd of 50,000 spreads
# out); warm-up ends two minutes after the herd, once every stream has used both its paths and reconnected. On 2 cores, where the pair,
# the agents and every namespace's TCP share the CPU, 50,000 streams fit at 0.05.
SCALE_STREAMS ?= 50000
SCALE_SECONDS ?= 600
SCALE_AGENTS ?= 10
SCALE_RATE ?= 0.05
SCALE_HEARTBEAT ?= 30s
SCALE_SHARE ?= 5%
scale: deps
	$(SWIFT) build -c release --product chaos
	RATE=$(SCALE_RATE) HEARTBEAT=$(SCALE_HEARTBEAT) DISCONNECT_EVERY=5s..30s DISCONNECT_SHARE=$(SCALE_SHARE) BACKOFF_CAP=30s \
	  PATHS=2 HERD_AT=200 WARM_AT=320 \
	  Tests/fleet/netns-fleet.sh .build/release/chaos Reports/scale-$$(date -u +%Y%m%dT%H%M%SZ) $(SCALE_STREAMS) $(SCALE_SECONDS) $(SCALE_AGENTS)

# libFuzzer over every public input (scenario files, the lines, length-prefixed, websocket, grpc and sse audit, pcap/pcapng files,
# control-API bodies), FUZZ_SECONDS each (default 600), in a build of its own with the fuzzer and AddressSanitizer.
# New inputs that widen coverage land in Fuzz/corpus/<target>/; a crash leaves crash-* files here: add each to
# Fuzz/corpus/<target>/ (make test replays them all) once fixed.
FUZZ_SECONDS ?= 600
# One target per corpus folder (chaos-fuzz names them: the scenario, each protocol plug-in's, pcap, api).
FUZZ_TARGETS ?= $(notdir $(wildcard Fuzz/corpus/*))
fuzz: deps
	$(SWIFT) build --product chaos-fuzz --scratch-path .build-fuzz \
	  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld
	@for target in $(FUZZ_TARGETS); do \
	  echo "fuzz $$target for $(FUZZ_SECONDS)s"; \
	  CHAOS_FUZZ_TARGET=$$target .build-fuzz/debug/chaos-fuzz Fuzz/corpus/$$target \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	    -artifact_prefix=.build-fuzz/$$target- > .build-fuzz/$$target.log 2>&1; status=$$?; \
	  grep -E "^(#[0-9]+.*(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|==[0-9]+==ERROR|SUMMARY)" \
	    .build-fuzz/$$target.log; \
	  echo "corpus $$target: $$(ls Fuzz/corpus/$$target | wc -l) inputs"; \
	  if [ $$status != 0 ]; then tail -40 .build-fuzz/$$target.log; exit 1; fi; \
	done

bench: deps
	bash Benchmarks/proxy-bench.sh
	bash Benchmarks/tls-bench.sh --no-build
	bash Benchmarks/tls-capture-bench.sh
	bash Benchmarks/audit-throughput.sh --no-build
	bash Benchmarks/offline-audit.sh --no-build
	bash Benchmarks/fault-accuracy.sh

clean:
	rm -rf .build
