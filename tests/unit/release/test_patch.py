"""``patch``: the next patch release of a published release, from what ``watch`` found: each
package bumped to the smallest version that fixes its findings and that the index offers (a
component's pin; a dependency's floor in pip.constraints), why it exists in release.patch, its
lock (pip's own resolver, here against a local wheelhouse: no network, no engine) and its
Dockerfile. Nothing to fix, or anything that fails: nothing is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.image.lock import lock_path
from xpu_release.manifest import Repo

from ..helpers import run, write_manifest
from ..image.test_lock_keeps_pins import first_lock, wheel
from .published_kit import BASE, World, sbom, world

KIT = "kit"


def kit_manifest(house: Path) -> str:
    return (
        f'image: {KIT}\nversion: "1.0"\ntitle: {{en: kit 1.0, zh: kit 1.0}}\nscenario: [training]\n'
        "framework: pytorch\naccelerator: {name: CPU, kind: cpu}\n"
        f'base: {{registry: hub, repository: {BASE}, tag: "12", python: /usr/bin/python3}}\n'
        f"pip: {{find_links: [{house}]}}\nfloating_tags: [latest]\n"
        "components:\n  alpha: {kind: pip, version: '1.0'}\n  gamma: {kind: pip, version: '1.0'}\n"
    )


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """kit 1.0 (alpha 1.0 and gamma 1.0, both needing beta) published with its SBOM; the
    wheelhouse has alpha 2.0, beta 1.1 and 1.2 since; pip sees that wheelhouse only."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    house = tmp_path / "wheels"
    house.mkdir()
    for name, version, *needs in [("alpha", "1.0", "beta"), ("beta", "1.0"), ("gamma", "1.0", "beta")]:
        wheel(house, name, version, *needs)
    with world(tmp_path) as w:
        digest = w.serve_base()
        write_manifest(w.root, KIT, "1.0", kit_manifest(house))
        spec = Repo(w.root).load(KIT, "1.0")
        lock_path(w.root, spec).parent.mkdir(parents=True)
        lock_path(w.root, spec).write_text(first_lock(spec, house, f"{BASE}:12@{digest}").render(spec))
        for name, version, *needs in [("alpha", "2.0", "beta"), ("beta", "1.1"), ("beta", "1.2")]:
            wheel(house, name, version, *needs)  # published since kit 1.0 was locked
        w.publish(KIT, "1.0", sbom(("alpha", "1.0"), ("beta", "1.0"), ("gamma", "1.0")))
        w.osv.mkdir()
        yield w


def patch(w: World, ref: str = f"{KIT}:1.0", *args: str) -> tuple[int, str, str]:
    result = run(
        w.root,
        "--registries",
        str(w.registries),
        "patch",
        ref,
        "--advisories",
        str(w.osv),
        "--today",
        "2026-12-03",
        *args,
    )
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def files(w: World) -> set[str]:
    return {str(p.relative_to(w.root)) for p in w.root.rglob("*") if p.is_file() and "out" not in p.parts}


