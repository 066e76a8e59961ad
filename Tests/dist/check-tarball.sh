#!/usr/bin/env bash
# Checks a release tarball made by dist/make-dist.sh, on its own, from the tarball alone:
#   Tests/dist/check-tarball.sh dist/chaos-<version>-linux-<arch>.tar.gz
# 1. its .sha256 beside it (when there is one) matches;
# 2. it unpacks into one folder chaos-<version>-linux-<arch>/ with bin/chaos, README.md, INSTALL, Scenarios/;
# 3. bin/chaos needs no Swift library: its direct dependencies (ELF NEEDED) are the C library family,
#    libstdc++/libgcc_s, libpcap and libz, and whatever else ldd lists is one of libpcap's own dependencies;
# 4. with an empty environment (env -i: no Swift toolchain on PATH or LD_LIBRARY_PATH), from the unpacked folder:
#    `bin/chaos --version` prints the tarball's version, `bin/chaos validate Scenarios/quickstart.yaml` passes, and
#    `bin/chaos run` of a 5-second scenario (written here: chaos demo server and two demo clients through the proxy,
#    a latency spike and a reset) exits 0 with verdict pass, and `chaos report --format github` renders it.
set -euo pipefail

fail() { echo "check-tarball: FAIL: $*" >&2; exit 1; }
[ $# -eq 1 ] || { echo "usage: $0 chaos-<version>-linux-<arch>.tar.gz" >&2; exit 2; }
tarball=$(realpath "$1")
[ -f "$tarball" ] || fail "no such file: $1"
base=$(basename "$tarball" .tar.gz)
[[ "$base" =~ ^chaos-(.+)-linux-([A-Za-z0-9_]+)$ ]] || fail "$base is not named chaos-<version>-linux-<arch>"
version=${BASH_REMATCH[1]}
arch=${BASH_REMATCH[2]}
[ "$arch" = "$(uname -m)" ] || fail "the tarball is for $arch, this machine is $(uname -m)"

if [ -f "$tarball.sha256" ]; then
  (cd "$(dirname "$tarball")" && sha256sum --quiet -c "$(basename "$tarball").sha256") || fail "sha256 mismatch"
  echo "sha256: OK ($(cut -d' ' -f1 "$tarball.sha256"))"
else
  echo "sha256: no $(basename "$tarball").sha256 beside the tarball, not checked"
fi

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
tar -xzf "$tarball" -C "$work"
top=$(find "$work" -mindepth 1 -maxdepth 1)
[ "$top" = "$work/$base" ] || fail "the tarball must hold exactly one folder $base/, it holds: $(ls "$work")"
for entry in bin/chaos README.md INSTALL Scenarios/quickstart.yaml; do
  [ -e "$top/$entry" ] || fail "$base/$entry is missing"
done
[ -x "$top/bin/chaos" ] || fail "$base/bin/chaos is not executable"

# 3. Libraries.
bin="$top/bin/chaos"
status=0
command -v readelf >/dev/null 2>&1 || fail "readelf (binutils) is needed for the NEEDED check"
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
echo "NEEDED: $(echo "$needed" | tr '\n' ' ')"
while read -r lib; do
  case "$lib" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libgcc_s.so.* | libstdc++.so.* | \
    libpcap.so.* | libz.so.*) ;;
    *) echo "check-tarball: direct dependency not allowed: $lib" >&2; status=1 ;;
  esac
