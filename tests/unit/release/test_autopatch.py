"""``watch --release``: what needs a patch is patched and released, parents first, with one
summary; a second run right after has nothing to do. The patches are made by ``patch``'s own
code (its lock by a stand-in); the release pipeline is a fake that publishes to an in-process
registry (the real one needs the engine: the lead's stack tests run it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpu_release.errors import BuildFailed
from xpu_release.image.lock import Lock, load_lock, pin_base, pins_sha256
from xpu_release.manifest import ImageSpec, Repo, parse_ref
from xpu_release.manifest.order import build_order
from xpu_release.manifest.registries import load_registries
from xpu_release.release.watching.autopatch import Summary, run
from xpu_release.release.watching.patch import prepare, write
from xpu_release.release.watching.watch import Watcher
from xpu_release.release.watching.watched import Watched

from ..helpers import run as cli
from .published_kit import CPU, NS, SDK, TRAINING, World, sbom


@pytest.fixture
def w(published: World) -> World:
    return published


class FakeSteps:
    """patch as ``patch`` makes it (a stand-in lock pinned to what the registry serves); a
    release that publishes the image with its SBOM, as the pipeline would end."""

    def __init__(self, w: World, watcher: Watcher, *, offers: bool = True, fail: bool = False) -> None:
        self.w, self.watcher, self.offers, self.fail = w, watcher, offers, fail
        self.released: list[str] = []

    def lock_with(self, spec: ImageSpec) -> Lock:
        where = f"base/{spec.base.repository}" if spec.base.image is None else f"{NS}/{spec.base.repository}"
        digest = self.w.client.head_manifest(where, spec.base.tag)
        assert digest is not None
        parent = load_lock(self.w.root, self.watcher.repo.load(spec.image, spec.extends or ""), current=False)
        return Lock(
            pins_sha256=pins_sha256(spec),
            layers=parent.layers,
            base=pin_base(spec, digest),
            provided=parent.provided,
        )

    def patch(self, ref: str, watched: Watched) -> tuple[str | None, tuple[str, ...]]:
        spec = self.watcher.repo.load_ref(ref)
        lock = load_lock(self.w.root, spec, current=False)
        prepared = prepare(
            self.watcher.repo, spec, watched, self.watcher.advisories, lock, lambda *_: self.offers
        )
        if not prepared.changes:
            return None, prepared.blocked
        write(self.watcher.repo, prepared, self.lock_with, load_registries(self.watcher.repo.root))
        return prepared.ref, ()

    def release(self, ref: str) -> str:
        if self.fail:
            msg = f"the build of {ref} failed"
            raise BuildFailed(msg)
        image, version = parse_ref(ref)
        fixed = tuple((n, "1.6.0" if n == "accelerate" else v) for n, v in TRAINING)
        self.released.append(ref)
        return self.w.publish(
            image, version, sbom(("torch", "2.13.0+cpu")) if image == SDK else sbom(*fixed), salt=ref
        )


def release_all(w: World, tmp_path: Path, **fake: bool) -> tuple[FakeSteps, Summary]:
    watching = w.watcher(tmp_path / "cache")
    steps = FakeSteps(w, watching, **fake)
    summary = run(watching, watching.repo.refs(), lambda refs: build_order(watching.repo, refs), steps)
    watching.advisories.close()
    return steps, summary


def test_a_moved_base_patches_the_sdk_then_the_child_and_a_second_run_does_nothing(
    w: World, tmp_path: Path
) -> None:
    w.serve_base(salt="rebuilt")

    steps, summary = release_all(w, tmp_path)

    assert steps.released == [f"{SDK}:2.13.0.1", f"{CPU}:25.03.1"]  # parents first
    said = summary.to_json()
    assert [(s["ref"], s["outcome"], s["patch"]) for s in said["patched"]] == [
        (f"{SDK}:2.13.0", "released", f"{SDK}:2.13.0.1"),
        (f"{CPU}:25.03", "released", f"{CPU}:25.03.1"),
    ]
    assert said["patched"][0]["why"][0].startswith("its base debian/bookworm-python-cxx:12 moved")
    assert said["patched"][1]["why"] == [f"its base {SDK}:2.13.0 is patched: {SDK}:2.13.0.1 is published"]
    assert all(s["digest"].startswith("sha256:") for s in said["patched"])
    assert Repo(w.root).load(CPU, "25.03.1").base.tag == "2.13.0.1"
    states = {r["ref"]: r["state"] for r in said["releases"]}
    assert states[f"{SDK}:2.13.0"] == states[f"{CPU}:25.03"] == "superseded"
    assert states[f"{SDK}:2.13.0.1"] == states[f"{CPU}:25.03.1"] == "up to date"
    assert said["exit_code"] == 0

    again, second = release_all(w, tmp_path)

    assert again.released == []
    assert second.to_json()["patched"] == []
    assert second.exit_code == 0


def test_an_advisory_patches_the_child_alone(w: World, tmp_path: Path) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")

    steps, summary = release_all(w, tmp_path)

    assert steps.released == [f"{CPU}:25.03.1"]
    patched = Repo(w.root).load(CPU, "25.03.1")
    assert patched.component("accelerate").version == "1.6.0"  # type: ignore[union-attr]
    assert summary.exit_code == 0


def test_a_patch_that_cannot_be_made_is_said_and_the_run_ends_in_15(w: World, tmp_path: Path) -> None:
    w.advisory("CVE-2026-0001", "accelerate", "1.6.0")

    steps, summary = release_all(w, tmp_path, offers=False)  # the index does not have 1.6.0

    assert steps.released == []
    said = summary.to_json()
    assert [(s["ref"], s["outcome"]) for s in said["patched"]] == [(f"{CPU}:25.03", "nothing to fix")]
    assert said["exit_code"] == 15
    assert not (w.root / "manifests" / CPU / "25.03.1.yaml").exists()


def test_a_release_that_fails_stops_the_run_and_its_error_is_the_exit(w: World, tmp_path: Path) -> None:
    w.serve_base(salt="rebuilt")

    _steps, summary = release_all(w, tmp_path, fail=True)

    said = summary.to_json()
    assert [(s["ref"], s["outcome"]) for s in said["patched"]] == [(f"{SDK}:2.13.0", "failed")]
    assert said["patched"][0]["notes"] == [f"the build of {SDK}:2.13.0.1 failed"]
    assert summary.exit_code == 5


def test_watch_release_with_nothing_due_publishes_nothing_and_exits_0(w: World) -> None:
    result = cli(
        w.root, "--registries", str(w.registries), "watch", "--release", "--advisories", str(w.osv), "--json"
    )

    assert result.exit_code == 0, result.stderr
    said = json.loads(result.stdout)
    assert said["patched"] == []
    assert {r["state"] for r in said["releases"]} == {"up to date", "not published"}


def test_watch_release_with_nothing_due_says_why_for_each_release(w: World) -> None:
    result = cli(w.root, "--registries", str(w.registries), "watch", "--release", "--advisories", str(w.osv))

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "nothing needs a patch; each release, as checked after:",
        f"{SDK}:2.13.0  up to date",
        f"{CPU}:25.03  up to date",
        "training-xpu-pytorch:25.03  not published",
    ]
