"""A lock per platform (issue 43): each layer's pins resolved for each declared platform with that
platform's wheels (pip's own resolver, ``--platform``, against a local wheelhouse of generated
wheels: no network); a pin with no wheel for a platform is a lock error naming both; the file
pins the base by its index and each platform's section by that platform's image in it; a lock of
linux/amd64 alone keeps the single-platform format."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import LockError
from xpu_release.image.lock import Lock, Locks, load_locks, lock_path, pins_sha256, read_locks, resolve
from xpu_release.image.relock import relock, write_lock
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import CredentialStore
from xpu_release.settings import Settings

from ..fake_registry import State, fake_registry
from ..helpers import write_manifest
from .base_index import BASE_REPO, FakeBase, serve_index, serve_one

INDEX = "debian/bookworm-python:12@sha256:" + "1" * 64
ON_AMD64 = "debian/bookworm-python:12@sha256:" + "a" * 64
ON_ARM64 = "debian/bookworm-python:12@sha256:" + "b" * 64


def wheel(house: Path, name: str, version: str, tag: str = "py3-none-any", *requires: str) -> Path:
    """A wheel of ``tag`` that installs nothing but says what it needs."""
    dist = f"{name}-{version}.dist-info"
    path = house / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as whl:
        needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
        whl.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}")
        pure = "true" if tag.endswith("-any") else "false"
        whl.writestr(
            f"{dist}/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: {pure}\nTag: {tag}\n"
        )
        whl.writestr(f"{dist}/RECORD", "")
    return path


X86 = "cp311-cp311-manylinux_2_17_x86_64"
ARM = "cp311-cp311-manylinux_2_28_aarch64"


def manifest(house: Path, pins: str, platforms: str = "[linux/amd64, linux/arm64]") -> str:
    return (
        'image: kit\nversion: "1.0"\ntitle: {en: kit, zh: kit}\nscenario: [training]\nframework: pytorch\n'
        f"platforms: {platforms}\naccelerator: {{name: CPU, kind: cpu}}\n"
        'base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}\n'
        f"pip: {{find_links: [{house}]}}\ncomponents:\n{pins}"
    )


def stocked(house: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A wheelhouse with a pure wheel, a compiled one for both platforms, and a torch-like pin
    whose x86-64 wheel carries a local label (+cpu) and whose aarch64 wheel does not."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # this wheelhouse only: no index, no config
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    house.mkdir()
    wheel(house, "pure", "1.0")
    wheel(house, "native", "2.0", X86, "pure")
    wheel(house, "native", "2.0", ARM, "pure")
    wheel(house, "tor", "1.0+cpu", X86)
    wheel(house, "tor", "1.0", ARM)
    wheel(house, "x86only", "3.0", X86)
    return house


@pytest.fixture
def house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stocked(tmp_path / "wheels", monkeypatch)


def spec_of(tmp_path: Path, text: str, ref: str = "kit:1.0") -> Any:
    write_manifest(tmp_path / "repo", "kit", ref.split(":")[1], text)
    return Repo(tmp_path / "repo").load_ref(ref)


def locks_of(spec: Any) -> Locks:
    sections = tuple(
        (p, resolve(spec, base, platform=p)) for p, base in ((AMD64, ON_AMD64), (ARM64, ON_ARM64))
    )

    return Locks(pins_sha256=pins_sha256(spec), base=INDEX, by_platform=sections, platformed=True)


NATIVE = "  native: {kind: pip, version: '2.0'}\n"


@dataclass(frozen=True)
class Native:
    """kit:1.0 for linux/amd64 and linux/arm64, pinning ``native`` 2.0 (which needs ``pure``),
    from ``house``, and its platformed lock: ``locks``, written out as ``text``."""

    house: Path
    spec: Any
    locks: Locks
    text: str


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Native:
    """One lock for the tests that read it, damage it or set it beside another manifest: made
    once, since pip's two resolutions are what these tests spend their time on."""
    made = tmp_path_factory.mktemp("native")
    with pytest.MonkeyPatch.context() as monkeypatch:  # pip's settings for these resolutions only
        house = stocked(made / "wheels", monkeypatch)
        spec = spec_of(made, manifest(house, NATIVE))
        locks = locks_of(spec)
    return Native(house, spec, locks, locks.render(spec))


def urls(lock: Any) -> list[str]:
    return [Path(p.url).name for layer in lock.layers for p in layer.packages]