def test_a_patch_bumps_each_package_to_the_smallest_fix_the_index_offers_and_says_why(kit: World) -> None:
    kit.advisory("CVE-2026-1000", "alpha", "2.0")  # a component: its pin moves
    kit.advisory("CVE-2026-1001", "beta", "1.1", severity="CRITICAL")  # a dependency: a floor
    kit.advisory("CVE-2026-1002", "gamma", "9.9")  # a fix the index does not have
    before = files(kit)

    code, out, said = patch(kit)

    assert code == 0, said
    assert out == f"{KIT}:1.0.1\n"
    assert files(kit) - before == {
        f"manifests/{KIT}/1.0.1.yaml",
        f"images/{KIT}/1.0.1/requirements.lock",
        f"images/{KIT}/1.0.1/Dockerfile",
    }
    spec = Repo(kit.root).load(KIT, "1.0.1")
    assert spec.extends == "1.0"
    assert spec.component("alpha").version == "2.0"  # type: ignore[union-attr]
    assert spec.pip_constraints == ("beta>=1.1",)
    assert spec.release.patch is not None
    assert [(f.id, f.package, f.old, f.new, f.by) for f in spec.release.patch.fixes] == [
        ("CVE-2026-1000", "alpha", "1.0", "2.0", "component"),
        ("CVE-2026-1001", "beta", "1.0", "1.1", "constraint"),
    ]
    assert [(u.id, u.package, u.why, u.fix) for u in spec.release.patch.open] == [
        ("CVE-2026-1002", "gamma", "not-on-index", "9.9")
    ]
    lock = (kit.root / "images" / KIT / "1.0.1" / "requirements.lock").read_text()
    assert "alpha==2.0 " in lock
    assert "beta==1.1 " in lock  # the smallest fix, though 1.2 is there: the floor is kept
    assert "gamma==1.0 " in lock
    assert "fixes CVE-2026-1000 in alpha: 1.0 → 2.0" in said
    assert "does not fix CVE-2026-1002 in gamma 1.0: not-on-index" in said
    for check in (["validate", f"{KIT}:1.0.1"], ["render", f"{KIT}:1.0.1", "--check"]):
        assert run(kit.root, *check).exit_code == 0
    locked = run(kit.root, "--registries", str(kit.registries), "lock", "--check", f"{KIT}:1.0.1")
    assert locked.exit_code == 0, locked.stderr


def test_patch_json_gives_the_ref_and_every_reason(kit: World) -> None:
    kit.advisory("CVE-2026-1000", "alpha", "2.0")

    code, out, _ = patch(kit, f"{KIT}:1.0", "--json")

    assert code == 0
    said = json.loads(out)
    assert said["ref"] == f"{KIT}:1.0.1"
    assert [r["id"] for r in said["reasons"]] == ["CVE-2026-1000"]
    assert said["fixes"][0]["new"] == "2.0"


def test_with_nothing_it_can_fix_patch_says_so_and_writes_nothing(kit: World) -> None:
    kit.advisory("CVE-2026-1002", "gamma", "9.9")  # fixed only in a version the index does not have
    before = files(kit)

    code, out, said = patch(kit)

    assert code == 0
    assert out == ""
    assert f"nothing to fix in {KIT}:1.0" in said
    assert "nothing was written" in said
    assert "does not fix CVE-2026-1002 in gamma 1.0: not-on-index" in said
    assert files(kit) == before


def test_a_patch_whose_lock_cannot_be_made_leaves_nothing_behind(kit: World, tmp_path: Path) -> None:
    wheel(tmp_path / "wheels", "alpha", "3.0", "beta>=7")  # the fix needs a beta nobody has
    kit.advisory("CVE-2026-1003", "alpha", "3.0")
    before = files(kit)

    code, _, said = patch(kit)

    assert code == 4
    assert "pip cannot resolve the pins of kit:1.0.1" in said
    assert files(kit) == before
    assert not (kit.root / "images" / KIT / "1.0.1").exists()


def test_a_release_that_is_not_published_has_nothing_to_patch(kit: World) -> None:
    code, _, said = patch(kit, "training-xpu-pytorch:25.03")

    assert code == 11
    assert "training-xpu-pytorch:25.03 is not published at public: there is nothing to patch" in said


def test_a_prepared_patch_that_is_not_published_is_named_not_doubled(kit: World) -> None:
    kit.advisory("CVE-2026-1000", "alpha", "2.0")
    assert patch(kit)[0] == 0

    code, _, said = patch(kit)

    assert code == 3
    assert f"{KIT}:1.0.1 is prepared and not published: release it" in said
    assert not (kit.root / "manifests" / KIT / "1.0.2.yaml").exists()


def test_a_superseded_release_is_left_to_its_patch(kit: World) -> None:
    kit.advisory("CVE-2026-1000", "alpha", "2.0")
    patch(kit)
    kit.publish(KIT, "1.0.1", sbom(("alpha", "2.0"), ("beta", "1.1"), ("gamma", "1.0")), salt="1.0.1")

    code, out, said = patch(kit)

    assert (code, out) == (0, "")
    assert f"{KIT}:1.0 is superseded by {KIT}:1.0.1: patch that one" in said


