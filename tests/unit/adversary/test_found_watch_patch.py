"""Found by the adversary (#39): ``patch`` when the base or the index are not as the advisory
and ``watch`` left them.

- **A base tag that moved and moved back** (A → B when ``patch`` checks it, B → A by the time
  its lock is made: a retagged upstream rolled back): ``patch`` rewrites ``release.patch.base``
  to the digest the lock got, and writes a patch whose only change is "base A → A". The docs
  say "Nothing to fix: patch says so and writes nothing"; this one is written, released by
  ``watch --release``, and its notes say "Base image … updated: `sha256:A…` → `sha256:A…`".
- **A fix the index does not have, and a later version that it does**: an advisory names 1.5
  as fixed; the index has no 1.5 but has 2.0 (also fixed). The docs: "each package with open
  findings goes to the smallest version that fixes them all **and that the package index
  offers**": 2.0. ``patch`` only ever tries the versions the advisories name, says
  ``not-on-index`` and writes nothing, so ``watch`` says "needs a patch" (15) for ever and
  ``watch --release`` never patches it.
- **"Nothing was written"**: ``patch`` with nothing to fix says "…; nothing was written" (the
  docs: "says so and writes nothing"), and it has added an entry to the release's re-scan
  history (its own ``watch``), with ``--today`` as the day its findings were first seen."""

from __future__ import annotations

import pytest

from xpu_release.image.lock import Lock, load_lock, pin_base, pins_sha256
from xpu_release.manifest import ImageSpec, Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.release.watching.patch import prepare, write

from ..helpers import run
from ..release.published_kit import CPU, SDK, World
from ..release.test_patch import KIT


@pytest.mark.timeout(60)
def test_a_base_that_moved_back_before_the_lock_is_no_base_move(published: World) -> None:
    pinned = load_lock(published.root, Repo(published.root).load(SDK, "2.13.0"), current=False)
    published.serve_base(salt="moved")  # the SDK's base tag moved: watch says so
    watching = published.watcher(published.root.parent / "cache")
    spec = watching.repo.load(SDK, "2.13.0")
    watched = watching.watch(spec.ref)
    assert [r.kind for r in watched.reasons] == ["base-moved"]
    prepared = prepare(watching.repo, spec, watched, watching.advisories, pinned, lambda *_: True)
    watching.advisories.close()

    def moved_back(new: ImageSpec) -> Lock:  # the lock finds the tag where the parent pinned it
        back = pin_base(new, pinned.base_digest)
        return Lock(pins_sha256=pins_sha256(new), layers=pinned.layers, base=back, provided=pinned.provided)

    write(watching.repo, prepared, moved_back, load_registries(published.root))

    path = published.root / "manifests" / SDK / "2.13.0.1.yaml"
    if path.exists():  # written: then it must say a real move, not A → A
        move = Repo(published.root).load(SDK, "2.13.0.1").release.patch.base  # type: ignore[union-attr]
        # today: old_digest == new_digest == the parent's pin, and nothing else changes
        assert move is None or move.old_digest != move.new_digest, move


@pytest.mark.timeout(120)
def test_a_fix_the_index_lacks_is_taken_by_the_smallest_later_version_it_offers(kit: World) -> None:
    kit.advisory("CVE-2026-1000", "alpha", "1.5")  # no alpha 1.5 anywhere; the wheelhouse has 2.0

    result = run(kit.root, "--registries", str(kit.registries), "patch", f"{KIT}:1.0", "--advisories",
                 str(kit.osv), "--today", "2026-12-03")  # fmt: skip

    assert result.exit_code == 0, result.stderr
    # today: "nothing to fix in kit:1.0: …; does not fix CVE-2026-1000 in alpha 1.0: not-on-index"
    assert result.stdout == f"{KIT}:1.0.1\n", result.stderr
    assert Repo(kit.root).load(KIT, "1.0.1").component("alpha").version == "2.0"  # type: ignore[union-attr]


@pytest.mark.timeout(60)
def test_patch_with_nothing_to_fix_writes_nothing(published: World) -> None:
    published.advisory("CVE-2026-0004", "ray", None, severity="MODERATE")  # no fix yet
    before = {p for p in published.root.rglob("*") if p.is_file()}

    result = run(published.root, "--registries", str(published.registries), "patch", f"{CPU}:25.03",
                 "--advisories", str(published.osv), "--today", "2026-12-03")  # fmt: skip

    assert result.exit_code == 0
    assert "nothing was written" in result.stderr
    # today: out/releases/training-cpu-pytorch/25.03.watch/<time>.json
    assert {p for p in published.root.rglob("*") if p.is_file()} - before == set()