def test_each_platform_resolves_its_own_wheels(native: Native) -> None:
    amd64, arm64 = native.locks.of(AMD64), native.locks.of(ARM64)  # resolve(spec, …, platform=…)

    assert urls(amd64) == [f"native-2.0-{X86}.whl", "pure-1.0-py3-none-any.whl"]
    assert urls(arm64) == [f"native-2.0-{ARM}.whl", "pure-1.0-py3-none-any.whl"]
    native = {lock.layers[0].packages[0].sha256 for lock in (amd64, arm64)}
    assert len(native) == 2  # each platform's wheel, each its own hash
    assert (amd64.base, arm64.base) == (ON_AMD64, ON_ARM64)


def test_a_pin_with_no_wheel_for_a_platform_is_a_lock_error_naming_both(tmp_path: Path, house: Path) -> None:
    spec = spec_of(tmp_path, manifest(house, "  x86only: {kind: pip, version: '3.0'}\n"))

    resolve(spec, ON_AMD64, platform=AMD64)
    with pytest.raises(LockError, match=r"x86only==3\.0 has no wheel for linux/arm64 .*give "
                       r"components\.x86only\.platform_versions\.linux/arm64 .* or leave linux/arm64 out of "
                       r"platforms\. No lock was written"):  # fmt: skip
        resolve(spec, ON_ARM64, platform=ARM64)


def test_a_pin_whose_wheels_carry_another_version_on_a_platform_says_so(tmp_path: Path, house: Path) -> None:
    bare = spec_of(tmp_path, manifest(house, "  tor: {kind: pip, version: 1.0+cpu}\n"))
    with pytest.raises(LockError, match=r"tor==1\.0\+cpu has no wheel for linux/arm64"):
        resolve(bare, ON_ARM64, platform=ARM64)

    said = spec_of(tmp_path, manifest(house, "  tor: {kind: pip, version: 1.0+cpu, "
                                      "platform_versions: {linux/arm64: '1.0'}}\n"))  # fmt: skip

    assert resolve(said, ON_AMD64, platform=AMD64).layers[0].pin == "tor==1.0+cpu"
    assert resolve(said, ON_ARM64, platform=ARM64).layers[0].pin == "tor==1.0"
    assert urls(resolve(said, ON_ARM64, platform=ARM64)) == [f"tor-1.0-{ARM}.whl"]


def test_what_a_platforms_base_provides_is_never_in_its_layers(tmp_path: Path, house: Path) -> None:
    spec = spec_of(tmp_path, manifest(house, NATIVE))

    lock = resolve(spec, ON_ARM64, provided=(("pure", "1.0"),), platform=ARM64)

    assert urls(lock) == [f"native-2.0-{ARM}.whl"]
    assert lock.provided == (("pure", "1.0"),)


def test_a_platformed_lock_pins_the_index_and_each_platforms_image_and_reads_back(native: Native) -> None:
    spec, locks = native.spec, native.locks

    text = locks.render(spec)

    assert "# base: " + INDEX in text
    assert "# platforms: linux/amd64, linux/arm64" in text
    assert f"# platform linux/amd64: {ON_AMD64}" in text
    assert f"# platform linux/arm64: {ON_ARM64}" in text
    again = read_locks(text, "requirements.lock")
    assert again == locks
    assert again.render(spec) == text
    assert again.base_digest == "sha256:" + "1" * 64
    assert again.of(ARM64).base_digest == "sha256:" + "b" * 64


def test_a_lock_of_linux_amd64_alone_is_written_as_every_lock_before(tmp_path: Path, house: Path) -> None:
    spec = spec_of(tmp_path, manifest(house, NATIVE, "[linux/amd64]"))
    lock = resolve(spec, ON_AMD64)

    text = Locks.single(lock).render(spec)

    assert text == lock.render(spec)
    assert "# platform" not in text
    assert read_locks(text, "x") == Locks.single(lock)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda t: t.replace("# platform linux/arm64: ", "# platform linux/ppc64le: "),
         r"requirements\.lock:\d+: linux/ppc64le is no platform xpu-release knows"),
        (lambda t: t.replace("# platforms: linux/amd64, linux/arm64", "# platforms: linux/amd64"),
         r"incomplete lock"),
        (lambda t: t.replace("# platform linux/arm64: debian/bookworm-python:12",
                             "# platform linux/arm64: debian/other:12"),
         r"requirements\.lock:\d+: linux/arm64's base is not an image of the base the lock pins"),
        (lambda t: t.replace("# platforms: ", "# platforms: linux/arm64, "),
         r"incomplete lock"),
    ],
)  # fmt: skip
def test_a_damaged_platformed_lock_is_a_lock_error_naming_the_line(
    native: Native, edit: Any, said: str
) -> None:
    damaged = edit(native.text)
    assert damaged != native.text

    with pytest.raises(LockError, match=said):
        read_locks(damaged, "images/kit/1.0/requirements.lock")