done <<<"$needed"
listing=$(ldd "$bin") || fail "ldd failed"
echo "ldd bin/chaos:"
# shellcheck disable=SC2001
sed 's/ (0x[0-9a-f]*)$//' <<<"$listing"
pcap=$(awk '$1 ~ /^libpcap\.so/ && $2 == "=>" {print $3}' <<<"$listing")
pcap_deps=""
if [ -n "$pcap" ] && [ -f "$pcap" ]; then pcap_deps=$(ldd "$pcap" | awk '{print $1}'); fi
while read -r name arrow path _; do
  [ -n "$name" ] || continue
  [ "$arrow" = "=>" ] || path=$name
  case "$name" in linux-vdso.so.* | linux-gate.so.*) continue ;; esac
  if [ "$path" = not ]; then echo "check-tarball: not found: $name" >&2; status=1; continue; fi
  case "$path" in */swift/*) echo "check-tarball: from a Swift toolchain: $name => $path" >&2; status=1; continue ;; esac
  case "$(basename "$name")" in
    libswift* | libFoundation* | lib_Foundation* | libdispatch* | libBlocksRuntime* | libicu*)
      echo "check-tarball: Swift runtime library linked dynamically: $name" >&2; status=1 ;;
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libgcc_s.so.* | libstdc++.so.* | \
    libpcap.so.* | libz.so.*) ;;
    *) grep -qxF "$name" <<<"$pcap_deps" ||
         { echo "check-tarball: library not allowed (and not one of libpcap's): $name => $path" >&2; status=1; } ;;
  esac
done <<<"$listing"
[ "$status" = 0 ] || fail "bin/chaos links libraries outside the allow-list (above)"
echo "libraries: OK (no Swift runtime library; libpcap's own dependencies: $(echo "$pcap_deps" | grep -v -e '^linux-vdso' -e '^libc\.so' -e 'ld-linux' | tr '\n' ' '))"

# 4. Runs with an empty environment.
cd "$top"
got=$(env -i ./bin/chaos --version) || fail "env -i bin/chaos --version failed"
[ "$got" = "$version" ] || fail "env -i bin/chaos --version printed '$got', the tarball's name says '$version'"
echo "env -i bin/chaos --version: $got"
env -i ./bin/chaos validate Scenarios/quickstart.yaml >"$work/validate.out" 2>&1 ||
  { cat "$work/validate.out" >&2; fail "env -i bin/chaos validate Scenarios/quickstart.yaml failed"; }
echo "env -i bin/chaos validate Scenarios/quickstart.yaml: OK ($(wc -l <"$work/validate.out") lines)"

# Two free loopback ports (the kernel's choice, so a test run beside this one does not collide).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}
listen=$(free_port)
upstream=$(free_port)
while [ "$upstream" = "$listen" ]; do upstream=$(free_port); done
cat >"$work/smoke.yaml" <<YAML
# 5 s through the proxy: the built-in pair (a server, two resilient clients), a latency spike, a reset.
name: tarball-smoke
duration: 5s
seed: 7
proxies:
  - name: stream
    listen: 127.0.0.1:$listen
    upstream: 127.0.0.1:$upstream
pair:
  server:
    run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 20 --log {run_dir}/server.jsonl
    ready: tcp 127.0.0.1:{upstream.port}
  client:
    run: chaos demo client --connect 127.0.0.1:{listen.port} --stream c{index} --rate 20 --log {run_dir}/client-{index}.jsonl --state {run_dir}/client-{index}.state
    count: 2
protocol:
  framing: lines
  format: json
  seq: seq
  stream: stream
  id: id
  ack: ack
  ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
faults:
  - latency:    {at: 1s, for: 1s, add: 50ms..100ms, direction: downstream}
  - disconnect: {at: 2500ms, mode: reset}
expect:
  lost: 0
  duplicated: 0
  delivery: ">= 99%"
YAML
run_status=0
timeout 120 env -i ./bin/chaos run "$work/smoke.yaml" --out "$work/run" >"$work/run.out" 2>&1 || run_status=$?
if [ "$run_status" != 0 ]; then
  cat "$work/run.out" >&2
  for f in "$work"/run/*.err; do
    if [ -s "$f" ]; then echo "--- $f" >&2; tail -n 20 "$f" >&2; fi
  done
  fail "env -i bin/chaos run (5 s scenario) exited $run_status, expected 0"
fi
grep -q '^verdict: PASS' "$work/run.out" || { cat "$work/run.out" >&2; fail "chaos run printed no 'verdict: PASS'"; }
summary=$(env -i ./bin/chaos report "$work/run" --format github) || fail "chaos report --format github failed"
echo "env -i bin/chaos run (5 s, demo server + 2 clients, latency + reset): exit 0"
echo "  $(head -n 1 <<<"$summary")"
echo "check-tarball: OK $(basename "$tarball")"
