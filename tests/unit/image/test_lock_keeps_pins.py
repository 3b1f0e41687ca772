"""A new lock keeps the versions the earlier lock chose, as pip-compile does: a month's one-line
bump moves its own layer, and a release of a new version that changed nothing else ships no
other layer because the index published a newer transitive dependency in between.

These run pip's own resolver against a local wheelhouse of generated wheels (no network)."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from xpu_release.image.lock import Kept, earlier_lock, lock_path, resolve
from xpu_release.image.lockfile import Lock, pins_sha256
from xpu_release.manifest import ImageSpec, Repo

from ..helpers import write_manifest


def wheel(house: Path, name: str, version: str, *requires: str) -> None:
    """A pure-Python wheel that installs nothing but says what it needs (the same bytes for the
    same arguments: its members are dated 2026-01-01)."""
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(house / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
        tags = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        for member, text in [
            ("METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}"),
            ("WHEEL", tags),
            ("RECORD", ""),
        ]:
            whl.writestr(zipfile.ZipInfo(f"{dist}/{member}", date_time=(2026, 1, 1, 0, 0, 0)), text)


# The first locks of the fixtures, by what pip resolved them from (the wheels' bytes, the pins,
# the floors, the base): the house they were resolved in, and the lock.
_FIRST_LOCKS: dict[tuple[object, ...], tuple[str, Lock]] = {}


def first_lock(spec: ImageSpec, house: Path, base: str) -> Lock:
    """``resolve(spec, base=base)`` for a manifest whose only source is the wheelhouse ``house``
    of ``wheel``'s making, as a fixture's starting lock: pip resolves once a worker for each set
    of wheels and pins (half a second of CPU), and a later wheelhouse holding the same wheels
    gets that lock moved to it (its wheels' URLs, and the pins' hash, which names the house)."""
    assert spec.pip_find_links == (str(house),), "the wheelhouse only"
    assert not spec.pip_index_url, "the wheelhouse only"
    wheels = tuple(sorted((p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in house.iterdir()))
    pins = tuple((c.id, c.pin) for c in spec.of_kind("pip"))
    kind = (wheels, pins, spec.pip_constraints, base)
    if kind not in _FIRST_LOCKS:
        _FIRST_LOCKS[kind] = (house.as_uri(), resolve(spec, base=base))
    made_in, lock = _FIRST_LOCKS[kind]
    here = house.as_uri()
    layers = tuple(
        replace(
            layer, packages=tuple(replace(p, url=here + p.url.removeprefix(made_in)) for p in layer.packages)
        )
        for layer in lock.layers
    )
    assert all(p.url.startswith(made_in + "/") for layer in lock.layers for p in layer.packages), lock
    return replace(lock, layers=layers, pins_sha256=pins_sha256(spec))


def manifest(house: Path, version: str, extends: str | None, **pins: str) -> str:
    head = f'image: kit\nversion: "{version}"\n'
    if extends:
        return (
            head
            + f'extends: "{extends}"\ncomponents:\n'
            + "".join(f"  {name}: {{version: '{pin}'}}\n" for name, pin in pins.items())
        )
    return head + (
        "title: {en: kit, zh: kit}\nscenario: [training]\nframework: pytorch\n"
        "accelerator: {name: CPU, kind: cpu}\n"
        'base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}\n'
        f"pip: {{find_links: [{house}]}}\ncomponents:\n"
        + "".join(f"  {name}: {{kind: pip, version: '{pin}'}}\n" for name, pin in pins.items())
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repository whose kit 1.0 pins alpha 1.0 and gamma 1.0 (both need beta), locked when
    beta 1.0 was the newest; since then the wheelhouse gained beta 1.1."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # this wheelhouse only: no index, no config
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    house = tmp_path / "wheels"
    house.mkdir()
    root = tmp_path / "repo"
    wheel(house, "alpha", "1.0", "beta")
    wheel(house, "alpha", "2.0", "beta>=1.1")
    wheel(house, "beta", "1.0")
    wheel(house, "gamma", "1.0", "beta")
    wheel(house, "gamma", "1.1", "beta")
    write_manifest(root, "kit", "1.0", manifest(house, "1.0", None, gamma="1.0", alpha="1.0"))
    spec = Repo(root).load_ref("kit:1.0")
    lock_path(root, spec).parent.mkdir(parents=True)
    lock_path(root, spec).write_text(first_lock(spec, house, BASE).render(spec))
    wheel(house, "beta", "1.1")
    return root, house


BASE = "debian/bookworm-python:12@sha256:" + "b" * 64


def locked(root: Path, ref: str, *, upgrade: bool = False) -> dict[str, str]:
    spec = Repo(root).load_ref(ref)
    earlier = None if upgrade else earlier_lock(root, spec)
    lock = resolve(spec, base=BASE, keep=Kept.of(earlier[0], spec) if earlier else Kept())
    return dict(lock.versions)


def extend(repo: tuple[Path, Path], version: str, **pins: str) -> Path:
    """kit ``version``, which extends 1.0 and changes ``pins``; the repository's root."""
    root, house = repo
    write_manifest(root, "kit", version, manifest(house, version, "1.0", **pins))
    return root


