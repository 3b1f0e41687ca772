"""Make the local stack's base image from a debootstrapped root, reproducibly.

    python ci/base-image.py ROOTFS_TARBALL TAG [ARCH [TOOLCHAIN_TARBALL]]
                                                          make and load one platform's image
                                                          (with a toolchain: a second layer)
    python ci/base-image.py --index TAG MEMBER_TAG...     put an index of pushed images at TAG

Two runs on two machines that install the same Debian package versions give the same image id
and, pushed by the same engine version, the same digest: what a lock pins stays valid on a fresh
runner. What debootstrap leaves that depends on the machine or the day is made fixed first:
the host's /etc/hostname and /etc/resolv.conf (an engine mounts its own at run time),
/etc/shadow's "last changed" day, ldconfig's aux-cache (it records inode times); then the root
is written as a normalized layer (sorted, mtimes clamped, no bytecode) under a fixed config.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path

from xpu_release.image import layers
from xpu_release.image.engine import Engine
from xpu_release.image.normalize import config_bytes, iso, load_image
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.registry import DOCKER_LIST, Manifest, RegistryClient, sha256_digest

# assumed: the base's SOURCE_DATE_EPOCH, 2025-03-01T00:00:00Z (the first release it serves).
EPOCH = 1740787200
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def fixed(name: str, data: bytes) -> bytes | None:
    """What the base holds at ``name`` instead of ``data`` (None: left out)."""
    if name in ("etc/hostname", "etc/resolv.conf"):
        return b""
    if name == "var/cache/ldconfig/aux-cache":
        return None
    if name in ("etc/shadow", "etc/shadow-"):
        day = str(EPOCH // 86400)
        lines = []
        for line in data.decode().splitlines():
            fields = line.split(":")
            if len(fields) > 2 and fields[2]:
                fields[2] = day
            lines.append(":".join(fields))
        return "".join(line + "\n" for line in lines).encode()
    return data


FIXED = ("etc/hostname", "etc/resolv.conf", "var/cache/ldconfig/aux-cache", "etc/shadow", "etc/shadow-")


def fix_tarball(source: Path, dest: Path) -> None:
    with tarfile.open(source) as src, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as out:
        for m in src:
            name = m.name.removeprefix("./")
            if name not in FIXED or not m.isreg():
                fh = src.extractfile(m) if m.isreg() else None
                out.addfile(m, fh)
                continue
            fh = src.extractfile(m)
            assert fh is not None
            data = fixed(name, fh.read())
            if data is not None:
                m.size = len(data)
                out.addfile(m, io.BytesIO(data))


# The platforms the stack's base is made for, as an image config and an index entry write them.
PLATFORMS = {"amd64": {"architecture": "amd64", "os": "linux"},
             "arm64": {"architecture": "arm64", "os": "linux", "variant": "v8"}}  # fmt: skip


def main(tarball: str, tag: str, arch: str = "amd64", toolchain: str | None = None) -> None:
    # The amd64 image's config is what it was before arm64 was made too (its digest is pinned by
    # committed locks): arm64 adds its variant and names its debootstrap.
    how = "debootstrap " + ("" if arch == "amd64" else f"--arch={arch} ") + "--variant=minbase"
    made = f"{how} --include=python3,python3-venv bookworm (ci/local-stack.sh)"
    history = [{"created": iso(EPOCH), "created_by": made}]
    with tempfile.TemporaryDirectory(prefix="xpu-base-") as tmp_name:
        tmp = Path(tmp_name)
        raw = tmp / "raw.tar"
        fix_tarball(Path(tarball), raw)
        layer = tmp / "layer.tar"
        diff_ids = [layers.normalize_layer(raw, layer, EPOCH)]
        files = {diff_ids[0]: layer}
        if toolchain is not None:
            second = tmp / "toolchain.tar"
            diff_ids.append(layers.normalize_layer(Path(toolchain), second, EPOCH))
            files[diff_ids[1]] = second
            made = "g++, libpython3-dev and what they need, unpacked from bookworm main (ci/toolchain.py)"
            history.append({"created": iso(EPOCH), "created_by": made})
        raw.unlink()
        config = config_bytes(
            {
                **PLATFORMS[arch],
                "created": iso(EPOCH),
                "config": {"Env": [f"PATH={PATH}"], "Cmd": ["/bin/bash"]},
                "history": history,
                "rootfs": {"type": "layers", "diff_ids": diff_ids},
            }
        )
        load_image(Engine.connect(), tmp, config, diff_ids, files, tag)
    print(sha256_digest(config))


def _client(ref: str) -> tuple[RegistryClient, str, str]:
    """Our registry client for a plain-HTTP loopback registry's ``HOST/REPO:TAG`` (its answers
    bounded and checked as every client's), the repository and the tag."""
    host, _, path = ref.partition("/")
    repo, _, tag = path.rpartition(":")
    hub = Endpoint(registry="hub", role="base", region=None, host=host, namespace="", insecure=True)
    return RegistryClient(hub, None), repo, tag


def index(tag: str, members: list[str]) -> None:
    """Put a Docker manifest list at ``tag`` naming each member image (already pushed) with the
    platform its config says; print the list's digest."""
    entries = []
    for member in members:
        client, repo, ref = _client(member)
        manifest = client.get_manifest(repo, ref)
        if manifest is None:
            sys.exit(f"{member} is not served")
        config = json.loads(client.blob_bytes(repo, manifest.config_digest))
        platform = {k: config[k] for k in ("architecture", "os", "variant") if k in config}
        size = len(manifest.body)
        entries.append({"mediaType": manifest.media_type, "digest": manifest.digest, "size": size,
                        "platform": platform})  # fmt: skip
    body = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_LIST, "manifests": entries}, indent=3).encode()
    client, repo, ref = _client(tag)
    client.put_manifest(repo, ref, Manifest(digest=sha256_digest(body), media_type=DOCKER_LIST, body=body))
    print(sha256_digest(body))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--index"]:
        index(sys.argv[2], sys.argv[3:])
    else:
        main(*sys.argv[1:])
