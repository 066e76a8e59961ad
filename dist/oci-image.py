#!/usr/bin/env python3
"""Assembles an OCI image layout of chaos from a release tarball, without a container engine.

    python3 dist/oci-image.py dist/chaos-<version>-linux-<arch>.tar.gz OUT_DIR [--name ghcr.io/chaos-harness/chaos]

The image has one layer, the same file system the Containerfile's image has where chaos looks:
  /usr/local/bin/chaos, /usr/local/share/chaos/{Scenarios,Protos,README.md,docs,INSTALL},
  /etc/passwd and /etc/group with root and chaos (65532:65532), /etc/nsswitch.conf,
  /reports and /etc/chaos owned by 65532, /tmp (1777),
and, since debian:bookworm-slim cannot be pulled here, the shared libraries that `ldd` says the binary and /bin/sh
need (libc, the loader, libstdc++, libgcc_s, libm, libpcap and its own dependencies, zlib), copied from this host
with the symbolic links on their paths (/lib -> usr/lib, the loader's link), plus /bin/sh (dash): `chaos run` starts
a scenario's pair with /bin/sh -c, and deploy/kubernetes/merge-job runs a shell.

Writes OUT_DIR/oci-layout, OUT_DIR/index.json and OUT_DIR/blobs/sha256/{layer, config, manifest}: the layer is a
gzip-compressed tar, the config says Entrypoint ["chaos"], User 65532:65532, the manifest names both with their
sha256 digests and sizes, and index.json names the manifest with the tag (the version) in
org.opencontainers.image.ref.name. Entries are sorted and dated by the tarball's own dates, so the same tarball on
the same host gives the same digests.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
UID = GID = 65532


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ldd_paths(binary):
    """The files ldd resolves for binary (library paths and the loader), in ldd's order."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        words = line.split()
        if not words:
            continue
        if "=>" in words:
            target = words[words.index("=>") + 1]
            if target == "not":
                sys.exit(f"oci-image: ldd {binary}: {words[0]} not found")
            paths.append(target)
        elif words[0].startswith("/"):
            paths.append(words[0])  # the loader
    return paths


