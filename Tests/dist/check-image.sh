#!/usr/bin/env bash
# Checks an OCI image layout of chaos (dist/make-image.sh's dist/image/chaos-<version>-oci/), without a container
# engine:
#   Tests/dist/check-image.sh dist/image/chaos-<version>-oci
# 1. oci-layout and index.json are there; every descriptor (index -> manifest -> config and layers) names a blob
#    whose sha256 and size match; the config's diff_ids are the sha256 of the uncompressed layers;
# 2. the config says Entrypoint ["chaos"] and User 65532 (uid, or uid:gid), for this machine's architecture;
# 3. the layers unpack (in order, whiteouts applied) into a temporary root file system, where /etc/passwd has uid
#    65532, /reports and /etc/chaos belong to 65532, and `chaos` found on the config's PATH runs with chroot as uid
#    65532 with only the config's environment: `chaos --version`, `chaos validate` of the image's quickstart
#    scenario, and `/bin/sh -c 'chaos --version'` (chaos run starts a pair with /bin/sh; the merge Job uses sh);
#    so they run from the image's own files, not the host's.
# 4. If skopeo or umoci are installed, they read the layout too (not required).
# Needs root (chroot) and python3.
set -euo pipefail

fail() { echo "check-image: FAIL: $*" >&2; exit 1; }
[ $# -eq 1 ] || { echo "usage: $0 OCI_LAYOUT_DIR" >&2; exit 2; }
layout=$(realpath "$1")
[ -d "$layout" ] || fail "no such folder: $1"
[ "$(id -u)" = 0 ] || fail "needs root (chroot)"
command -v python3 >/dev/null 2>&1 || fail "needs python3"

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
rootfs="$work/rootfs"
mkdir "$rootfs"

# 1-3 (the file system part): python3 checks the layout and unpacks the layers; it prints KEY=VALUE lines.
python3 - "$layout" "$rootfs" "$(uname -m)" >"$work/facts" <<'PY'
import gzip, hashlib, json, os, shutil, stat, sys, tarfile

layout, rootfs, machine = sys.argv[1:4]
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
INDEX = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
CONFIG = ("application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json")

def die(message):
    print(f"check-image: FAIL: {message}", file=sys.stderr)
    sys.exit(1)

def blob_path(descriptor):
    algorithm, _, hexdigest = descriptor["digest"].partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64:
        die(f"unsupported digest {descriptor['digest']}")
    return os.path.join(layout, "blobs", "sha256", hexdigest), hexdigest

def verified(descriptor, what):
    """The blob's bytes, after checking its sha256 and size against the descriptor."""
    path, hexdigest = blob_path(descriptor)
    if not os.path.isfile(path):
        die(f"{what}: blob {descriptor['digest']} is missing")
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    if digest.hexdigest() != hexdigest:
        die(f"{what}: sha256 of the blob is {digest.hexdigest()}, the descriptor says {hexdigest}")
    if size != descriptor["size"]:
        die(f"{what}: the blob is {size} bytes, the descriptor says {descriptor['size']}")
    print(f"check-image: {what}: {descriptor['digest']} {size} bytes: digest and size OK", file=sys.stderr)
    return path

try:
    with open(os.path.join(layout, "oci-layout")) as handle:
        version = json.load(handle)["imageLayoutVersion"]
except (OSError, KeyError, ValueError) as error:
    die(f"oci-layout: {error}")
if version != "1.0.0":
    die(f"imageLayoutVersion {version}")
with open(os.path.join(layout, "index.json")) as handle:
    index = json.load(handle)

def pick_manifest(index, what):
    candidates = index.get("manifests") or die(f"{what}: no manifests")
    for descriptor in candidates:
        platform = descriptor.get("platform")
        if platform and (platform.get("os"), platform.get("architecture")) != ("linux", GOARCH):
            continue
        if descriptor.get("mediaType") in INDEX:
            with open(verified(descriptor, f"{what} -> index")) as handle:
                return pick_manifest(json.load(handle), f"{what} -> index")
        if descriptor.get("mediaType") in MANIFEST:
            return descriptor
    die(f"{what}: no image manifest for linux/{GOARCH}")

descriptor = pick_manifest(index, "index.json")
with open(verified(descriptor, "manifest")) as handle:
    manifest = json.load(handle)
if manifest.get("config", {}).get("mediaType") not in CONFIG:
    die(f"config mediaType {manifest.get('config', {}).get('mediaType')}")
with open(verified(manifest["config"], "config")) as handle:
    config = json.load(handle)
layers = manifest.get("layers") or die("the manifest has no layers")
diff_ids = config.get("rootfs", {}).get("diff_ids", [])
if len(diff_ids) != len(layers):
    die(f"{len(layers)} layers but {len(diff_ids)} diff_ids in the config")
if config.get("os") != "linux" or config.get("architecture") != GOARCH:
    die(f"the image is for {config.get('os')}/{config.get('architecture')}, this machine is linux/{GOARCH}")

settings = config.get("config") or {}
entrypoint, user = settings.get("Entrypoint"), str(settings.get("User", ""))
if entrypoint != ["chaos"]:
    die(f"Entrypoint is {entrypoint!r}, expected ['chaos']")
if user.split(":")[0] != "65532":
    die(f"User is {user!r}, expected 65532")
print(f"check-image: config: Entrypoint {entrypoint}, User {user}, Cmd {settings.get('Cmd')}, "
      f"WorkingDir {settings.get('WorkingDir')}", file=sys.stderr)

def opener(path, media_type):
    with open(path, "rb") as handle:
        magic = handle.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if "zstd" in media_type:
        die("zstd layers are not supported by this checker")
    return open(path, "rb")

def inside(path):
    """True when path (after every link inside rootfs) stays inside rootfs."""
    real = os.path.realpath(path)
    return real == rootfs or real.startswith(rootfs + os.sep)

def remove(path):
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)

