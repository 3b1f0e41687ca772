"""A mirror's copy is proven where it lands (#38): a damaged blob at the target is replaced, not
trusted; a source that sends other bytes (or more) puts nothing under the digest; a layout's
``index.json`` keeps what is not ours and is written once for thousands of referrers; a host
that does not answer is exit 10; the error for a missing tag fits what was typed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from xpu_release.cli import cli
from xpu_release.errors import DamagedFileError, WireError
from xpu_release.oci.layout import REF_NAME, Layout
from xpu_release.release.publishing.mirror import mirror
from xpu_release.release.publishing.sides import LayoutSide, RegistrySide, Then

from ..cli.test_no_internal_error import CLOSED
from ..fake_registry import State, fake_registry
from ..guard.hostile import snapshot
from ..oci.test_registry_client import client_for
from .layouts import blobs_of, damaged_blobs, release_layout
from .test_mirror import TAG, published

VERSION = "25.03"  # training-cpu-pytorch's, for the command line


@pytest.fixture
def registry() -> Iterator[tuple[str, State]]:
    with fake_registry() as found:
        yield found


def test_a_damaged_blob_already_in_the_target_layout_is_replaced_not_trusted(tmp_path: Path) -> None:
    image, docs = release_layout(tmp_path / "src", TAG)
    source, target = LayoutSide(Layout(tmp_path / "src")), Layout(tmp_path / "dst")
    first = mirror(source, LayoutSide(target), TAG, tmp_path / "cache")
    layer = image.layers[1].digest
    target.blob_path(layer).write_bytes(b"truncated")  # what a second run once left behind

    again = mirror(source, LayoutSide(target), TAG, tmp_path / "cache")

    assert first.ok, first.problems
    assert again.ok, again.problems
    assert (again.blobs_copied, again.blobs_replaced) == (1, 0)  # found before it was skipped
    assert damaged_blobs(target.root, blobs_of([image, *docs])) == []


def test_a_blob_damaged_between_the_copy_and_the_check_is_copied_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image, docs = release_layout(tmp_path / "src", TAG)
    source, target = LayoutSide(Layout(tmp_path / "src")), LayoutSide(Layout(tmp_path / "dst"))
    layer = image.layers[0].digest
    put = Layout.put_manifests
    damaged: list[str] = []

    def and_then_damage(self: Layout, *args: object, **kwargs: object) -> None:
        put(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.root == target.layout.root and not damaged:  # once the referrers are listed
            self.blob_path(layer).write_bytes(b"damaged by another hand")
            damaged.append(layer)

    monkeypatch.setattr(Layout, "put_manifests", and_then_damage)
    report = mirror(source, target, TAG, tmp_path / "cache")

    assert report.ok, report.problems
    assert report.blobs_replaced == 1
    assert damaged_blobs(target.layout.root, blobs_of([image, *docs])) == []


def test_a_damaged_blob_at_a_registry_target_is_read_back_found_and_uploaded_again(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    image, _ = release_layout(tmp_path / "src", TAG)
    source, target = LayoutSide(Layout(tmp_path / "src")), RegistrySide(client_for(host, state), "m/image")
    assert mirror(source, target, TAG, tmp_path / "cache").ok
    layer = image.layers[1].digest
    state.blobs[layer] = b"rotten" * 100  # the registry's storage went bad; HEAD still says present

    again = mirror(source, target, TAG, tmp_path / "cache")

    assert again.ok, again.problems
    assert (again.blobs_copied, again.blobs_replaced) == (1, 1)
    assert state.blobs[layer] != b"rotten" * 100


def test_a_target_that_keeps_a_damaged_blob_is_a_problem_naming_it_and_gets_no_tag(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    image, _ = release_layout(tmp_path / "src", TAG)
    layer = image.layers[1].digest
    state.blobs[layer] = b"rotten"  # already there, damaged, before the first copy

    class Stubborn(RegistrySide):  # keeps what it holds when it is sent again, as distribution does
        def store_blob(
            self, digest: str, size: int, blocks: Iterable[bytes], spool: Path, then: Then = None
        ) -> None:
            if digest in state.blobs:
                list(blocks)
                return
            super().store_blob(digest, size, blocks, spool, then)

    target = Stubborn(client_for(host, state), "m/image")
    report = mirror(LayoutSide(Layout(tmp_path / "src")), target, TAG, tmp_path / "cache")

    assert not report.ok
    assert any(layer in p and "hash to" in p and "remove it there" in p for p in report.problems)
    assert target.resolve(TAG) is None  # a broken copy is never visible at the tag


@pytest.mark.parametrize(
    ("lie", "said"),
    [
        (lambda held: held[::-1], ("hashes to", "nothing was copied from it")),
        # refused at the answer's declared length, before a byte is read (guard.bodies)
        (lambda held: held + b"x" * (4 << 20), ("not within the", "bytes expected; not read")),
    ],
    ids=["other bytes", "more bytes than listed"],
)
def test_a_source_registry_that_lies_about_a_blob_puts_nothing_under_its_digest(
    registry: tuple[str, State], tmp_path: Path, lie: Callable[[bytes], bytes], said: tuple[str, ...]
) -> None:
    host, state = registry
    source, image = published(host, state, tmp_path)
    layer = image.layers[0].digest
    state.blobs[layer] = lie(state.blobs[layer])
    target = Layout(tmp_path / "usb")

    with pytest.raises(WireError) as lied:
        mirror(source, LayoutSide(target), TAG, tmp_path / "cache")

    assert layer in lied.value.message
    assert all(words in lied.value.message for words in said), lied.value.message
    assert not target.blob_path(layer).exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == []  # the run's spool is gone


def test_a_damaged_source_layout_is_exit_12_and_the_target_gets_no_blob_under_that_name(
    tmp_path: Path,
) -> None:
    image, _ = release_layout(tmp_path / "src", TAG)
    source = Layout(tmp_path / "src")
    layer = image.layers[0].digest
    source.blob_path(layer).write_bytes(b"flipped bits")
    target = Layout(tmp_path / "dst")

    with pytest.raises(DamagedFileError) as damaged:
        mirror(LayoutSide(source), LayoutSide(target), TAG, tmp_path / "cache")

    assert damaged.value.exit_code == 12
    assert layer in damaged.value.message
    assert not target.blob_path(layer).exists()


@pytest.mark.parametrize("which", ["last layer", "a referrer's document"])
@pytest.mark.parametrize("target_is", ["new", "another release's layout"])
def test_a_damaged_source_layout_is_found_before_the_first_write_and_leaves_the_target_as_it_was(
    tmp_path: Path, which: str, target_is: str
) -> None:
    image, docs = release_layout(tmp_path / "src", TAG, layers=(3000, 9000, 5000), referrers=3)
    source = Layout(tmp_path / "src")
    blob = image.layers[-1].digest if which == "last layer" else docs[-1].layers[0].digest
    source.blob_path(blob).write_bytes(source.blob_path(blob).read_bytes()[::-1])  # its size, not its digest
    target = tmp_path / "dst"
    if target_is != "new":
        release_layout(target, "24.12", seed="b")
    before = snapshot(target) if target.exists() else None

    with pytest.raises(DamagedFileError) as damaged:
        mirror(LayoutSide(source), LayoutSide(Layout(target)), TAG, tmp_path / "cache")

    assert blob in damaged.value.message
    assert (snapshot(target) if target.exists() else None) == before  # nothing made, nothing added


# --- index.json: kept, locked, written once --------------------------------------------------


def test_fields_and_entries_of_index_json_that_are_not_ours_are_kept(tmp_path: Path) -> None:
    release_layout(tmp_path / "src", TAG)
    other, _ = release_layout(tmp_path / "dst", "other-1.0", seed="other", referrers=0)
    index_path = tmp_path / "dst" / "index.json"
    index = json.loads(index_path.read_text())
    index["annotations"] = {"org.example.made-by": "another tool"}
    index["x-unknown"] = [1, 2, 3]
    index_path.write_text(json.dumps(index))

    report = mirror(LayoutSide(Layout(tmp_path / "src")), LayoutSide(Layout(tmp_path / "dst")), TAG,
                    tmp_path / "cache")  # fmt: skip

    after = json.loads(index_path.read_text())
    assert report.ok, report.problems
    assert after["annotations"] == {"org.example.made-by": "another tool"}
    assert after["x-unknown"] == [1, 2, 3]
    tags = {(e.get("annotations") or {}).get(REF_NAME): e["digest"] for e in after["manifests"]}
    assert tags["other-1.0"] == other.digest
    assert tags[TAG] == report.digest


def test_thousands_of_referrers_write_index_json_a_few_times_and_show_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 2000
    release_layout(tmp_path / "src", TAG, referrers=count)
    target = Layout(tmp_path / "dst")
    writes = []
    write = Layout._write_index

    def counted(self: Layout, document: dict[str, object]) -> None:
        if self.root == target.root:
            writes.append(len(document["manifests"]))  # type: ignore[arg-type]
        write(self, document)

    monkeypatch.setattr(Layout, "_write_index", counted)
    lines: list[str] = []
    started = time.monotonic()

    report = mirror(
        LayoutSide(Layout(tmp_path / "src")), LayoutSide(target), TAG, tmp_path / "cache", lines.append
    )

    assert report.ok, report.problems
    assert len(report.referrers) == count
    assert len(writes) <= 3  # made, the referrers, the tag: not once per referrer
    progress = [line for line in lines if line.startswith("referrers:")]
    assert progress[-1] == f"referrers: {count:,} of {count:,} checked"
    assert 5 <= len(progress) <= 21  # every 5 %, not every referrer
    assert time.monotonic() - started < 120  # quadratic took minutes at this count's scale


# --- what the command says -------------------------------------------------------------------


def _mirror(repo: Path, tmp_path: Path, *args: str) -> Result:
    env = {"XPU_RELEASE_CACHE": str(tmp_path / "cache")}
    return CliRunner().invoke(cli, ["--root", str(repo), *args], env=env, catch_exceptions=False)


def test_a_mirror_host_that_does_not_answer_is_exit_10(repo: Path, tmp_path: Path) -> None:
    release_layout(tmp_path / "src", VERSION)
    regs = tmp_path / "regs.yaml"
    regs.write_text(CLOSED)

    result = _mirror(repo, tmp_path, "--registries", str(regs), "mirror", f"training-cpu-pytorch:{VERSION}",
                     "--from", f"oci:{tmp_path / 'src'}", "--to", "127.0.0.1:1/ns/image")  # fmt: skip

    assert result.exit_code == 10, result.output
    assert "does not answer" in result.stderr
    assert "Traceback" not in result.output


def test_a_missing_tag_at_a_named_source_does_not_ask_for_the_source_again(
    repo: Path, tmp_path: Path
) -> None:
    release_layout(tmp_path / "src", "another-version")

    result = _mirror(repo, tmp_path, "mirror", f"training-cpu-pytorch:{VERSION}", "--from",
                     f"oci:{tmp_path / 'src'}", "--to", f"oci:{tmp_path / 'dst'}")  # fmt: skip

    assert result.exit_code == 11, result.output
    assert f"serves nothing at {VERSION}" in result.stderr
    assert "name the source with --from" not in result.stderr
    assert "--from" in result.stderr  # what to check instead
    assert not (tmp_path / "dst").exists()  # nothing made for a copy that could not start


def test_a_blobs_folder_that_leads_out_of_the_target_layout_is_exit_13_and_nothing_is_written_there(
    repo: Path, tmp_path: Path
) -> None:
    release_layout(tmp_path / "src", VERSION)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "dst" / "blobs").mkdir(parents=True)
    (tmp_path / "dst" / "blobs" / "sha256").symlink_to(outside)

    result = _mirror(repo, tmp_path, "mirror", f"training-cpu-pytorch:{VERSION}", "--from",
                     f"oci:{tmp_path / 'src'}", "--to", f"oci:{tmp_path / 'dst'}")  # fmt: skip

    assert result.exit_code == 13, result.output
    assert "is a symbolic link" in result.stderr
    assert list(outside.iterdir()) == []