def test_a_release_superseded_by_a_patch_not_committed_here_says_to_commit_it_first(kit: World) -> None:
    """1.0.1 published by a scheduled run whose files are not committed: it is not patched again
    (1.0.1 would be its number, and version tags are immutable), and "patch that one" would
    name a release this checkout has no manifest of."""
    kit.publish(KIT, "1.0.1", sbom(("alpha", "2.0"), ("beta", "1.1"), ("gamma", "1.0")), salt="1.0.1")
    kit.advisory("CVE-2026-1000", "alpha", "2.0")

    code, out, said = patch(kit)

    assert (code, out) == (0, "")
    assert (
        f"{KIT}:1.0 is superseded by {KIT}:1.0.1, published but not committed here: commit its files" in said
    )
    assert not (kit.root / "manifests" / KIT / "1.0.1.yaml").exists()


def test_a_lock_whose_base_did_not_move_asks_no_engine(kit: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # no engine answers there
    lock = kit.root / "images" / KIT / "1.0" / "requirements.lock"
    before = lock.read_text()

    result = run(kit.root, "--registries", str(kit.registries), "lock", f"{KIT}:1.0")

    assert result.exit_code == 0, result.stderr
    assert lock.read_text() == before  # what the base provides is the lock's fact of its digest


def test_a_lock_whose_base_moved_asks_the_engine_what_it_provides(
    kit: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    kit.serve_base(salt="rebuilt")

    result = run(kit.root, "--registries", str(kit.registries), "lock", f"{KIT}:1.0")

    assert result.exit_code == 10
    assert "Docker engine" in result.stderr, result.stderr


def test_when_the_index_has_no_named_fix_the_smallest_later_version_no_advisory_affects_is_taken(
    published: World,
) -> None:
    from xpu_release.image.lock import load_lock
    from xpu_release.release.watching.patch import prepare

    published.advisory("CVE-2026-0001", "accelerate", "1.5.5")  # named, not on the index
    published.advisory("CVE-2026-0002", "accelerate", "1.7.0", introduced="1.6.0")  # 1.6.x affected
    index = ("1.5.2", "1.6.0", "1.6.5", "1.7.0", "1.8.0", "2.0.0rc1")
    watching = published.watcher(published.root.parent / "cache")
    spec = watching.repo.load("training-cpu-pytorch", "25.03")
    watched = watching.watch(spec.ref)
    lock = load_lock(published.root, spec, current=False)

    prepared = prepare(watching.repo, spec, watched, watching.advisories, lock,
                       lambda _s, _n, v: v in index, lambda _s, _n: index)  # fmt: skip
    without = prepare(watching.repo, spec, watched, watching.advisories, lock, lambda _s, _n, v: v in index)
    watching.advisories.close()

    assert [(b.component, b.version) for b in prepared.bumps] == [("accelerate", "1.7.0")]
    # not 1.6.0 or 1.6.5: no finding of 1.5.2's, but another advisory affects them
    assert [(f.id, f.old, f.new) for f in prepared.patch.fixes] == [("CVE-2026-0001", "1.5.2", "1.7.0")]
    assert [(u.id, u.why) for u in without.patch.open] == [("CVE-2026-0001", "not-on-index")]


def test_an_advisory_with_no_fix_that_affects_the_installed_version_does_not_block_the_others_fix(
    published: World,
) -> None:
    from xpu_release.image.lock import load_lock
    from xpu_release.release.watching.patch import prepare

    published.advisory("CVE-2026-0001", "accelerate", "1.7.0")
    published.advisory("CVE-2026-0003", "accelerate", None)  # every version, no fix: stays open
    watching = published.watcher(published.root.parent / "cache")
    spec = watching.repo.load("training-cpu-pytorch", "25.03")
    watched = watching.watch(spec.ref)
    lock = load_lock(published.root, spec, current=False)

    prepared = prepare(watching.repo, spec, watched, watching.advisories, lock, lambda *_: True)
    watching.advisories.close()

    assert [(b.component, b.version) for b in prepared.bumps] == [("accelerate", "1.7.0")]
    assert [(f.id, f.new) for f in prepared.patch.fixes] == [("CVE-2026-0001", "1.7.0")]
    assert [(u.id, u.why) for u in prepared.patch.open] == [("CVE-2026-0003", "no-fix")]
