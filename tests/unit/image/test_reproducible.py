"""Reproducible images, the pure parts: a layer is a function of its files, a config of the
image (never of the build), the epoch of the manifest, and the lock pins the base by digest."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from xpu_release.errors import LockError
from xpu_release.image import layers
from xpu_release.image.build import source_date_epoch
from xpu_release.image.lock import Lock, check_base
from xpu_release.image.normalize import chain_ids, config_bytes, normalized_config
from xpu_release.manifest import Repo

EPOCH = 1740787200  # 2025-03-01T00:00:00Z
DIGEST = "sha256:" + "ab" * 32


def _tar(path: Path, entries: list[tuple[str, bytes | str | None, dict[str, object]]]) -> Path:
    """A layer tar: (name, bytes for a file / "->target" for a hard link / None for a dir, attrs)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, attrs in entries:
            info = tarfile.TarInfo(name)
            for key, value in attrs.items():
                setattr(info, key, value)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.LNKTYPE, data.removeprefix("->")
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _names(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return tar.getnames()


def test_the_same_files_give_the_same_layer_whatever_the_build_time_order_and_owner_names(
    tmp_path: Path,
) -> None:
    first = _tar(tmp_path / "a.tar", [
        ("opt/", None, {"mtime": 1_900_000_000, "mode": 0o755}),
        ("opt/b.py", b"b = 2\n", {"mtime": 1_900_000_001, "uname": "builder"}),
        ("opt/a.py", b"a = 1\n", {"mtime": 1_900_000_002}),
    ])  # fmt: skip
    second = _tar(tmp_path / "b.tar", [
        ("opt/a.py", b"a = 1\n", {"mtime": 1_950_000_000, "uname": "root", "gname": "root"}),
        ("opt/", None, {"mtime": 1_950_000_000, "mode": 0o755}),
        ("opt/b.py", b"b = 2\n", {"mtime": 1_950_000_000}),
    ])  # fmt: skip

    a = layers.normalize_layer(first, tmp_path / "a.norm", EPOCH)
    b = layers.normalize_layer(second, tmp_path / "b.norm", EPOCH)

    assert a == b
    assert (tmp_path / "a.norm").read_bytes() == (tmp_path / "b.norm").read_bytes()
    assert _names(tmp_path / "a.norm") == ["opt", "opt/a.py", "opt/b.py"]


def test_mtimes_are_clamped_to_the_epoch_and_older_ones_kept(tmp_path: Path) -> None:
    src = _tar(tmp_path / "a.tar", [
        ("old.txt", b"x", {"mtime": 1_600_000_000}),
        ("new.txt", b"y", {"mtime": 1_900_000_000}),
    ])  # fmt: skip
    layers.normalize_layer(src, tmp_path / "n.tar", EPOCH)

    with tarfile.open(tmp_path / "n.tar") as tar:
        times = {m.name: m.mtime for m in tar}
    assert times == {"new.txt": EPOCH, "old.txt": 1_600_000_000}


def test_compiled_bytecode_is_left_out(tmp_path: Path) -> None:
    src = _tar(tmp_path / "a.tar", [
        ("pkg/__init__.py", b"", {}),
        ("pkg/__pycache__/", None, {}),
        ("pkg/__pycache__/__init__.cpython-311.pyc", b"\x00\x01", {}),
        ("pkg/legacy.pyc", b"\x00", {}),
    ])  # fmt: skip
    layers.normalize_layer(src, tmp_path / "n.tar", EPOCH)

    assert _names(tmp_path / "n.tar") == ["pkg/__init__.py"]


def test_a_hard_link_never_comes_before_the_file_it_names(tmp_path: Path) -> None:
    # The builder wrote z/file first and a/link to it; sorted, a/link would precede its target.
    src = _tar(tmp_path / "a.tar", [
        ("z/file", b"shared", {"mode": 0o755}),
        ("a/link", "->z/file", {}),
    ])  # fmt: skip
    layers.normalize_layer(src, tmp_path / "n.tar", EPOCH)

    out = tmp_path / "out"
    with tarfile.open(tmp_path / "n.tar") as tar:
        members = {m.name: m for m in tar}
        tar.extractall(out, filter="tar")
    assert members["a/link"].isreg()
    assert members["z/file"].islnk()
    assert members["z/file"].linkname == "a/link"
    assert (out / "z" / "file").read_bytes() == b"shared"
    assert (out / "a" / "link").stat().st_ino == (out / "z" / "file").stat().st_ino


def test_owners_and_xattrs_are_kept(tmp_path: Path) -> None:
    cap = "SCHILY.xattr.security.capability"
    src = _tar(tmp_path / "a.tar", [
        ("bin/ping", b"elf", {"uid": 0, "gid": 0, "pax_headers": {cap: "x", "atime": "1.5"}}),
        ("var/mail", None, {"uid": 0, "gid": 8}),
    ])  # fmt: skip
    layers.normalize_layer(src, tmp_path / "n.tar", EPOCH)

    with tarfile.open(tmp_path / "n.tar") as tar:
        ping, mail = tar.getmember("bin/ping"), tar.getmember("var/mail")
    assert ping.pax_headers == {cap: "x"}
    assert (mail.uid, mail.gid) == (0, 8)
    assert mail.uname == mail.gname == ""


def test_compare_names_the_files_that_differ_and_how(tmp_path: Path) -> None:
    a = _tar(tmp_path / "a.tar", [("etc/stamp", b"built at 10:00", {}), ("etc/same", b"x", {})])
    b = _tar(tmp_path / "b.tar", [("etc/stamp", b"built at 10:01", {}), ("etc/same", b"x", {}),
                                  ("etc/extra", b"", {})])  # fmt: skip

    found = layers.compare(a, b)

    assert found[0] == "only in the second build: /etc/extra"
    assert found[1].startswith("/etc/stamp: sha256: ")
    assert len(found) == 2


RAW_CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "created": "2026-12-02T18:00:00.123456789Z",
    "container": "4f1c…",
    "docker_version": "20.10.24+dfsg1",
    "container_config": {"Hostname": "4f1c", "Cmd": ["/bin/sh", "-c", "#(nop) LABEL a=b"]},
    "config": {
        "Hostname": "",
        "Image": "sha256:" + "cd" * 32,
        "Env": ["PATH=/usr/bin"],
        "Labels": {"org.opencontainers.image.version": "25.03"},
        "Cmd": ["/bin/bash"],
        "AttachStdin": False,
    },
    "history": [
        {"created": "2025-03-01T00:00:00Z", "created_by": "debootstrap"},
        {
            "created": "2026-12-02T17:59:00Z",
            "created_by": "/bin/sh -c #(nop) COPY dir:" + "ef" * 32 + " in /",
        },
        {"created": "2026-12-02T17:59:01Z", "created_by": "/bin/sh -c #(nop)  ENV A=1", "empty_layer": True},
    ],
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "00" * 32, "sha256:" + "11" * 32]},
}


