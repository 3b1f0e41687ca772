"""``platforms:`` (issue 43): which platforms a release is built for. Validated with located
messages (known platforms only, each once, at least one), inherited through ``extends:``,
linux/amd64 alone by default; a component may install another version on one platform
(``platform_versions``), which a moved pin does not inherit; a release built on a family release
declares no platform that release lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpu_release.manifest import Repo
from xpu_release.manifest.inherit import Case, a_moved_pin_drops_its_platform_versions
from xpu_release.manifest.platforms import AMD64, ARM64, DEFAULT, KNOWN

from ..helpers import MINIMAL, run, write_manifest

F = "manifests/demo/1.0.yaml"
TORCH = "  torch:\n    kind: pip\n    version: 2.13.0+cpu\n"


def with_platforms(line: str, components: str = "") -> str:
    return MINIMAL.replace("framework: pytorch\n", f"framework: pytorch\n{line}\n") + components


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("platforms: [linux/amd64, linux/arm64, linux/amd64]",
         f"{F}:6:39: platforms[2]: 'linux/amd64' is listed twice"),
        ("platforms: [linux/arm46]",
         f"{F}:6:13: platforms[0]: string 'linux/arm46' is not one of linux/amd64, linux/arm64; "
         "did you mean 'linux/arm64'?"),
        ("platforms: []", f"{F}:6:12: platforms: is empty; at least 1 needed"),
        ("platforms: linux/arm64", f"{F}:6:12: platforms: expected a list, got string 'linux/arm64'"),
        ("platforms: [windows/amd64]", f"{F}:6:13: platforms[0]: string 'windows/amd64' is not one of"),
    ],
)  # fmt: skip
def test_platforms_are_known_given_once_and_at_least_one(tmp_path: Path, line: str, expected: str) -> None:
    write_manifest(tmp_path, "demo", "1.0", with_platforms(line))
    for d in ("templates",):
        (tmp_path / d).mkdir(exist_ok=True)
    (tmp_path / "registries.yaml").write_text((Path(__file__).parents[3] / "registries.yaml").read_text())

    result = run(tmp_path, "validate", "demo:1.0")

    assert result.exit_code == 2, result.output
    assert expected in result.stderr


def repo_with(tmp_path: Path, text: str, *more: tuple[str, str]) -> Repo:
    write_manifest(tmp_path, "demo", "1.0", text)
    for version, body in more:
        write_manifest(tmp_path, "demo", version, body)
    return Repo(tmp_path)


def test_a_manifest_without_platforms_is_for_linux_amd64_alone(tmp_path: Path) -> None:
    spec = repo_with(tmp_path, MINIMAL).load_ref("demo:1.0")

    assert spec.platforms == DEFAULT == (AMD64,)
    assert not spec.platformed


def test_amd64_alone_said_outright_is_the_default_too(tmp_path: Path) -> None:
    spec = repo_with(tmp_path, with_platforms("platforms: [linux/amd64]")).load_ref("demo:1.0")

    assert spec.platforms == DEFAULT
    assert not spec.platformed


def test_platforms_are_read_in_the_order_written_and_inherited(tmp_path: Path) -> None:
    child = 'image: demo\nversion: "1.1"\nextends: "1.0"\nrelease: {highlights: [{en: x, zh: x}]}\n'
    repo = repo_with(tmp_path, with_platforms("platforms: [linux/arm64, linux/amd64]"), ("1.1", child))

    assert repo.load_ref("demo:1.0").platforms == (ARM64, AMD64)
    assert repo.load_ref("demo:1.1").platforms == (ARM64, AMD64)
    assert repo.load_ref("demo:1.1").platformed


def test_naming_platforms_is_an_input_of_the_image(tmp_path: Path) -> None:
    bare = repo_with(tmp_path / "a", MINIMAL).load_ref("demo:1.0")
    named = repo_with(tmp_path / "b", with_platforms("platforms: [linux/amd64, linux/arm64]")).load_ref(
        "demo:1.0"
    )

    assert bare.content_hash != named.content_hash  # (unchanged hashes: test_default_platform.py)


def test_a_component_installs_its_platform_version_on_that_platform(tmp_path: Path) -> None:
    text = with_platforms("platforms: [linux/amd64, linux/arm64]",
                          TORCH + "    platform_versions: {linux/arm64: 2.13.0}\n")  # fmt: skip
    torch = repo_with(tmp_path, text).load_ref("demo:1.0").component("torch")

    assert torch is not None
    assert torch.pin_on(AMD64) == "torch==2.13.0+cpu"
    assert torch.pin_on(ARM64) == "torch==2.13.0"
    assert torch.pin == "torch==2.13.0+cpu"  # what the notes and the labels name


def test_a_platform_version_for_a_platform_not_declared_is_located(tmp_path: Path) -> None:
    text = MINIMAL + TORCH + "    platform_versions: {linux/arm64: 2.13.0}\n"
    write_manifest(tmp_path, "demo", "1.0", text)

    with pytest.raises(Exception, match=r"components\.torch\.platform_versions\.linux/arm64: linux/arm64 is "
                       r"not a platform of this release \(platforms: linux/amd64\)"):  # fmt: skip
        Repo(tmp_path).load_ref("demo:1.0")


def test_a_moved_pin_does_not_inherit_the_old_pins_platform_versions() -> None:
    old = {"kind": "pip", "version": "2.13.0+cpu", "platform_versions": {"linux/arm64": "2.13.0"}}
    moved = Case.of({"version": "1", "components": {"torch": old}},
                    {"version": "2", "components": {"torch": {"version": "2.14.0+cpu"}}})  # fmt: skip
    kept = Case.of({"version": "1", "components": {"torch": old}},
                   {"version": "2", "components": {"six": {"kind": "pip", "version": "1"}}})  # fmt: skip

    a_moved_pin_drops_its_platform_versions(moved)
    a_moved_pin_drops_its_platform_versions(kept)

    assert "platform_versions" not in moved.data["components"]["torch"]
    assert kept.data["components"]["torch"]["platform_versions"] == {"linux/arm64": "2.13.0"}


FAMILY = """\
image: kid
version: "1.0"
title: {en: kid, zh: kid}
scenario: [training]
framework: pytorch
PLATFORMS
accelerator: {name: CPU, kind: cpu}
base: {image: demo, version: "1.0", python: /usr/bin/python3}
components: {}
"""


def test_a_release_declares_no_platform_its_base_release_lacks(tmp_path: Path) -> None:
    write_manifest(tmp_path, "demo", "1.0", MINIMAL)  # linux/amd64 alone
    write_manifest(
        tmp_path, "kid", "1.0", FAMILY.replace("PLATFORMS", "platforms: [linux/amd64, linux/arm64]")
    )

    with pytest.raises(Exception, match=r"kid/1\.0\.yaml:6:\d+: platforms: linux/arm64: the base release "
                       r"demo:1\.0 is built for linux/amd64 only"):  # fmt: skip
        Repo(tmp_path).load_ref("kid:1.0")


def test_a_release_may_declare_fewer_platforms_than_its_base(tmp_path: Path) -> None:
    write_manifest(tmp_path, "demo", "1.0", with_platforms("platforms: [linux/amd64, linux/arm64]"))
    write_manifest(tmp_path, "kid", "1.0", FAMILY.replace("PLATFORMS", "platforms: [linux/arm64]"))

    assert Repo(tmp_path).load_ref("kid:1.0").platforms == (ARM64,)


def test_the_known_platforms_are_the_two_this_machine_builds() -> None:
    assert sorted(KNOWN) == ["linux/amd64", "linux/arm64"]
    assert (AMD64.machine, ARM64.machine) == ("x86_64", "aarch64")
    assert ARM64.oci() == {"architecture": "arm64", "os": "linux", "variant": "v8"}
    assert AMD64.oci() == {"architecture": "amd64", "os": "linux"}
    assert (AMD64.local_ref("x:1"), ARM64.local_ref("x:1")) == ("x:1", "x:1-arm64")
