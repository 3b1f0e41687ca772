"""Build per platform (issue 43), with an engine in memory that builds as the classic builder
does (``build_engine``): each platform's image is built from that platform's base image (the
lock's digest of it), its config says the platform it is for whatever the engine said (our
normalization, never the engine), it is tagged as that platform's (``NAME:VERSION-arm64``),
reproducible (two clean builds at other moments give one id) and spooled for publish."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.image.build import Building, build_image
from xpu_release.image.inputs import BuildInputs
from xpu_release.image.repro import check
from xpu_release.image.smoke import check_spec
from xpu_release.labels import BASE_DIGEST_LABEL, INPUTS_LABEL
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64, ARM64
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.codec import DEFAULT
from xpu_release.oci.credentials import CredentialStore
from xpu_release.oci.members import CompressedMap, blob_file, spool_dir
from xpu_release.settings import Settings, current, use

from .build_engine import BuildEngine
from .kit import ON_AMD64, ON_ARM64, locked_kit

NO_LOGIN = CredentialStore()  # an open registry: no login, no docker config


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """kit:25.03 for both platforms: rendered, and locked on a base index (no layer to fetch)."""
    root = tmp_path / "repo"
    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        locked_kit(root)
        yield root
    finally:
        use(before)


def build_all(root: Path, engine: BuildEngine) -> dict[str, str]:
    """Every platform built: platform → image id."""
    spec = Repo(root).load_ref("kit:25.03")
    registries = load_registries(root)
    out = {}
    for inputs in BuildInputs.each(root, spec, registries):
        built = build_image(
            root,
            inputs,
            registries,
            engine,
            Building(builder="test", credentials=NO_LOGIN, codec=DEFAULT),
            lambda _: None,
        )
        assert built.platform == inputs.platform.name
        out[inputs.platform.name] = built.image_id
    return out


def config_of(engine: BuildEngine, ref: str) -> dict[str, object]:
    image = engine.store[engine.tags[ref]]
    return json.loads(image.config)  # type: ignore[no-any-return]


def test_each_platform_is_built_from_its_own_base_image_and_says_its_platform(repo: Path) -> None:
    engine = BuildEngine()

    ids = build_all(repo, engine)

    amd64, arm64 = config_of(engine, "kit:25.03"), config_of(engine, "kit:25.03-arm64")
    # the engine said amd64 for both; the configs say what each image is for
    assert (amd64["architecture"], amd64["os"], "variant" in amd64) == ("amd64", "linux", False)
    assert (arm64["architecture"], arm64["os"], arm64["variant"]) == ("arm64", "linux", "v8")
    assert engine.tags["kit:25.03"] == ids["linux/amd64"]
    assert engine.tags["kit:25.03-arm64"] == ids["linux/arm64"] != ids["linux/amd64"]
    bases = [b["buildargs"]["BASE_IMAGE"].rpartition("@")[2] for b in engine.built]
    assert bases == [ON_AMD64, ON_ARM64]
    labels_amd64 = amd64["config"]["Labels"]  # type: ignore[index]
    labels_arm64 = arm64["config"]["Labels"]  # type: ignore[index]
    assert (labels_amd64[BASE_DIGEST_LABEL], labels_arm64[BASE_DIGEST_LABEL]) == (ON_AMD64, ON_ARM64)
    assert labels_amd64[INPUTS_LABEL] != labels_arm64[INPUTS_LABEL]  # each platform's inputs


def test_each_platform_is_reproducible_two_clean_builds_give_one_id(repo: Path, tmp_path: Path) -> None:
    first = build_all(repo, BuildEngine())
    use(Settings(cache=tmp_path / "another-cache"))  # a clean runner: no layer known
    second = build_all(repo, BuildEngine(clock=1_950_000_000))

    assert first == second


def test_each_platforms_layers_are_spooled_for_publish(repo: Path) -> None:
    engine = BuildEngine()
    build_all(repo, engine)

    for ref in ("kit:25.03", "kit:25.03-arm64"):
        top = engine.store[engine.tags[ref]].layers[-1]
        blob = CompressedMap(DEFAULT).get(top)
        assert blob is not None, ref
        assert blob_file(spool_dir(), blob.digest).is_file()


def test_an_image_of_these_inputs_is_not_built_again_per_platform(repo: Path) -> None:
    engine = BuildEngine()
    build_all(repo, engine)
    builds = len(engine.built)

    build_all(repo, engine)

    assert len(engine.built) == builds


def test_the_smoke_checks_of_a_platform_expect_its_machine_and_its_pins(repo: Path) -> None:
    spec = Repo(repo).load_ref("kit:25.03")

    on_arm = check_spec(spec, "sha256:" + "0" * 64, (), ARM64)
    on_amd = check_spec(spec, "sha256:" + "0" * 64, (), AMD64)

    assert (on_arm["machine"], on_amd["machine"]) == ("aarch64", "x86_64")
    assert on_arm["pip"][0]["version"] == "2.13.0"
    assert on_amd["pip"][0]["version"] == "2.13.0+cpu"
    assert on_arm["labels"]["io.xpu-release.component.torch"] == "2.13.0+cpu"  # the Dockerfile's


def test_repro_of_the_arm64_image_builds_it_twice_from_scratch_and_finds_one_id(repo: Path) -> None:
    engine = BuildEngine()
    spec = Repo(repo).load_ref("kit:25.03")

    how = Building(builder="test", credentials=NO_LOGIN)
    report = check(repo, spec, load_registries(repo), engine, how=how, on_line=lambda _: None, platform=ARM64)

    assert report.same, report
    assert engine.tags["kit:25.03-arm64"] == report.first
    assert "kit:25.03" not in engine.tags  # the amd64 image was not built
    assert [b["buildargs"]["BASE_IMAGE"].rpartition("@")[2] for b in engine.built] == [ON_ARM64, ON_ARM64]
