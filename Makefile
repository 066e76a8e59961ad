# chaos: a network chaos test harness. `make demo` and `make test` do all the set-up on a fresh
# Debian machine with Swift: they install the Debian packages that are missing, then build.

SWIFT ?= swift
# Where `make deps` puts the test peers that must not replace a system-wide package: amqtt (MQTTPairTests finds it
# there) and two old releases of websockets (KeepaliveHangTests).
PEERS ?= $(HOME)/.cache/chaos-peers
AMQTT_VENV ?= $(PEERS)/amqtt
# prometheus (and its promtool): PrometheusScrapeTests scrapes a running chaos with it, on a port of its own (the
# package's service, where a system starts it, listens on 9090 and is not used).
APT_PACKAGES := libpcap-dev zlib1g-dev tshark tcpdump socat haproxy iperf3 iproute2 jq python3 nftables iptables mosquitto python3-venv chromium prometheus
CHAOS := .build/debug/chaos
# No debug info in the debug build: less to compile and link (the tests need no debugger); `make demo` and `make test`
# build with the same flags, so they share one build. (Not --disable-index-store: Linux finds the tests through the
# index store. Not -Xswiftc -wmo: SwiftPM's debug link step then looks for one object file per source file.)
SWIFT_BUILD_FLAGS ?= -debug-info-format none

.PHONY: all deps build demo test style format bench fuzz clean check-manifests scale dist image action-check shrink-check

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
	@python3 -c 'import paho.mqtt' 2>/dev/null || python3 -m pip install -q 'paho-mqtt>=2'
	@python3 -c 'import socketio' 2>/dev/null || python3 -m pip install -q 'python-socketio[asyncio_client]'
	@# amqtt, the second MQTT broker of the tests, in a venv of its own: it pins websockets 15.0.1, which would replace
	@# the WebSocket peers' websockets. The venv is made from the interpreter's real path: a venv's python is a link to
	@# the python3 that made it, and `make test` puts a link of its own (in the clone's .build, gone with the clone) first
	@# on PATH; a venv whose python no longer runs (made so by an earlier clone) is made again.
	@$(AMQTT_VENV)/bin/python -c 'import amqtt' 2>/dev/null || { rm -rf $(AMQTT_VENV) && \
	  "$$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')" -m venv $(AMQTT_VENV) && \
	  $(AMQTT_VENV)/bin/python -m pip install -q amqtt; }
	@# websockets 14.1 (keepalive hang, websockets #1527) and 14.2 (fixed), each in a folder of its own: KeepaliveHangTests
	@# imports one or the other into its client, beside the WebSocket peers' current release.
	@# aioquic (the QUIC peers and the QUIC capture fixtures) in a folder of its own: it brings a newer cryptography than
	@# the other peers'.
	@test -f $(PEERS)/aioquic/aioquic/__init__.py || \
	  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target $(PEERS)/aioquic aioquic
	@for v in 14.1 14.2; do test -f $(PEERS)/websockets-$$v/websockets/__init__.py || \
	  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target $(PEERS)/websockets-$$v websockets==$$v; done

build: deps
	$(SWIFT) build --product chaos $(SWIFT_BUILD_FLAGS)

# Runs the quickstart scenario against the built-in reference pair and prints where the report is.
demo: build
	$(CHAOS) run Scenarios/quickstart.yaml

# The Kubernetes manifests (deploy/kubernetes): kustomize renders every overlay, kubernetes-validate --strict checks
# the output against the Kubernetes 1.30 schemas, and the conventions (hardening, token, --agent) hold (~5 s).
check-manifests:
	Tests/deploy/check-manifests.sh

# The style gate alone (make test runs it too): swift-format with the root's .swift-format. `make format` fixes.
style:
	Tests/style/check-format.sh

format:
	git ls-files -z '*.swift' | grep -zv '/Generated/' | xargs -0 $(SWIFT) format format --in-place --parallel

# The whole suite, in phases: deps, the Kubernetes manifests, the style gate (swift-format), the build, the docs' links
# and flags, then the tests in lanes side by side (Tests/run-tests.sh says which, and why), and a table of each phase's
# time at the end. A phase's log is in .build/test-logs/.
test:
	SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" Tests/run-tests.sh

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

# chaos shrink on a planted, sequence-dependent bug (Tests/shrink/planted-bug.sh): a 200 s soak of 100 faults, shrunk to at
# most 2 faults in at most 60 s failing at least 8 of 10 (the steady bug), then the same with the bug firing on a
# third of takeovers (found, with its measured rate). About 20 minutes each.
shrink-check: build
	Tests/shrink/planted-bug.sh 1 Reports/planted-steady
	Tests/shrink/planted-bug.sh 0.33 Reports/planted-flaky 7022

bench: deps
	bash Benchmarks/proxy-bench.sh
	bash Benchmarks/udp-bench.sh --no-build
	bash Benchmarks/tls-bench.sh --no-build
	bash Benchmarks/tls-capture-bench.sh
	bash Benchmarks/audit-throughput.sh --no-build
	bash Benchmarks/offline-audit.sh --no-build
	bash Benchmarks/fault-accuracy.sh
	bash Benchmarks/report-page.sh --no-build

clean:
	rm -rf .build