class Layer:
    """A tar layer built in memory order; every path is added once, parents first."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}  # path without leading slash -> (TarInfo, bytes source path or None)

    def _info(self, name, kind, mode, uid=0, gid=0):
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = mode
        info.uid, info.gid = uid, gid
        info.uname = info.gname = ""
        info.mtime = self.mtime
        return info

    def directory(self, name, mode=0o755, uid=0, gid=0):
        name = name.strip("/")
        if not name:
            return
        self._parents(name)
        existing = self.entries.get(name)
        if existing and existing[0].type != tarfile.DIRTYPE:
            return  # a symlink (lib -> usr/lib) already stands there
        self.entries[name] = (self._info(name, tarfile.DIRTYPE, mode, uid, gid), None)

    def _parents(self, name):
        parent = os.path.dirname(name)
        if parent and parent not in self.entries:
            self.directory(parent)

    def file_bytes(self, name, data, mode=0o644):
        name = name.strip("/")
        self._parents(name)
        info = self._info(name, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.entries[name] = (info, data)

    def file_from(self, name, source, mode=None):
        name = name.strip("/")
        self._parents(name)
        st = os.stat(source)
        info = self._info(name, tarfile.REGTYPE, stat.S_IMODE(st.st_mode) if mode is None else mode)
        info.size = st.st_size
        self.entries[name] = (info, source)

    def symlink(self, name, target):
        name = name.strip("/")
        self._parents(name)
        info = self._info(name, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.entries[name] = (info, None)

    def host_path(self, path):
        """Adds host file `path` at the same path, with every symbolic link met on the way (as links)."""
        parts = [p for p in path.split("/") if p]
        current = ""
        for index, part in enumerate(parts):
            current = current + "/" + part
            if os.path.islink(current):
                target = os.readlink(current)
                if current.strip("/") not in self.entries:
                    self.symlink(current, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                rest = "/".join(parts[index + 1:])
                self.host_path(resolved + ("/" + rest if rest else ""))
                return
            if index < len(parts) - 1:
                if current.strip("/") not in self.entries:
                    self.directory(current)
            else:
                if not os.path.isfile(current):
                    sys.exit(f"oci-image: {current} is not a regular file")
                self.file_from(current, current)

    def write(self, out):
        """Writes the tar (sorted by path) to the binary stream out."""
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self.entries):
                info, source = self.entries[name]
                if info.type == tarfile.REGTYPE:
                    if isinstance(source, bytes):
                        tar.addfile(info, io.BytesIO(source))
                    else:
                        with open(source, "rb") as handle:
                            tar.addfile(info, handle)
                else:
                    tar.addfile(info)


class HashingWriter:
    """A write-only stream that hashes and counts what passes through to `inner`."""

    def __init__(self, inner):
        self.inner, self.hash, self.size = inner, hashlib.sha256(), 0

    def write(self, data):
        self.hash.update(data)
        self.size += len(data)
        return self.inner.write(data)

    def flush(self):
        self.inner.flush()


def write_blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as handle:
        handle.write(data)
    return digest, len(data)


def canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tarball")
    parser.add_argument("out")
    parser.add_argument("--name", default="ghcr.io/chaos-harness/chaos")
    args = parser.parse_args()

    base = os.path.basename(args.tarball)
    match = re.fullmatch(r"chaos-(.+)-linux-([A-Za-z0-9_]+)\.tar\.gz", base)
    if not match:
        sys.exit(f"oci-image: {base} is not named chaos-<version>-linux-<arch>.tar.gz")
    version, arch = match.groups()
    if arch != os.uname().machine:
        sys.exit(f"oci-image: the tarball is for {arch}; the libraries are copied from this {os.uname().machine} host")

    work = tempfile.mkdtemp(prefix="chaos-oci-")
    try:
        with tarfile.open(args.tarball) as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(work, filter="tar")
            else:
                tar.extractall(work)
        top = os.path.join(work, base[: -len(".tar.gz")])
        binary = os.path.join(top, "bin", "chaos")
        mtime = int(os.stat(binary).st_mtime)
        layer = Layer(mtime)

        for name in ["usr", "usr/local", "usr/local/bin", "usr/local/share", "etc"]:
            layer.directory(name)
        layer.file_from("usr/local/bin/chaos", binary, mode=0o755)
        share = "usr/local/share/chaos"
        for item in ["Scenarios", "Protos", "README.md", "docs", "INSTALL", "LICENSE"]:
            source = os.path.join(top, item)
            if os.path.isdir(source):
                for root, dirs, files in os.walk(source):
                    dirs.sort()
                    rel = os.path.relpath(root, top)
                    layer.directory(f"{share}/{rel}")
                    for file in sorted(files):
                        layer.file_from(f"{share}/{rel}/{file}", os.path.join(root, file), mode=0o644)
            elif os.path.isfile(source):
                layer.file_from(f"{share}/{item}", source, mode=0o644)

        layer.file_bytes("etc/passwd", b"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                       b"chaos:x:65532:65532:chaos:/tmp:/usr/sbin/nologin\n")
        layer.file_bytes("etc/group", b"root:x:0:\nchaos:x:65532:\n")
        layer.file_bytes("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")
        layer.directory("etc/chaos", 0o755, UID, GID)
        layer.directory("reports", 0o755, UID, GID)
        layer.directory("tmp", 0o1777)
        layer.directory("root", 0o700)
        for mount_point in ["proc", "dev", "sys"]:  # the runtime mounts them; the Swift runtime reads /proc/self
            layer.directory(mount_point, 0o555 if mount_point != "dev" else 0o755)

        # /bin/sh and the libraries, at the host's paths with the host's links (merged /usr: /bin -> usr/bin, ...).
        shell = os.path.realpath("/bin/sh")
        libraries = []
        for path in ldd_paths(binary) + ldd_paths(shell):
            if path not in libraries:
                libraries.append(path)
        for path in libraries:
            layer.host_path(path)
        layer.host_path("/bin/sh")  # with the links on its way: /bin -> usr/bin, sh -> dash

        # The blobs.
        if os.path.exists(args.out):
            shutil.rmtree(args.out)
        blobs = os.path.join(args.out, "blobs", "sha256")
        os.makedirs(blobs)
        partial = os.path.join(blobs, "layer.partial")
        with open(partial, "wb") as raw:
            compressed = HashingWriter(raw)
            with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=6) as gz:
                uncompressed = HashingWriter(gz)
                layer.write(uncompressed)
        layer_digest, layer_size = compressed.hash.hexdigest(), compressed.size
        diff_id = uncompressed.hash.hexdigest()
        os.rename(partial, os.path.join(blobs, layer_digest))

        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
        labels = {
            "org.opencontainers.image.title": "chaos",
            "org.opencontainers.image.description": "A network chaos test harness for real-time client/server pairs",
            "org.opencontainers.image.version": version,
        }
        config = {
            "architecture": GOARCH.get(arch, arch),
            "os": "linux",
            "created": created,
            "config": {
                "User": f"{UID}:{GID}",
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"],
                "Entrypoint": ["chaos"],
                "Cmd": ["--help"],
                "WorkingDir": "/reports",
                "Labels": labels,
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [{"created": created, "created_by": f"dist/make-image.sh: OCI assembly from {base} "
                                                          f"and this host's libraries"}],
        }
        config_digest, config_size = write_blob(blobs, canonical_json(config))
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": f"sha256:{config_digest}", "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": f"sha256:{layer_digest}", "size": layer_size}],
            "annotations": {"org.opencontainers.image.created": created, **labels},
        }
        manifest_digest, manifest_size = write_blob(blobs, canonical_json(manifest))
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": f"sha256:{manifest_digest}",
                "size": manifest_size,
                "platform": {"architecture": GOARCH.get(arch, arch), "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": version,
                                "io.containerd.image.name": f"{args.name}:{version}"},
            }],
        }
        with open(os.path.join(args.out, "index.json"), "wb") as handle:
            handle.write(canonical_json(index))
        with open(os.path.join(args.out, "oci-layout"), "wb") as handle:
            handle.write(canonical_json({"imageLayoutVersion": "1.0.0"}))

        print(f"layer      sha256:{layer_digest} {layer_size} bytes (uncompressed sha256:{diff_id})")
        print(f"config     sha256:{config_digest} {config_size} bytes")
        print(f"manifest   sha256:{manifest_digest} {manifest_size} bytes")
        print(f"libraries  {' '.join(libraries)}")
        print(f"shell      /bin/sh -> {shell}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
