#!/usr/bin/env bash
# Builds the chaos container image and leaves it as an OCI image layout in dist/image/chaos-<version>-oci/ (and the
# same as one file, dist/image/chaos-<version>-oci.tar, for `podman load -i`, `skopeo copy oci-archive:...`).
#
#   dist/make-image.sh [TARBALL]     (TARBALL: dist/chaos-<version>-linux-<arch>.tar.gz, made by make-dist.sh)
#
# Two ways, the first that works:
#   engine:        a working container engine (podman, buildah, or docker with a reachable daemon) builds
#                  Containerfile (Swift builder image, then debian:bookworm-slim), and its image is exported as an
#                  OCI layout. This needs the base images from a registry.
#   oci-assembly:  no engine (or the engine's build failed): dist/oci-image.py assembles an OCI layout from TARBALL
#                  with no engine: one layer with the binary, the scenarios, the uid 65532 user, /reports and
#                  /etc/chaos, /bin/sh, and the shared libraries ldd says the binary needs, copied from this host.
# It prints which way was taken ("image path: ..."). CHAOS_IMAGE_ENGINE=podman|buildah|docker|none picks one
# (then an engine's failure is not covered by the assembly). IMAGE_NAME (default ghcr.io/chaos-harness/chaos).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
IMAGE_NAME=${IMAGE_NAME:-ghcr.io/chaos-harness/chaos}
ENGINE=${CHAOS_IMAGE_ENGINE:-auto}
OUT_ROOT=dist/image

log() { echo "make-image: $*" >&2; }
fail() { echo "make-image: FAIL: $*" >&2; exit 1; }

tarball=${1:-}
if [ -z "$tarball" ]; then
  # shellcheck disable=SC2012
  tarball=$(ls -t dist/chaos-*-linux-"$(uname -m)".tar.gz 2>/dev/null | head -n 1 || true)
  [ -n "$tarball" ] || fail "no dist/chaos-*-linux-$(uname -m).tar.gz: run dist/make-dist.sh first (make dist)"
fi
[ -f "$tarball" ] || fail "no such tarball: $tarball"
base=$(basename "$tarball" .tar.gz)
[[ "$base" =~ ^chaos-(.+)-linux-[A-Za-z0-9_]+$ ]] || fail "$base is not named chaos-<version>-linux-<arch>"
version=${BASH_REMATCH[1]}
layout="$OUT_ROOT/chaos-$version-oci"
archive="$OUT_ROOT/chaos-$version-oci.tar"
mkdir -p "$OUT_ROOT"

# Which engine works (not only: is installed).
engine_works() {
  case "$1" in
    podman) command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1 ;;
    buildah) command -v buildah >/dev/null 2>&1 && buildah info >/dev/null 2>&1 ;;
    docker) command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}
engine=""
case "$ENGINE" in
  auto) for candidate in podman buildah docker; do
          if engine_works "$candidate"; then engine=$candidate; break; fi
        done ;;
  none) ;;
  podman | buildah | docker) engine_works "$ENGINE" || fail "CHAOS_IMAGE_ENGINE=$ENGINE does not work here"; engine=$ENGINE ;;
  *) fail "CHAOS_IMAGE_ENGINE must be auto, podman, buildah, docker or none" ;;
esac

# The build context: the files git knows (tracked, and new ones not ignored), so .build*/ and run folders stay out
# whatever the engine reads (docker reads no .containerignore).
build_with_engine() {
  local context tag="$IMAGE_NAME:$version" status=0
  context=$(mktemp -d)
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    if [ -e "$f" ]; then printf '%s\0' "$f"; fi
  done | tar --null -T - -cf - | tar -xf - -C "$context"
  rm -rf "$layout" "$archive"
  case "$engine" in
    podman)
      nice -n 19 podman build -f Containerfile -t "$tag" "$context" &&
        podman save --format oci-archive -o "$archive" "$tag" ;;
    buildah)
      nice -n 19 buildah build -f Containerfile -t "$tag" "$context" &&
        buildah push "$tag" "oci-archive:$archive:$version" ;;
    docker)
      nice -n 19 docker build -f Containerfile -t "$tag" "$context" &&
        docker save -o "$archive" "$tag" ;;   # Docker 25+ writes an OCI layout (index.json, blobs/)
  esac || status=1
  rm -rf "$context"
  [ "$status" = 0 ] || return 1
  mkdir -p "$layout" && tar -xf "$archive" -C "$layout"
  [ -f "$layout/index.json" ] || { log "$engine's export has no index.json (not an OCI layout)"; return 1; }
}

path=""
if [ -n "$engine" ]; then
  log "building Containerfile with $engine"
  if build_with_engine; then
    path="engine ($engine, Containerfile)"
  elif [ "$ENGINE" = auto ]; then
    log "$engine could not build the image (above: the base images need a registry); assembling the OCI layout instead"
  else
    fail "$engine could not build the image"
  fi
fi
if [ -z "$path" ]; then
  why=""
  for candidate in podman buildah docker; do
    if ! command -v "$candidate" >/dev/null 2>&1; then why="$why${why:+, }$candidate not installed"
    elif [ "$candidate" != "$engine" ]; then why="$why${why:+, }$candidate installed but '$candidate info' fails"; fi
  done
  [ -n "$engine" ] && why="$engine's build failed; $why"
  [ "$ENGINE" = none ] && why="CHAOS_IMAGE_ENGINE=none"
  log "assembling an OCI image layout from $tarball ($why)"
  python3 dist/oci-image.py "$tarball" "$layout" --name "$IMAGE_NAME"
  rm -f "$archive"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$layout" -cf "$archive" oci-layout index.json blobs
  path="oci-assembly ($why)"
fi

echo "image path: $path"
echo "image: $layout ($(du -sb "$layout" | cut -f1) bytes), $archive ($(stat -c %s "$archive") bytes)"
echo "tag: $IMAGE_NAME:$version"
echo "load it: podman load -i $archive  |  skopeo copy oci:$layout:$version docker-daemon:$IMAGE_NAME:$version"
