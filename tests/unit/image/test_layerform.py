"""How an image's layers are written is one of its inputs: image.yaml's ``layers`` (gzip unless
it says estargz) and, for eStargz, the codec whose offsets the TOC holds and the version's
prefetch profile. A gzip image's inputs digest is what it was before forms existed; a profile
that is not a list of absolute paths is refused naming its file and line."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from xpu_release.errors import ManifestError, StaleError
from xpu_release.image.inputs import BuildInputs, inputs_sha256
from xpu_release.image.layerform import GZIP, LayerForm, layer_form, read_profile
from xpu_release.image.profile import Profile, committed, stale
from xpu_release.image.render import image_layers
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.codec import DEFAULT, Codec

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "registries.yaml", tmp_path / "registries.yaml")
    return tmp_path


def test_gzip_is_the_default_and_adds_nothing_to_the_inputs() -> None:
    assert LayerForm() == GZIP
    assert GZIP.basis() is None
    assert GZIP.key == GZIP.blob_key == "gzip"  # the maps of a gzip image are what they were


def test_estargz_holds_its_codec_and_profile_in_the_inputs() -> None:
    plain = LayerForm(estargz=True)
    profiled = LayerForm(estargz=True, prefetch=("/usr/bin/python3",))
    other_codec = LayerForm(estargz=True, codec=Codec("zlib", 6))
    assert plain.basis() is not None
    assert plain.basis() != profiled.basis() != other_codec.basis()
    assert DEFAULT.key in str(plain.basis())
    assert len({plain.key, profiled.key, other_codec.key}) == 3


def test_an_image_that_says_estargz_reads_its_versions_profile(repo: Path) -> None:
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.03")
    (repo / "images" / "training-cpu-pytorch" / "image.yaml").write_text(
        "template: Dockerfile.j2\nlayers: estargz\n"
    )
    (repo / "images" / "training-cpu-pytorch" / "25.03" / "prefetch.txt").write_text(
        "# made by a run\n/opt/venv/bin/python\n\n/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    )
    form = image_layers(repo, spec)
    assert form.estargz
    assert form.prefetch == ("/opt/venv/bin/python", "/usr/lib/x86_64-linux-gnu/libc.so.6")


def test_the_form_changes_the_inputs_digest_and_gzip_leaves_it_as_it_was(repo: Path) -> None:
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.03")
    (repo / "images" / "training-cpu-pytorch" / "image.yaml").write_text("template: Dockerfile.j2\n")
    before = BuildInputs.read(repo, spec, load_registries(repo))
    (repo / "images" / "training-cpu-pytorch" / "image.yaml").write_text(
        "template: Dockerfile.j2\nlayers: estargz\n"
    )
    after = BuildInputs.read(repo, spec, load_registries(repo))
    assert after.form.estargz
    assert after.digest != before.digest
    assert before.digest == inputs_sha256(spec, after.dockerfile.text, after.lock, after.platform)


def test_an_unknown_form_in_image_yaml_is_refused_naming_the_key(repo: Path) -> None:
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.03")
    (repo / "images" / "training-cpu-pytorch" / "image.yaml").write_text(
        "template: Dockerfile.j2\nlayers: stargz\n"
    )
    with pytest.raises(ManifestError) as caught:
        image_layers(repo, spec)
    said = str(caught.value)
    assert "image.yaml" in said
    assert "layers" in said
    assert "estargz" in said  # what to write instead


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("relative/path\n", ":1:1: 'relative/path' is not absolute (a path starts with /)"),
        ("/ok\n/bad\x01\n", ":2:1: '/bad\\x01' holds the control character U+0001"),
        ("/ok\n/a\x00b\n", ":2:1: '/a\\x00b' holds the control character U+0000"),
        ("/same\n/other\n/same\n", ":3:1: '/same' is listed before, at line 1"),
        (b"/ok\n\xff\xfe/x\n", ":2:1: is not UTF-8"),
        ("/" + "a" * 200_000 + "\n", ":1:1: is 200,001 characters long; a path has at most 4,096"),
        ("/trailing \n", ":1:1: '/trailing ' begins or ends with white space"),
        ("/ok\n/a\u2028b\n/after\n", ":2:1: '/a\\u2028b' holds the control character U+2028"),
    ],
    ids=["relative", "control", "nul", "twice", "not-utf8", "too-long", "white-space", "u2028"],
)
def test_a_profile_that_is_no_list_of_paths_is_refused_naming_the_line_and_why(
    tmp_path: Path, text: str | bytes, said: str
) -> None:
    path = tmp_path / "prefetch.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ManifestError) as caught:
        read_profile(path, "images/x/1/prefetch.txt")
    assert f"images/x/1/prefetch.txt{said}" in str(caught.value)
    assert "remake the file with `xpu-release profile`" in str(caught.value)


def test_every_bad_line_of_a_profile_is_named_not_only_the_first(tmp_path: Path) -> None:
    path = tmp_path / "prefetch.txt"
    path.write_text("# header\n/ok\nbad-6\n/fine\n\nbad-9\n" + "x\n" * 30)
    with pytest.raises(ManifestError) as caught:
        read_profile(path, "p.txt")
    lines = [p.line for p in caught.value.problems]
    assert lines[:2] == [3, 6]
    assert len(caught.value.problems) == 21  # twenty named, the rest counted
    assert "and 12 more lines like these" in str(caught.value)


def test_no_profile_file_is_an_empty_profile(tmp_path: Path) -> None:
    assert layer_form(tmp_path, "x", "1", "estargz") == LayerForm(estargz=True)
    assert layer_form(tmp_path, "x", "1", "gzip") == GZIP


def _spec_of(image: str, version: str) -> Any:
    return SimpleNamespace(image=image, version=version, ref=f"{image}:{version}")


def test_a_missing_profile_is_named_missing_before_any_run_not_stale(tmp_path: Path) -> None:
    with pytest.raises(StaleError) as caught:
        committed(tmp_path, _spec_of("x", "1"))
    assert "images/x/1/prefetch.txt is missing" in str(caught.value)
    assert "xpu-release profile x:1" in str(caught.value)


def test_a_stale_profile_names_what_the_workload_opens_now(tmp_path: Path) -> None:
    path = tmp_path / "images" / "x" / "1" / "prefetch.txt"
    path.parent.mkdir(parents=True)
    path.write_text("/a\n/b\n")
    listed = committed(tmp_path, _spec_of("x", "1"))
    stale(tmp_path, Profile(ref="x:1", path=path, files=("/b", "/a")), listed)  # the same files: current
    with pytest.raises(StaleError) as caught:
        stale(tmp_path, Profile(ref="x:1", path=path, files=("/a", "/c")), listed)
    said = str(caught.value)
    assert "+ /c" in said
    assert "- /b" in said
    assert "xpu-release profile x:1" in said


def test_a_version_without_a_profile_takes_the_one_of_the_version_it_extends(tmp_path: Path) -> None:
    earlier = tmp_path / "images" / "x" / "1" / "prefetch.txt"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("/usr/bin/python3\n")
    assert layer_form(tmp_path, "x", "2", "estargz", extends="1").prefetch == ("/usr/bin/python3",)
    own = tmp_path / "images" / "x" / "2" / "prefetch.txt"
    own.parent.mkdir(parents=True)
    own.write_text("/opt/venv/bin/python\n")
    assert layer_form(tmp_path, "x", "2", "estargz", extends="1").prefetch == ("/opt/venv/bin/python",)


def test_a_bump_of_an_estargz_image_keeps_its_predecessors_profile_and_so_its_layers(repo: Path) -> None:
    """A new SDK that changes only its environment ships no new layer: its eStargz layers are
    written with the same profile as the version it extends."""
    (repo / "manifests" / "pytorch-cpu-sdk" / "2.13.1.yaml").write_text(
        'image: pytorch-cpu-sdk\nversion: "2.13.1"\nextends: "2.13.0"\n'
    )
    old = image_layers(repo, Repo(repo).load_ref("pytorch-cpu-sdk:2.13.0"))
    new = image_layers(repo, Repo(repo).load_ref("pytorch-cpu-sdk:2.13.1"))
    assert old.prefetch
    assert new == old


def test_validate_names_every_bad_line_of_a_committed_profile(repo: Path) -> None:
    """The profile is an input of the image: `validate` reads it as it reads the manifests, so
    what `release` would refuse is refused here first (exit 2, file:line, what to do)."""
    from ..helpers import run

    profile = repo / "images" / "training-cpu-pytorch" / "25.03" / "prefetch.txt"
    lines = profile.read_text().splitlines()
    lines[5], lines[8] = "relative/path", lines[6]  # a relative path; a path listed twice
    profile.write_text("\n".join(lines) + "\n")

    result = run(repo, "validate")

    assert result.exit_code == 2, result.stderr
    assert (
        "images/training-cpu-pytorch/25.03/prefetch.txt:6:1: 'relative/path' is not absolute" in result.stderr
    )
    assert "prefetch.txt:9:1:" in result.stderr
    assert "is listed before, at line 7" in result.stderr
    assert "Traceback" not in result.stderr