for number, (layer, diff_id) in enumerate(zip(layers, diff_ids), 1):
    path = verified(layer, f"layer {number}")
    uncompressed = hashlib.sha256()
    with opener(path, layer.get("mediaType", "")) as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            uncompressed.update(chunk)
    if f"sha256:{uncompressed.hexdigest()}" != diff_id:
        die(f"layer {number}: uncompressed sha256:{uncompressed.hexdigest()}, the config's diff_id is {diff_id}")
    print(f"check-image: layer {number}: diff_id {diff_id} OK", file=sys.stderr)
    with opener(path, layer.get("mediaType", "")) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            name = os.path.normpath(member.name.lstrip("/"))
            if name == "." or name.startswith(".."):
                continue
            directory, base = os.path.split(name)
            target_dir = os.path.join(rootfs, directory)
            if not inside(target_dir):
                die(f"layer {number}: {member.name} leads outside the image")
            if base == ".wh..wh..opq":          # opaque directory: drop what lower layers put there
                for entry in os.listdir(target_dir) if os.path.isdir(target_dir) else []:
                    remove(os.path.join(target_dir, entry))
                continue
            if base.startswith(".wh."):           # whiteout: delete the named file of a lower layer
                victim = os.path.join(target_dir, base[len(".wh."):])
                if os.path.lexists(victim):
                    remove(victim)
                continue
            destination = os.path.join(rootfs, name)
            if os.path.lexists(destination) and not (member.isdir() and os.path.isdir(destination)
                                                     and not os.path.islink(destination)):
                remove(destination)
            if member.islnk():
                member.linkname = os.path.normpath(member.linkname.lstrip("/"))
            if hasattr(tarfile, "fully_trusted_filter"):  # the path checks are done above
                tar.extract(member, rootfs, set_attrs=True, numeric_owner=True, filter="fully_trusted")
            else:
                tar.extract(member, rootfs, set_attrs=True, numeric_owner=True)
            if member.isdir():  # extract leaves a directory's own mode to the end; set it now
                os.chmod(destination, member.mode)

env = [e for e in settings.get("Env", []) if "=" in e]
path_value = next((e.split("=", 1)[1] for e in env if e.startswith("PATH=")), "/usr/local/bin:/usr/bin:/bin")
found = next((f"{d}/chaos" for d in path_value.split(":")
              if os.path.isfile(os.path.join(rootfs, d.lstrip("/"), "chaos"))), "")
if not found:
    die(f"no chaos on the config's PATH ({path_value}) in the unpacked image")
print(f"ENTRYPOINT_PATH={found}")
print(f"USER={user}")
print(f"WORKDIR={settings.get('WorkingDir') or '/'}")
print("ENV=" + json.dumps(env))
print(f"LAYERS={len(layers)}")
print(f"REF={descriptor.get('annotations', {}).get('org.opencontainers.image.ref.name', '')}")
PY