def test_a_bump_keeps_the_transitive_pins_the_earlier_version_chose(repo: tuple[Path, Path]) -> None:
    root = extend(repo, "1.1", gamma="1.1")

    assert locked(root, "kit:1.1") == {"gamma": "1.1", "beta": "1.0", "alpha": "1.0"}


def test_upgrade_takes_the_newest_versions_the_pins_allow(repo: tuple[Path, Path]) -> None:
    root = extend(repo, "1.1", gamma="1.1")

    assert locked(root, "kit:1.1", upgrade=True)["beta"] == "1.1"


def test_relocking_a_version_keeps_its_own_lock(repo: tuple[Path, Path]) -> None:
    root, _house = repo

    assert locked(root, "kit:1.0") == {"gamma": "1.0", "beta": "1.0", "alpha": "1.0"}


def test_a_bump_that_needs_a_newer_transitive_version_gets_it(repo: tuple[Path, Path]) -> None:
    """alpha 2.0 needs beta>=1.1, which gamma's unchanged layer holds at 1.0: the kept pin
    yields to what the manifest's pins need."""
    root = extend(repo, "2.0", alpha="2.0")

    assert locked(root, "kit:2.0") == {"gamma": "1.0", "beta": "1.1", "alpha": "2.0"}


def test_the_earlier_lock_is_this_versions_own_then_its_parents(repo: tuple[Path, Path]) -> None:
    root = extend(repo, "1.1", gamma="1.1")
    new = Repo(root).load_ref("kit:1.1")
    found = earlier_lock(root, new)
    assert found is not None
    assert found[1] == "images/kit/1.0/requirements.lock"

    lock_path(root, new).parent.mkdir(parents=True)
    lock_path(root, new).write_text("# not a lock xpu-release wrote\nbeta==9\n")

    assert earlier_lock(root, new) is None  # a hand-edited lock is made again, not kept


def test_kept_pins_leave_out_what_the_manifest_pins_itself(repo: tuple[Path, Path]) -> None:
    root = extend(repo, "2.0", alpha="2.0")
    spec = Repo(root).load_ref("kit:2.0")
    found = earlier_lock(root, spec)
    assert found is not None

    kept = Kept.of(found[0], spec)

    assert kept.steady == (("beta", "1.0"),)  # gamma's layer, unchanged; gamma itself is pinned
    assert kept.moved == ()  # alpha's layer held only alpha (beta went to gamma, the earlier pin)
    assert kept.attempts() == ((("beta", "1.0"),), ())


def test_a_kept_version_pip_would_not_read_as_one_is_never_passed_to_it(repo: tuple[Path, Path]) -> None:
    root = extend(repo, "1.1", gamma="1.1")
    path = root / "images" / "kit" / "1.0" / "requirements.lock"
    path.write_text(path.read_text().replace("beta==1.0 ", "beta==1.0;--index-url=http://127.0.0.1:9 ", 1))
    spec = Repo(root).load_ref("kit:1.1")
    found = earlier_lock(root, spec)
    assert found is not None

    kept = Kept.of(found[0], spec)

    assert kept.steady + kept.moved == ()  # beta was its only distribution besides the pins


def test_a_constraint_raises_a_kept_pin_to_its_floor_and_no_further(repo: tuple[Path, Path]) -> None:
    root, house = repo
    wheel(house, "beta", "1.2")
    write_manifest(root, "kit", "1.0.1", 'image: kit\nversion: "1.0.1"\nextends: "1.0"\n'
                   "pip: {constraints: ['beta>=1.1']}\n")  # fmt: skip

    assert locked(root, "kit:1.0.1") == {"gamma": "1.0", "beta": "1.1", "alpha": "1.0"}


def test_constraints_are_a_fact_of_the_lock_and_none_leaves_earlier_locks_current() -> None:
    root = Path(__file__).resolve().parents[3]
    spec = Repo(root).load_ref("training-cpu-pytorch:25.03")
    committed = Lock.parse(lock_path(root, spec).read_text(), "committed")
    floored = replace(spec, pip_constraints=("idna>=3.21",))

    assert pins_sha256(spec) == committed.pins_sha256  # no constraints: the hash locks were made with
    assert pins_sha256(floored) != committed.pins_sha256  # a floor added: the lock is stale


def test_the_index_says_what_it_offers_and_an_index_that_does_not_answer_is_an_error(
    repo: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from xpu_release.errors import LockError
    from xpu_release.image.index import offers, versions

    root, _house = repo
    spec = Repo(root).load_ref("kit:1.0")

    assert offers(spec, "beta", "1.1")
    assert not offers(spec, "beta", "9.9")
    assert versions(spec, "beta") == ("1.1", "1.0")  # as pip lists them: newest first
    assert versions(spec, "nothere") == ()
    monkeypatch.delenv("PIP_NO_INDEX")
    nowhere = replace(spec, pip_index_url="http://127.0.0.1:1/simple", pip_find_links=())
    with pytest.raises(LockError, match=r"cannot ask the package index whether beta 1\.1 is there"):
        offers(nowhere, "beta", "1.1")
    with pytest.raises(LockError, match=r"cannot ask the package index which versions of beta it has"):
        versions(nowhere, "beta")
