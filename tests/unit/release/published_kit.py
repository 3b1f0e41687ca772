"""A published world for ``watch`` and ``patch``, with no engine: a copy of this repository (its
manifests and committed locks), an in-process registry that serves its releases as a user pulls
them (the version tag, the SBOM attached by digest) and the base image's tag, a registries file
pointing every registry there, and OSV records written by the test."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from xpu_release.evidence.attachment import Attachment
from xpu_release.evidence.osv import Advisories
from xpu_release.evidence.referrers import attach
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import Endpoint, load_registries
from xpu_release.oci.credentials import CredentialStore
from xpu_release.oci.registry import Manifest, RegistryClient, RetryPolicy, sha256_digest
from xpu_release.release.watching.published import Reader
from xpu_release.release.watching.watch import Watcher
from xpu_release.settings import Settings

from ..fake_registry import State, fake_registry
from ..helpers import write_manifest

ROOT = Path(__file__).resolve().parents[3]
FAST = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, timeout=10.0)
NS = "egslingjun"  # the public and VPC namespace of registries.yaml
SDK, CPU = "pytorch-cpu-sdk", "training-cpu-pytorch"
BASE = "debian/bookworm-python-cxx"  # the SDK's base (manifests/pytorch-cpu-sdk)


@dataclass
class World:
    root: Path
    registries: Path  # the override file
    host: str
    state: State
    osv: Path  # the advisories folder
    client: RegistryClient  # what the test uses to publish
    spool: Path  # where attach() writes the blobs it sends
    calendar: Calendar | None = None  # the day it is for the command line, when a test says

    def publish(self, image: str, version: str, sbom: bytes | None, *, salt: str = "") -> str:
        """``image:version`` served at its version tag with ``sbom`` attached (None: none)."""
        manifest = empty_image({"image": image, "version": version, "salt": salt})
        repo = f"{NS}/{image}"
        self.client.put_manifest(repo, manifest.digest, manifest)
        if sbom is not None:
            attach(
                self.client,
                repo,
                manifest,
                [Attachment(kind="sbom", payload=sbom)],
                created="2025-03-01T00:00:00Z",
                spool=self.spool,
            )
        self.client.put_manifest(repo, version, manifest)
        return manifest.digest

    def serve_base(self, tag: str = "12", salt: str = "") -> str:
        """The base image's tag served at the hub, as a new digest for each ``salt``."""
        manifest = empty_image({"base": BASE, "salt": salt})
        self.client.put_manifest(f"base/{BASE}", tag, manifest)
        return manifest.digest

    def pin(self, image: str, version: str, digest: str) -> None:
        """The committed lock of ``image:version`` pins its base at ``digest``."""
        path = self.root / "images" / image / version / "requirements.lock"
        lines = path.read_text().splitlines()
        lines = [f"{ln.rpartition('@')[0]}@{digest}" if ln.startswith("# base: ") else ln for ln in lines]
        path.write_text("\n".join(lines) + "\n")

    def advisory(
        self,
        rid: str,
        name: str,
        fixed: str | None,
        *,
        eco: str = "PyPI",
        introduced: str = "0",
        severity: str = "HIGH",
        published: str | None = "2026-11-20T00:00:00Z",
        aliases: tuple[str, ...] = (),
    ) -> None:
        events: list[dict[str, str]] = [{"introduced": introduced}] + ([{"fixed": fixed}] if fixed else [])
        record: dict[str, Any] = {
            "schema_version": "1.6.0",
            "id": rid,
            "aliases": list(aliases),
            "summary": f"{rid} in {name}",
            "affected": [
                {
                    "package": {"ecosystem": eco, "name": name},
                    "ranges": [{"type": "ECOSYSTEM", "events": events}],
                }
            ],
            "database_specific": {"severity": severity},
        }
        if published:
            record["published"] = published
        self.osv.mkdir(exist_ok=True)
        (self.osv / f"{rid}.json").write_text(json.dumps(record))

    def patch_manifest(self, image: str, version: str, extends: str, body: str = "") -> None:
        """A patch of ``image:extends`` with a manifest (``body``: what it changes) and a lock
        that pins the base as its parent's."""
        write_manifest(
            self.root,
            image,
            version,
            f'image: {image}\nversion: "{version}"\nextends: "{extends}"\n'
            f"{body}release:\n  patch:\n    fixes: []\n",
        )
        lock = (self.root / "images" / image / extends / "requirements.lock").read_text()
        (self.root / "images" / image / version).mkdir()
        (self.root / "images" / image / version / "requirements.lock").write_text(lock)

    def watcher(self, cache: Path) -> Watcher:
        """A run of ``watch`` as the command makes it, on 2026-12-03."""
        reader = Reader(
            load_registries(self.root, str(self.registries)), CredentialStore.from_settings(Settings())
        )
        return Watcher(
            Repo(self.root),
            reader,
            Advisories([self.osv], cache),
            today=date(2026, 12, 3),
            now=datetime.now(UTC),
        )

    def released(self) -> None:
        """The SDK 2.13.0 and training 25.03 published as the repository has them, locks pinned
        to what the registry serves: the state a scheduled runner finds."""
        self.pin(SDK, "2.13.0", self.serve_base())
        self.pin(
            CPU, "25.03", self.publish(SDK, "2.13.0", sbom(("torch", "2.13.0+cpu"), ("filelock", "4.3.1")))
        )
        self.publish(CPU, "25.03", sbom(*TRAINING))


