#!/usr/bin/env bash
# Offline audit of a TLS capture vs the same traffic in cleartext (issue 23's benchmark): builds TLSCaptureBench in
# release and runs it. It writes two captures of the same NDJSON lines over 16 connections (one cleartext, one TLS
# 1.3 AES-128-GCM with its key log), reads and audits each three times through CaptureReader and the audit engine
# in the same run, and prints the best MB/s of plaintext for each and the ratio (goal: TLS >= 0.5x cleartext).
# Every run checks that both audits count every message ok and that every TLS conversation was decrypted.
#
#   Benchmarks/tls-capture-bench.sh [MEGABYTES=200]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product TLSCaptureBench >/dev/null
.build/release/TLSCaptureBench "${1:-200}"
