"""A whole release without Docker: a fake engine that holds one built, smoke-tested image (its
layer already compressed into the publish spool, as our build leaves it), and three fake
registries (public and two VPC regions) that ask for credentials. Every stage runs for real from
`validate` to `record`; the fakes count what a release costs: throwaway containers (by purpose),
engine lookups, and each registry's token requests."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpu_release.image.engine import ImageInfo
from xpu_release.image.inputs import BuildInputs
from xpu_release.image.smoke import _mark_tested, tests_sha256
from xpu_release.labels import INPUTS_LABEL
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.codec import DEFAULT
from xpu_release.oci.members import Blob, CompressedMap, blob_file, spool_dir
from xpu_release.oci.store import remember_config
from xpu_release.settings import Settings, current, use

from ...conftest import copy_of_repository
from ..fake_registry import State, fake_registry

__all__ = ["REF", "World", "copy_of_repository", "world"]

ROOT = Path(__file__).resolve().parents[3]
REF = "pytorch-cpu-sdk:2.13.0"
DPKG = "os=debian-12\nbash\t5.2.15-2+b2\tamd64\tbash\t5.2.15-2\n"


def _layer() -> tuple[bytes, str, bytes]:
    """One layer: its tar, its diff_id and a gzip blob of it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("opt/hello.txt")
        data = b"hello\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return tar_bytes, "sha256:" + hashlib.sha256(tar_bytes).hexdigest(), gzip.compress(tar_bytes, mtime=0)


@dataclass
class FakeEngine:
    """The engine as a release sees it after `build` and `test`: one image, by tag and by id."""

    ref: str
    attrs: dict[str, Any]
    calls: Counter[str] = field(default_factory=Counter)

    @property
    def image_id(self) -> str:
        return str(self.attrs["Id"])

    def _known(self, ref: str) -> bool:
        return ref in (self.ref, self.image_id)

    def image(self, ref: str) -> ImageInfo | None:
        self.calls["image"] += 1
        return ImageInfo.from_attrs(self.attrs) if self._known(ref) else None

    def require_image(self, ref: str) -> ImageInfo:
        self.calls["image"] += 1
        assert self._known(ref), ref
        return ImageInfo.from_attrs(self.attrs)

    def inspect_raw(self, ref: str) -> dict[str, Any]:
        self.calls["inspect"] += 1
        assert self._known(ref), ref
        return self.attrs

    def output(self, image: str, argv: list[str], *, purpose: str) -> str:
        """A throwaway container: only the SBOM's dpkg query is expected here."""
        self.calls[f"container:{purpose}"] += 1
        assert purpose == "sbom", purpose
        return DPKG


@dataclass
class World:
    root: Path
    engine: FakeEngine
    registries: dict[str, State]  # endpoint name → the fake behind it
    override: Path
    advisories: Path
    summary: dict[str, Any] = field(default_factory=dict)  # the release's, once it ran


def built_image(root: Path, ref: str = REF) -> FakeEngine:
    """The engine after `build` and `test` of ``ref``: its layer compressed into the spool and
    remembered by diff_id (as our build leaves it), its config kept, its smoke test passed."""
    repo = Repo(root)
    spec = repo.load_ref(ref)
    inputs = BuildInputs.read(root, spec, load_registries(root)).digest
    _tar, diff_id, blob = _layer()
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    blob_file(spool_dir(), digest).write_bytes(blob)
    CompressedMap(DEFAULT).put(diff_id, Blob(digest=digest, size=len(blob), media_type=DEFAULT.media_type))
    labels = {INPUTS_LABEL: inputs}
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        },
        sort_keys=True,
    ).encode()
    image_id = remember_config(config)
    _mark_tested(spec, image_id, tests_sha256(root, spec), 1)
    attrs = {"Id": image_id, "RepoTags": [ref], "Config": {"Labels": labels}, "Size": len(blob),
             "RootFS": {"Type": "layers", "Layers": [diff_id]}}  # fmt: skip
    return FakeEngine(ref=ref, attrs=attrs)


@contextmanager
def world(repo: Path, tmp_path: Path) -> Iterator[World]:
    """``repo`` (the test's copy) with the locks of this repository, a cache of its own, the
    image built and tested, and three fake registries mapped by a registries override."""
    for lock in ROOT.glob("images/*/*/requirements.lock"):
        shutil.copy(lock, repo / lock.relative_to(ROOT))
    before = current()
    settings = use(Settings(cache=tmp_path / "cache"))
    engine = built_image(repo)
    advisories = tmp_path / "osv"
    advisories.mkdir()
    with three_registries(tmp_path / "local.yaml") as (override, registries):
        try:
            yield World(root=repo, engine=engine, override=override, advisories=advisories,
                        registries=registries)  # fmt: skip
        finally:
            use(before)
    assert settings.cache == tmp_path / "cache"


@contextmanager
def three_registries(override: Path) -> Iterator[tuple[Path, dict[str, State]]]:
    """Three fake registries (the public endpoint and two VPC regions) mapped by a registries
    override written at ``override``; endpoint name → the fake behind it."""
    with ExitStack() as stack:
        (a, sa), (b, sb), (c, sc) = (stack.enter_context(fake_registry()) for _ in range(3))
        override.write_text(
            "registries:\n"
            "  hub: {host: '127.0.0.1:1', insecure: true}\n"
            f"  public: {{host: '{a}', insecure: true}}\n"
            f"  vpc: {{hosts: {{cn-beijing: '{b}', cn-wulanchabu: '{c}'}}, insecure: true}}\n"
        )
        yield override, {"public": sa, "vpc/cn-beijing": sb, "vpc/cn-wulanchabu": sc}