def test_a_single_platform_lock_never_reads_a_platforms_section_as_its_own(native: Native) -> None:
    unplatformed = native.text.replace("# platforms: linux/amd64, linux/arm64\n", "")
    assert unplatformed != native.text

    with pytest.raises(LockError, match="a platform's section inside a lock of one platform"):
        Lock.parse(unplatformed, "requirements.lock")


def test_a_lock_for_other_platforms_than_the_manifests_is_stale(tmp_path: Path, native: Native) -> None:
    both = spec_of(tmp_path, manifest(native.house, NATIVE))
    path = lock_path(tmp_path / "repo", both)
    path.parent.mkdir(parents=True)
    path.write_text(native.text)
    assert load_locks(tmp_path / "repo", both).platforms == (AMD64, ARM64)

    one = spec_of(tmp_path, manifest(native.house, NATIVE, "[linux/arm64]"))

    with pytest.raises(LockError, match=r"is stale"):
        load_locks(tmp_path / "repo", one)


# --- relock: the base by its index -----------------------------------------------------------------


def relocked(tmp_path: Path, text: str, base: FakeBase) -> Any:
    root = tmp_path / "repo"
    write_manifest(root, "kit", "1.0", text)
    (root / "registries.yaml").write_text((Path(__file__).parents[3] / "registries.yaml").read_text())
    override = tmp_path / "local.yaml"
    override.write_text(
        f"registries:\n  hub: {{host: '{base.host}', insecure: true}}\n"
        f"  public: {{host: '{base.host}', insecure: true}}\n"
        f"  vpc: {{hosts: {{cn-beijing: '{base.host}', cn-wulanchabu: '{base.host}'}}, insecure: true}}\n"
    )
    spec = Repo(root).load_ref("kit:1.0")
    registries = load_registries(root, str(override))
    return root, spec, relock(root, spec, registries, CredentialStore.from_settings(Settings()),
                              engine=lambda: base.engine, on_line=lambda _: None)  # fmt: skip


def test_relock_pins_the_base_index_and_asks_each_platforms_image_what_it_provides(
    tmp_path: Path, house: Path
) -> None:
    with fake_registry(State(auth=False)) as (host, _state):
        base = serve_index(host, {AMD64: [("pure", "1.0")], ARM64: [("pure", "1.0")]})
        root, spec, made = relocked(tmp_path, manifest(house, NATIVE), base)

    assert made.lock.platformed
    assert made.lock.base == f"{BASE_REPO}:12@{base.index}"
    assert {p: lock.base for p, lock in made.lock.by_platform} == {
        AMD64: f"{BASE_REPO}:12@{base.images[AMD64]}",
        ARM64: f"{BASE_REPO}:12@{base.images[ARM64]}",
    }
    # each platform's base was asked in a container of its own image
    assert sorted(base.engine.asked) == sorted(f"{host}/base/{BASE_REPO}@{d}" for d in base.images.values())
    assert urls(made.lock.of(ARM64)) == [f"native-2.0-{ARM}.whl"]  # pure: the base's
    write_lock(root, spec, made.lock)
    assert load_locks(root, spec) == made.lock


def test_relock_of_a_platformed_release_on_a_base_of_one_image_names_the_platforms(
    tmp_path: Path, house: Path
) -> None:
    with fake_registry(State(auth=False)) as (host, _state):
        base = serve_one(host)
        with pytest.raises(LockError, match=r"is one image, not an index of platforms: it cannot give "
                           r"kit:1\.0 its linux/amd64, linux/arm64 images"):  # fmt: skip
            relocked(tmp_path, manifest(house, NATIVE), base)


def test_relock_on_an_index_without_a_declared_platform_names_it(tmp_path: Path, house: Path) -> None:
    with fake_registry(State(auth=False)) as (host, _state):
        base = serve_index(host, {AMD64: []})
        with pytest.raises(LockError, match=r"has no linux/arm64 image; kit:1\.0 is built for linux/arm64"):
            relocked(tmp_path, manifest(house, NATIVE), base)


def test_a_lock_of_linux_amd64_alone_on_an_index_base_pins_the_amd64_image(
    tmp_path: Path, house: Path
) -> None:
    # A base tag that serves an index (as the local stack's does since platforms exist) gives a
    # lock of linux/amd64 alone the digest of its linux/amd64 image: the single-platform lock
    # pins what it always pinned, and stays current.
    with fake_registry(State(auth=False)) as (host, _state):
        base = serve_index(host, {AMD64: [], ARM64: []})
        _root, _spec, made = relocked(tmp_path, manifest(house, NATIVE, "[linux/amd64]"), base)

    assert not made.lock.platformed
    assert made.lock.base == f"{BASE_REPO}:12@{base.images[AMD64]}"
    assert json.loads(json.dumps(made.lock.base_digest)) == base.images[AMD64]