fact() { sed -n "s/^$1=//p" "$work/facts"; }
entry=$(fact ENTRYPOINT_PATH)
user=$(fact USER)
ref=$(fact REF)
[[ "$user" == *:* ]] || user="$user:$(awk -F: -v u="$user" '$3 == u {print $4}' "$rootfs/etc/passwd")"
mapfile -t image_env < <(python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$(fact ENV)")

# The image's own user and folders.
grep -q '^[^:]*:[^:]*:65532:' "$rootfs/etc/passwd" || fail "/etc/passwd of the image has no uid 65532"
for d in reports etc/chaos; do
  [ -d "$rootfs/$d" ] || fail "/$d is missing"
  [ "$(stat -c %u "$rootfs/$d")" = 65532 ] || fail "/$d belongs to uid $(stat -c %u "$rootfs/$d"), not 65532"
done
echo "check-image: /etc/passwd has uid 65532; /reports and /etc/chaos belong to 65532"

# Run it from the image's files: chroot as the image's user with only the image's environment.
# The Swift runtime reads its arguments from /proc/self/cmdline, and chaos run's pair needs /dev/null: as a container
# runtime does, give the chroot a /proc of its own (a new pid and mount namespace, so nothing stays mounted) and /dev.
chroot_bin=$(command -v chroot) || fail "needs chroot (coreutils)"
command -v unshare >/dev/null 2>&1 || fail "needs unshare (util-linux)"
mkdir -p "$rootfs/proc" "$rootfs/dev"
# shellcheck disable=SC2016
image_runner=(unshare --mount --pid --fork --mount-proc="$rootfs/proc"
              /bin/sh -c 'mount --rbind /dev "$0/dev" && exec "$@"' "$rootfs"
              env -i "${image_env[@]}" "$chroot_bin" --userspec="$user" "$rootfs")
in_image() { (cd "$rootfs" && "${image_runner[@]}" "$@"); }
version=$(in_image "$entry" --version) || fail "chroot: chaos --version failed"
[ -z "$ref" ] || [ "$ref" = "$version" ] || fail "chaos --version says $version, the image's tag is $ref"
echo "check-image: chroot $rootfs (uid $user) $entry --version: $version"
scenario=/usr/local/share/chaos/Scenarios/quickstart.yaml
if [ -f "$rootfs$scenario" ]; then
  in_image "$entry" validate "$scenario" >/dev/null || fail "chroot: chaos validate $scenario failed"
  echo "check-image: chroot ... chaos validate $scenario: OK"
else
  echo "check-image: the image ships no Scenarios/quickstart.yaml, validate not run"
fi
shell_version=$(in_image /bin/sh -c 'chaos --version') || fail "chroot: /bin/sh -c 'chaos --version' failed"
[ "$shell_version" = "$version" ] || fail "/bin/sh -c 'chaos --version' printed $shell_version"
echo "check-image: chroot ... /bin/sh -c 'chaos --version': $shell_version"
for d in /reports /etc/chaos; do
  in_image /bin/sh -c ": > $d/.written-by-65532" || fail "uid $user cannot write $d"
  rm -f "$rootfs$d/.written-by-65532"
done
echo "check-image: uid $user writes /reports and /etc/chaos"

# A 5-second run inside the image: the built-in pair started by chaos run through /bin/sh, the run folder in /reports.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
listen=$(free_port)
upstream=$(free_port)
while [ "$upstream" = "$listen" ]; do upstream=$(free_port); done
cat >"$rootfs/tmp/smoke.yaml" <<YAML
name: image-smoke
duration: 5s
seed: 11
proxies:
  - {name: stream, listen: "127.0.0.1:$listen", upstream: "127.0.0.1:$upstream"}
pair:
  server:
    run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 20 --log {run_dir}/server.jsonl
    ready: tcp 127.0.0.1:{upstream.port}
  client:
    run: chaos demo client --connect 127.0.0.1:{listen.port} --stream c{index} --rate 20 --log {run_dir}/client-{index}.jsonl --state {run_dir}/client-{index}.state
    count: 1
protocol: {framing: lines, format: json, seq: seq, stream: stream, id: id, ack: ack, ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}}
faults:
  - disconnect: {at: 2s, mode: reset}
expect: {lost: 0, duplicated: 0}
YAML
chmod 0644 "$rootfs/tmp/smoke.yaml"
run_status=0
(cd "$rootfs" && timeout 120 "${image_runner[@]}" "$entry" run /tmp/smoke.yaml --out /reports/smoke) \
  >"$work/run.out" 2>&1 || run_status=$?
if [ "$run_status" != 0 ]; then
  cat "$work/run.out" >&2
  tail -n 20 "$rootfs"/reports/smoke/*.err >&2 2>/dev/null || true
  fail "chroot: chaos run /tmp/smoke.yaml exited $run_status, expected 0"
fi
grep -q '^verdict: PASS' "$work/run.out" || { cat "$work/run.out" >&2; fail "chaos run in the image printed no 'verdict: PASS'"; }
[ "$(stat -c %u "$rootfs/reports/smoke/report.json")" = 65532 ] || fail "the run folder is not uid 65532's"
echo "check-image: chroot ... chaos run (5 s, demo server + client through /bin/sh, a reset) --out /reports/smoke: exit 0, verdict PASS"

# Other readers of the layout, when installed.
if command -v skopeo >/dev/null 2>&1; then
  skopeo inspect --config "oci:$layout${ref:+:$ref}" >"$work/skopeo.json" || fail "skopeo inspect oci:$layout failed"
  echo "check-image: skopeo inspect --config: $(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["config"]; print("Entrypoint", c.get("Entrypoint"), "User", c.get("User"))' "$work/skopeo.json")"
else
  echo "check-image: skopeo not installed, not used"
fi
if command -v umoci >/dev/null 2>&1 && [ -n "$ref" ]; then
  umoci stat --image "$layout:$ref" >/dev/null || fail "umoci stat $layout:$ref failed"
  echo "check-image: umoci stat --image $layout:$ref: OK"
else
  echo "check-image: umoci not installed (or no ref name), not used"
fi
echo "check-image: OK $layout ($(fact LAYERS) layer(s), $(du -sb "$layout" | cut -f1) bytes)"
