#!/usr/bin/env bash
# Builds the release tarball of chaos for this machine's architecture:
#   dist/chaos-<version>-linux-<arch>.tar.gz and dist/chaos-<version>-linux-<arch>.tar.gz.sha256
# with bin/chaos (Swift runtime and Foundation linked in statically), README.md, docs/, Scenarios/, Protos/ (the
# descriptor set the gRPC scenarios name), LICENSE when there is one, and INSTALL.
# Then checks what it made and exits non-zero when a check fails:
#   - the binary needs no Swift library: its direct dependencies (ELF NEEDED) are only the C library family,
#     libstdc++/libgcc_s, libpcap and libz; everything else ldd lists must be one of libpcap's own dependencies;
#   - the unpacked tarball's binary runs `--version` and `validate` of every scenario from a temporary folder with
#     an empty environment (env -i), so without the Swift toolchain on PATH or LD_LIBRARY_PATH.
#
# Environment: SWIFT (default swift), SCRATCH_PATH (default .build-release; never .build), DIST_DIR (default dist),
# STRIP (default 1: strip the symbol table and debug info of the shipped copy; 0 keeps them).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SWIFT=${SWIFT:-swift}
SCRATCH_PATH=${SCRATCH_PATH:-.build-release}
DIST_DIR=${DIST_DIR:-dist}
STRIP=${STRIP:-1}

log() { echo "make-dist: $*" >&2; }
fail() { echo "make-dist: FAIL: $*" >&2; exit 1; }

[ "$(uname -s)" = Linux ] || fail "builds Linux tarballs only (this is $(uname -s))"
case "$SCRATCH_PATH" in .build | .build/ | ./.build | ./.build/) fail "SCRATCH_PATH must not be .build (the debug build's)";; esac

# 1. The release build, at the lowest priority: the machine is shared with other builds and tests. swift-build
# (llbuild) puts the compilers it starts back at nice 0 when it runs as root, so nice alone does not reach them;
# the SCHED_IDLE policy (chrt --idle) is inherited by every compiler and linker it starts.
build_flags=(-c release --static-swift-stdlib --scratch-path "$SCRATCH_PATH")
low_priority=(nice -n 19)
if command -v chrt >/dev/null 2>&1 && chrt --idle 0 true 2>/dev/null; then low_priority=(chrt --idle 0 nice -n 19); fi
log "${low_priority[*]} $SWIFT build ${build_flags[*]} --product chaos"
"${low_priority[@]}" "$SWIFT" build "${build_flags[@]}" --product chaos
built="$("$SWIFT" build "${build_flags[@]}" --show-bin-path)/chaos"
[ -x "$built" ] || fail "no executable at $built"

# 2. Name: chaos-<version>-linux-<arch>.
version=$("$built" --version 2>/dev/null | head -n 1 | tr -d '[:space:]' || true)
if ! [[ "$version" =~ ^[0-9A-Za-z][0-9A-Za-z._+-]*$ ]]; then
  version=$(git describe --tags --always 2>/dev/null || true)
  [ -n "$version" ] || fail "no version: '$built --version' printed nothing usable and git describe failed"
  log "chaos --version printed nothing usable; version from git describe: $version"
fi
arch=$(uname -m)
name="chaos-$version-linux-$arch"
mkdir -p "$DIST_DIR"
stage="$DIST_DIR/$name"
tarball="$DIST_DIR/$name.tar.gz"

# 3. Stage.
rm -rf "$stage" "$tarball" "$tarball.sha256"
mkdir -p "$stage/bin"
if [ "$STRIP" = 1 ] && command -v strip >/dev/null 2>&1; then
  strip --strip-all -o "$stage/bin/chaos" "$built"
else
  cp "$built" "$stage/bin/chaos"