def test_the_config_keeps_the_image_and_drops_the_build() -> None:
    diffs = ["sha256:" + "00" * 32, "sha256:" + "22" * 32]

    config = normalized_config(RAW_CONFIG, diffs, EPOCH)

    assert sorted(config) == ["architecture", "config", "created", "history", "os", "rootfs"]
    assert config["created"] == "2025-03-01T00:00:00Z"
    assert config["config"] == {
        "Env": ["PATH=/usr/bin"],
        "Labels": {"org.opencontainers.image.version": "25.03"},
        "Cmd": ["/bin/bash"],
    }
    assert [h["created"] for h in config["history"]] == ["2025-03-01T00:00:00Z"] * 3
    assert config["history"][1]["created_by"] == "/bin/sh -c #(nop) COPY dir:- in /"
    assert config["history"][2]["empty_layer"] is True
    assert config["rootfs"]["diff_ids"] == diffs


def test_two_builds_that_differ_only_in_time_and_place_give_one_config() -> None:
    other = {
        **RAW_CONFIG,
        "created": "2027-01-01T00:00:00Z",
        "container": "9a9a",
        "docker_version": "27.0.1",
        "config": {**RAW_CONFIG["config"], "Image": "sha256:" + "99" * 32, "Hostname": "ci-runner-7"},  # type: ignore[dict-item]
    }
    diffs = ["sha256:" + "00" * 32]

    assert config_bytes(normalized_config(RAW_CONFIG, diffs, EPOCH)) == config_bytes(
        normalized_config(other, diffs, EPOCH)
    )


def test_chain_ids_follow_the_oci_definition() -> None:
    import hashlib

    a, b = "sha256:" + "aa" * 32, "sha256:" + "bb" * 32

    assert chain_ids([a, b]) == [a, "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest()]


@pytest.mark.parametrize(
    ("version", "expected"),
    [("25.03", "2025-03-01"), ("25.12", "2025-12-01"), ("26.01.1", "2026-01-01"), ("2.13.0", "1970-01-01"),
     ("1.0", "1970-01-01")],
)  # fmt: skip
def test_the_epoch_is_a_fact_of_the_version(repo: Path, version: str, expected: str) -> None:
    from datetime import UTC, datetime

    spec = replace(Repo(repo).load_ref("training-cpu-pytorch:25.03"), version=version)

    assert datetime.fromtimestamp(source_date_epoch(spec), UTC).strftime("%Y-%m-%d") == expected


LOCK = """\
# Generated by `xpu-release lock demo:1.0` from manifests/demo/1.0.yaml — do not edit.
# pins-sha256: {pins}
# python: 3.11, binary wheels only
# base: debian/bookworm-python:12@{digest}

# layer six: six==1.16.0
# url: https://example.invalid/six-1.16.0-py2.py3-none-any.whl
six==1.16.0 --hash=sha256:{sha}
"""


def test_a_lock_records_the_base_digest() -> None:
    lock = Lock.parse(LOCK.format(pins="p" * 8, digest=DIGEST, sha="0" * 64), "x.lock")

    assert lock.base == f"debian/bookworm-python:12@{DIGEST}"
    assert lock.base_digest == DIGEST


@pytest.mark.parametrize(
    "bad", ["# base: debian/bookworm-python:12\n", "# base: debian/bookworm-python:12@sha256:abc\n", ""]
)
def test_a_lock_without_a_pinned_base_is_refused(bad: str) -> None:
    text = LOCK.format(pins="p" * 8, digest=DIGEST, sha="0" * 64)
    text = text.replace(f"# base: debian/bookworm-python:12@{DIGEST}\n", bad)

    with pytest.raises(LockError, match=r"x\.lock"):
        Lock.parse(text, "x.lock")


def test_lock_check_says_when_the_base_tag_has_moved(repo: Path) -> None:
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.03")
    lock = Lock(pins_sha256="p", layers=(), base=f"debian/bookworm-python:12@{DIGEST}")
    moved = "sha256:" + "cd" * 32

    check_base(lock, spec, DIGEST, "x.lock")  # unchanged: no error
    with pytest.raises(LockError) as info:
        check_base(lock, spec, moved, "x.lock")

    assert "has moved" in info.value.message
    assert DIGEST in info.value.message
    assert moved in info.value.message
    assert "xpu-release lock training-cpu-pytorch:25.03" in info.value.message
