"""A patch of a release whose base moved: a base release of ours that has a published patch is
moved to (``base.version``, and the version of the component it carries); a base whose own
release needs a patch first is said, and nothing is written for it yet. The lock is made by a
stand-in here (the real one asks the engine what a moved base provides)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from xpu_release.image.lock import Lock, load_lock, pin_base, pins_sha256
from xpu_release.manifest import ImageSpec, Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.release.watching.patch import prepare, write

from ..helpers import run
from .published_kit import CPU, SDK, World, sbom


@pytest.fixture
def w(published: World) -> World:
    return published


def sdk_patch(w: World) -> str:
    """pytorch-cpu-sdk 2.13.0.1: its torch moves to 2.13.1+cpu; published."""
    w.patch_manifest(SDK, "2.13.0.1", "2.13.0", "components:\n  torch: {version: 2.13.1+cpu}\n")
    return w.publish(SDK, "2.13.0.1", sbom(("torch", "2.13.1+cpu")), salt="2.13.0.1")


def lock_at(parent: Lock, digest: str) -> Callable[[ImageSpec], Lock]:
    """What ``lock`` makes of the patch on the new base: the base's new torch provided."""

    def make(spec: ImageSpec) -> Lock:
        provided = tuple(("torch", "2.13.1+cpu") if n == "torch" else (n, v) for n, v in parent.provided)
        return Lock(
            pins_sha256=pins_sha256(spec),
            layers=parent.layers,
            base=pin_base(spec, digest),
            provided=provided,
        )

    return make


def test_a_child_moves_to_the_published_patch_of_its_base_with_the_component_it_carries(
    w: World, tmp_path: Path
) -> None:
    digest = sdk_patch(w)
    watching = w.watcher(tmp_path / "cache")
    repo = watching.repo
    spec = repo.load(CPU, "25.03")
    pinned = load_lock(w.root, spec, current=False)

    prepared = prepare(repo, spec, watching.watch(spec.ref), watching.advisories, pinned, lambda *_: True)
    written = write(repo, prepared, lock_at(pinned, digest), load_registries(repo.root))
    watching.advisories.close()

    assert prepared.ref == f"{CPU}:25.03.1"
    patched = Repo(w.root).load(CPU, "25.03.1")
    assert (patched.base.repository, patched.base.tag) == (SDK, "2.13.0.1")
    assert patched.component("torch").version == "2.13.1+cpu"  # type: ignore[union-attr]
    move = patched.release.patch.base  # type: ignore[union-attr]
    assert move is not None
    assert (move.old_ref, move.old_digest) == (f"{SDK}:2.13.0", pinned.base_digest)
    assert (move.new_ref, move.new_digest) == (f"{SDK}:2.13.0.1", digest)
    assert load_lock(w.root, patched).base == f"{SDK}:2.13.0.1@{digest}"  # current, not stale
    assert [p.name for p in written] == ["25.03.1.yaml", "requirements.lock", "Dockerfile"]
    assert run(w.root, "render", f"{CPU}:25.03.1", "--check").exit_code == 0


def test_a_child_whose_base_needs_a_patch_first_waits_for_it(w: World, tmp_path: Path) -> None:
    w.serve_base(salt="rebuilt")  # the SDK's base moved: the SDK needs a patch, training through it
    watching = w.watcher(tmp_path / "cache")
    spec = watching.repo.load(CPU, "25.03")
    watched = watching.watch(spec.ref)

    prepared = prepare(
        watching.repo,
        spec,
        watched,
        watching.advisories,
        load_lock(w.root, spec, current=False),
        lambda *_: True,
    )
    watching.advisories.close()

    assert [r.kind for r in watched.reasons] == ["through-base"]
    assert not prepared.changes
    assert prepared.blocked == (
        f"its base {SDK}:2.13.0 needs a patch: patch and release it first, then patch {CPU}:25.03",
    )


def test_a_base_tag_that_moved_back_is_no_move_but_the_fixes_stay(w: World, tmp_path: Path) -> None:
    pinned = load_lock(w.root, Repo(w.root).load(SDK, "2.13.0"), current=False)
    w.serve_base(salt="moved")  # the tag moved when watch asked ...
    w.advisory("CVE-2026-0011", "filelock", "4.3.2")  # ... and a dependency of the SDK has a fix
    watching = w.watcher(tmp_path / "cache")
    spec = watching.repo.load(SDK, "2.13.0")
    prepared = prepare(
        watching.repo, spec, watching.watch(spec.ref), watching.advisories, pinned, lambda *_: True
    )
    watching.advisories.close()
    assert prepared.patch.base is not None  # as watch saw it

    moved_back = lock_at(pinned, pinned.base_digest)  # ... and back where the release pins it, by the lock
    written = write(watching.repo, prepared, moved_back, load_registries(w.root))

    patched = Repo(w.root).load(SDK, "2.13.0.1")
    assert [p.name for p in written] == ["2.13.0.1.yaml", "requirements.lock", "Dockerfile"]
    assert patched.release.patch.base is None  # type: ignore[union-attr]  # no "base A → A"
    assert [f.new for f in patched.release.patch.fixes] == ["4.3.2"]  # type: ignore[union-attr]
    assert "filelock>=4.3.2" in patched.pip_constraints


def test_patch_says_nothing_to_fix_when_its_only_reason_moved_back(
    w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = load_lock(w.root, Repo(w.root).load(SDK, "2.13.0"), current=False)
    w.serve_base(salt="moved")
    before = {p for p in w.root.rglob("*") if p.is_file()}

    def relocked(root: Path, spec: ImageSpec, *_: object, **__: object) -> object:
        class Relocked:
            lock = lock_at(pinned, pinned.base_digest)(spec)  # the tag is back where the release pins it

        return Relocked()

    monkeypatch.setattr("xpu_release.image.relock.relock", relocked)
    result = run(
        w.root, "--registries", str(w.registries), "patch", f"{SDK}:2.13.0", "--advisories", str(w.osv)
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "nothing to fix in pytorch-cpu-sdk:2.13.0: its base tag moved back" in result.stderr
    assert "nothing was written" in result.stderr
    assert {p for p in w.root.rglob("*") if p.is_file()} == before