def empty_image(config: dict[str, str]) -> Manifest:
    """An image manifest of ``config`` and no layer."""
    raw = json.dumps(config).encode()
    body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256_digest(raw),
                "size": len(raw),
            },
            "layers": [],
        }
    ).encode()
    return Manifest(
        digest=sha256_digest(body), media_type="application/vnd.oci.image.manifest.v1+json", body=body
    )


class Calendar:
    """The day it is for the command line's ``watch`` and ``patch`` (``cli.watching.clock``): a
    run on that day adds to the re-scan history, a ``--today`` of another day is a what-if.
    Each reading is a second later than the one before, from noon UTC."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, day: str) -> None:
        self._monkeypatch = monkeypatch
        self.set(day)

    def set(self, day: str) -> None:
        ticks = itertools.count()
        noon = datetime.fromisoformat(f"{day}T12:00:00+00:00")
        self._monkeypatch.setattr(
            "xpu_release.cli.watching.clock", lambda: noon + timedelta(seconds=next(ticks))
        )


# What training-cpu-pytorch 25.03's SBOM names (a few of them): its pins, a dependency, the SDK's torch.
TRAINING = (
    ("transformers", "4.49.0"),
    ("accelerate", "1.5.2"),
    ("ray", "2.43.0"),
    ("idna", "3.20"),
    ("torch", "2.13.0+cpu"),
)


def sbom(*pypi: tuple[str, str], debian: tuple[tuple[str, str], ...] = ()) -> bytes:
    components = [{"type": "library", "name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"} for n, v in pypi]
    components += [
        {
            "type": "library",
            "name": n,
            "version": v,
            "purl": f"pkg:deb/debian/{n}@{v}?arch=amd64&distro=debian-12",
        }
        for n, v in debian
    ]
    return json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "components": components}).encode()


def copy_repository(dst: Path) -> Path:
    dst.mkdir()
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("tests"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    return dst


@contextmanager
def world(tmp_path: Path, *, referrers_api: bool = False) -> Iterator[World]:
    """The world before anything is published: the repository, the registry, no advisories."""
    with fake_registry(State(auth=False, referrers_api=referrers_api)) as (host, state):
        root = copy_repository(tmp_path / "repo")
        override = tmp_path / "registries.yaml"
        override.write_text(
            "registries:\n"
            f"  hub: {{host: '{host}', insecure: true}}\n"
            f"  public: {{host: '{host}', insecure: true}}\n"
            f"  vpc: {{hosts: {{cn-beijing: '{host}', cn-wulanchabu: '{host}'}}, insecure: true}}\n"
        )
        ep = Endpoint(registry="public", role="public", region=None, host=host, namespace=NS, insecure=True)
        (tmp_path / "spool").mkdir()
        yield World(
            root=root,
            registries=override,
            host=host,
            state=state,
            osv=tmp_path / "osv",
            client=RegistryClient(ep, None, FAST),
            spool=tmp_path / "spool",
        )