fi
chmod 0755 "$stage/bin/chaos"
cp README.md "$stage/"
mkdir -p "$stage/docs"
cp docs/*.md docs/*.png "$stage/docs/"   # the pages README.md links to
cp -R Scenarios "$stage/Scenarios"
if [ -d Protos ]; then cp -R Protos "$stage/Protos"; fi
for license in LICENSE LICENSE.txt LICENSE.md COPYING; do
  if [ -f "$license" ]; then cp "$license" "$stage/"; fi
done

glibc=$(objdump -T "$stage/bin/chaos" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
cat > "$stage/INSTALL" <<TEXT
chaos $version for Linux $arch

  bin/chaos    the executable; the Swift runtime and Foundation are linked in, no Swift toolchain needed
  Scenarios/   example scenarios (start with quickstart.yaml)
  Protos/      the demo gRPC descriptor set that Scenarios/grpc*.yaml name
  README.md    where to start
  docs/        the documentation, one page per task (README.md links each)

Needs Linux $arch with glibc ${glibc:-(see objdump -T bin/chaos)} or newer, libpcap and zlib:
  Debian, Ubuntu 22.04:  sudo apt-get install -y libpcap0.8 zlib1g
  Ubuntu 24.04:          sudo apt-get install -y libpcap0.8t64 zlib1g
  Fedora, RHEL:          sudo dnf install -y libpcap zlib
(libstdc++ and libgcc_s, which every glibc distribution ships, too.)

Install:
  sha256sum -c $name.tar.gz.sha256
  tar -xzf $name.tar.gz
  sudo install -m 0755 $name/bin/chaos /usr/local/bin/chaos
  chaos --version

First run (90 s, the built-in reference pair through every kind of fault):
  cd $name && chaos run Scenarios/quickstart.yaml
TEXT

# 4. The tarball: sorted, owned by root, dated by the last commit, gzip without a timestamp.
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -C "$DIST_DIR" -cf - "$name" | gzip -n -9 > "$tarball"
(cd "$DIST_DIR" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

# 5. Checks.
# The libraries ldd lists: the C library family, libstdc++/libgcc_s (the statically linked Swift runtime needs the
# C++ runtime: the toolchain's static-stdlib-args.lnk links -lstdc++ dynamically), libpcap, libz, and libpcap's
# own dependencies (Debian's libpcap0.8 needs libdbus-1, which needs libsystemd, libcap, libgcrypt, liblzma, ...).
check_libraries() {
  local binary=$1 lib name arrow path rest pcap pcap_deps="" listing status=0
  command -v readelf >/dev/null 2>&1 || fail "readelf (binutils) is missing"
  while read -r lib; do
    case "$lib" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libgcc_s.so.* | libstdc++.so.* | \
      libpcap.so.* | libz.so.*) ;;
      *) echo "make-dist: direct dependency not allowed: $lib" >&2; status=1 ;;
    esac
  done < <(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
  listing=$(ldd "$binary") || fail "ldd $binary failed"
  pcap=$(awk '$1 ~ /^libpcap\.so/ && $2 == "=>" {print $3}' <<<"$listing")
  [ -n "$pcap" ] && [ -f "$pcap" ] && pcap_deps=$(ldd "$pcap" | awk '{print $1}')
  while read -r name arrow path rest; do
    [ -n "$name" ] || continue
    [ "$arrow" = "=>" ] || path=$name
    case "$name" in linux-vdso.so.* | linux-gate.so.*) continue ;; esac
    case "$path" in
      "not") echo "make-dist: not found: $name" >&2; status=1; continue ;;
      */swift/* | */usr/lib/swift*) echo "make-dist: from the Swift toolchain: $name => $path" >&2; status=1; continue ;;
    esac
    case "$(basename "$name")" in
      libswift* | libFoundation* | lib_Foundation* | libdispatch* | libBlocksRuntime* | libicu*)
        echo "make-dist: Swift runtime library linked dynamically: $name" >&2; status=1 ;;
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libgcc_s.so.* | libstdc++.so.* | \
      libpcap.so.* | libz.so.*) ;;
      *)
        if grep -qxF "$name" <<<"$pcap_deps"; then :; else
          echo "make-dist: library not allowed (and not one of libpcap's): $name => $path" >&2; status=1
        fi ;;
    esac
  done <<<"$listing"
  return $status
}

log "checking $tarball"
(cd "$DIST_DIR" && sha256sum --quiet -c "$name.tar.gz.sha256") || fail "sha256 of $tarball"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
unpacked="$work/$name"
for entry in bin/chaos README.md INSTALL Scenarios/quickstart.yaml; do
  [ -e "$unpacked/$entry" ] || fail "$name/$entry is missing from the tarball"
done
echo "ldd $name/bin/chaos:"
ldd "$unpacked/bin/chaos" | sed 's/ (0x[0-9a-f]*)$//'
check_libraries "$unpacked/bin/chaos" || fail "bin/chaos links libraries outside the allow-list (above)"
got=$(cd "$unpacked" && env -i ./bin/chaos --version) || fail "env -i bin/chaos --version failed"
[ "$got" = "$version" ] || [ "$(git describe --tags --always 2>/dev/null)" = "$version" ] ||
  fail "env -i bin/chaos --version printed '$got', expected '$version'"
validated=0
for scenario in "$unpacked"/Scenarios/*.yaml; do
  rel=${scenario#"$unpacked"/}
  (cd "$unpacked" && env -i ./bin/chaos validate "$rel" >/dev/null) || fail "env -i bin/chaos validate $rel failed"
  validated=$((validated + 1))
done
log "env -i bin/chaos --version: $got; env -i bin/chaos validate: $validated scenarios OK"

size=$(stat -c %s "$tarball")
echo "$tarball ($((size / 1024 / 1024)) MiB, $size bytes)"
cat "$tarball.sha256"
