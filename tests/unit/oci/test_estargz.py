"""eStargz layers: our writer's layer is a pure function of its files, codec and profile; every
gzip reader reads it as the tar it is; the stargz snapshotter's own reader accepts it (and refuses
it once a byte is wrong); and ``LayerCheck`` holds a TOC against the blob, so that one that lies
(about a file, an offset, a chunk, a link) is named, never trusted."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from xpu_release.oci import estargz
from xpu_release.oci.estargz import (
    FOOTER_SIZE,
    NO_PREFETCH_LANDMARK,
    PREFETCH_LANDMARK,
    TOC_DIGEST_ANNOTATION,
    TOC_NAME,
    UNCOMPRESSED_SIZE_ANNOTATION,
)

from ...estargz_tool import check
from .estargz_layers import BIG, MIB, layer_tar, problem_of, toc_of, with_toc, written

# --- the writer ----------------------------------------------------------------------------------


def test_the_same_layer_gives_the_same_tar_and_blob_every_time() -> None:
    source = layer_tar()
    first, tar1, blob1 = written(source)
    second, tar2, blob2 = written(source)
    assert (first, tar1, blob1) == (second, tar2, blob2)
    assert first.diff_id == "sha256:" + hashlib.sha256(tar1).hexdigest()
    assert first.blob_digest == "sha256:" + hashlib.sha256(blob1).hexdigest()
    assert first.uncompressed_size == len(tar1)
    assert first.blob_size == len(blob1)


def test_any_gzip_reader_unpacks_the_blob_to_the_tar_the_engine_loads() -> None:
    w, tar_bytes, blob = written(layer_tar())
    assert gzip.decompress(blob) == tar_bytes  # Python's gzip reads every member, the footer too
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        names = tar.getnames()
        big = tar.extractfile("usr/bin/big")
        assert big is not None
        assert big.read() == BIG
    assert names[0] == NO_PREFETCH_LANDMARK
    assert names[-1] == TOC_NAME
    assert w.annotations() == {
        TOC_DIGEST_ANNOTATION: w.toc_digest,
        UNCOMPRESSED_SIZE_ANNOTATION: str(len(tar_bytes)),
    }


def test_the_profiles_files_come_first_after_their_folders_then_the_landmark() -> None:
    _, _, blob = written(layer_tar(), prefetch=("/usr/bin/small", "/usr/bin/hard", "/not/in/this/layer"))
    names = [e["name"] for e in toc_of(blob)["entries"] if e["type"] != "chunk"]
    assert names[:5] == ["usr", "usr/bin", "usr/bin/small", "usr/bin/hard", PREFETCH_LANDMARK]
    assert sorted(names[5:]) == sorted(["usr/bin/big", "usr/bin/exact", "usr/bin/empty", "usr/lib",
                                        "usr/bin/sym"])  # fmt: skip


def test_the_profile_changes_the_layer_only_when_it_names_something_in_it() -> None:
    plain = written(layer_tar())[0]
    assert written(layer_tar(), prefetch=("/elsewhere",))[0] == plain
    assert written(layer_tar(), prefetch=("/usr/bin/small",))[0].diff_id != plain.diff_id


def test_each_chunk_of_4_mib_starts_a_gzip_member_at_the_offset_the_toc_names() -> None:
    _, _, blob = written(layer_tar())
    entries = toc_of(blob)["entries"]
    big = [e for e in entries if e["name"] == "usr/bin/big"]
    assert [e["type"] for e in big] == ["reg", "chunk", "chunk"]
    assert [e.get("chunkOffset", 0) for e in big] == [0, 4 * MIB, 8 * MIB]
    assert [e.get("chunkSize") for e in big] == [4 * MIB, 4 * MIB, None]  # the last is what is left
    for e in big:
        start = e.get("chunkOffset", 0)
        data = gzip.GzipFile(fileobj=io.BytesIO(blob[e["offset"] :])).read(min(4 * MIB, len(BIG) - start))
        assert "sha256:" + hashlib.sha256(data).hexdigest() == e["chunkDigest"]
        assert data == BIG[start : start + len(data)]
    (exact,) = [e for e in entries if e["name"] == "usr/bin/exact"]
    assert exact["chunkSize"] == 4 * MIB  # a whole chunk says so, as the snapshotter's writer does


def test_the_footer_is_51_bytes_an_empty_gzip_member_naming_the_tocs_member() -> None:
    _, _, blob = written(layer_tar())
    tail = blob[-FOOTER_SIZE:]
    assert len(estargz.footer(1)) == FOOTER_SIZE
    assert gzip.decompress(tail) == b""
    offset = int(tail[16:32], 16)
    assert tail[32:38] == b"STARGZ"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob[offset:])), mode="r:") as tar:
        assert tar.getnames() == [TOC_NAME]


def test_a_layer_that_holds_a_landmark_or_toc_already_is_written_with_its_own() -> None:
    once, tar_once, _ = written(layer_tar())
    again, tar_again, _ = written(tar_once)
    assert again.diff_id == once.diff_id
    assert tar_again == tar_once


# --- the snapshotter's own reader ------------------------------------------------------------


def test_the_snapshotters_reader_accepts_the_layer_and_reads_every_file_through_the_toc(
    tmp_path: Path,
) -> None:
    w, _, blob = written(layer_tar(), prefetch=("/usr/bin/small",))
    (tmp_path / "blob").write_bytes(blob)
    result = check(tmp_path / "blob", w.toc_digest)
    assert result.returncode == 0, result.stderr
    assert "ok 6 files, landmark .prefetch.landmark" in result.stdout
    assert f"usr/bin/big {len(BIG)}" in result.stdout


def test_the_snapshotters_reader_refuses_a_flipped_byte_and_another_toc_digest(tmp_path: Path) -> None:
    w, _, blob = written(layer_tar())
    damaged = bytearray(blob)
    damaged[len(blob) // 2] ^= 1
    (tmp_path / "damaged").write_bytes(damaged)
    (tmp_path / "blob").write_bytes(blob)
    assert check(tmp_path / "damaged", w.toc_digest).returncode != 0
    wrong = check(tmp_path / "blob", "sha256:" + "0" * 64)
    assert wrong.returncode != 0
    assert "invalid TOC JSON" in wrong.stderr


# --- LayerCheck: the TOC held against the blob --------------------------------------------------


@pytest.mark.parametrize("block", [1, 511, 4096, MIB, 64 * MIB])
def test_our_layer_passes_however_its_bytes_arrive(block: int) -> None:
    w, _, blob = written(layer_tar(), prefetch=("/usr/bin/big",))
    if block == 1:
        blob_small = written(layer_tar({"a": b"x" * 3000, "b/": None}))
        assert problem_of(blob_small[2], blob_small[0].annotations(), block) is None
        return
    assert problem_of(blob, w.annotations(), block) is None


def _set(name: str, key: str, value: Any, kind: str = "reg") -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for e in doc["entries"]:
            if e["name"] == name and e["type"] == kind:
                e[key] = value
                return
        msg = f"no {name}"
        raise AssertionError(msg)

    return edit


def _chunk(index: int, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        [e for e in doc["entries"] if e["name"] == "usr/bin/big"][index][key] = value

    return edit


def _hard_link_to_itself(doc: dict[str, Any]) -> None:
    for e in doc["entries"]:
        if e["name"] == "usr/bin/hard":
            e["linkName"] = "usr/bin/hard"


LIES = {
    "a setuid mode the tar does not give": (_set("usr/bin/small", "mode", 0o4755), "another mode"),
    "another owner": (_set("usr/bin/small", "uid", 0), None),  # 0 is what the tar says: no lie
    "a file's content digest": (_set("usr/bin/small", "digest", "sha256:" + "1" * 64), "not its content"),
    "a chunk's digest": (_chunk(1, "chunkDigest", "sha256:" + "2" * 64), "digest its bytes do not hash to"),
    "a chunk's offset": (_chunk(1, "offset", 1234), "other bytes than the blob holds"),
    "a chunk's size": (_chunk(0, "chunkSize", 2 * MIB), "other bytes than the blob holds"),
    "a link's target": (_set("usr/bin/sym", "linkName", "/etc/shadow", kind="symlink"), "another linkName"),
    "an extended attribute": (
        _set("usr/bin/sym", "xattrs", {"user.note": "bGll"}, kind="symlink"),
        "another xattrs",
    ),
    "an xattr that is not base64": (
        _set("usr/bin/sym", "xattrs", {"user.note": "**"}, kind="symlink"),
        "not base64",
    ),
    "a name": (_set("usr/bin/small", "name", "usr/bin/smalL"), "another name"),
    "a hard link to itself": (_hard_link_to_itself, "another linkName"),
    "a file it does not hold": (
        lambda d: d["entries"].append({"name": "x", "type": "dir"}),
        "lists 11 entries",
    ),
    "a file left out": (lambda d: d["entries"].pop(3), "entries"),
    "a count of the wrong type": (_set("usr/bin/small", "size", "6"), "wrong type"),
    "no sha256 digest": (_set("usr/bin/small", "digest", "md5:00"), "no sha256 digest"),
    "another version": (lambda d: d.update(version=2), "not an eStargz TOC of version 1"),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_toc_that_lies_about_the_layer_is_named_even_when_its_digest_is_announced(lie: str) -> None:
    _, _, blob = written(layer_tar())
    edit, said = LIES[lie]
    lying, annotations = with_toc(blob, edit)
    problem = problem_of(lying, annotations)
    if said is None:
        assert problem is None
    else:
        assert problem is not None, problem
        assert said in problem, problem


def test_a_hard_link_to_a_later_entry_is_no_link_a_reader_can_follow() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        link = tarfile.TarInfo("a/link")
        link.type, link.linkname, link.mtime = tarfile.LNKTYPE, "a/later", 946684800
        tar.addfile(link)
        later = tarfile.TarInfo("a/later")
        later.size, later.mtime = 1, 946684800
        tar.addfile(later, io.BytesIO(b"z"))
    w, _, blob = written(out.getvalue())
    problem = problem_of(blob, w.annotations())
    assert problem is not None
    assert "names no entry before it" in problem


def test_the_annotations_must_name_the_toc_and_the_size() -> None:
    w, _, blob = written(layer_tar())
    wrong_digest = {**w.annotations(), TOC_DIGEST_ANNOTATION: "sha256:" + "3" * 64}
    wrong_size = {**w.annotations(), UNCOMPRESSED_SIZE_ANNOTATION: str(w.uncompressed_size + 1)}
    small_size = {**w.annotations(), UNCOMPRESSED_SIZE_ANNOTATION: "1000"}
    assert "the manifest's annotation says" in (problem_of(blob, wrong_digest) or "")
    assert "the manifest's annotation says" in (problem_of(blob, wrong_size) or "")
    assert "more than the 1000 bytes" in (problem_of(blob, small_size) or "")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda b: b[:-1], "ends inside a gzip member"),
        (lambda b: b[: len(b) // 2], "ends inside a gzip member"),
        (lambda b: b[:-FOOTER_SIZE], "footer"),
        (lambda b: b + estargz.footer(0), "no member holding the TOC"),
        (lambda b: b[:-FOOTER_SIZE] + estargz.footer(12345), "no member holding the TOC"),
        (lambda b: b"garbage" + b, "no gzip stream"),
        (lambda b: b"", "no stargz.index.json"),
    ],
    ids=["cut by a byte", "cut in half", "no footer", "two footers", "a footer that points elsewhere",
         "garbage first", "empty"],
)  # fmt: skip
def test_a_damaged_blob_is_named_never_a_crash(damage: Callable[[bytes], bytes], said: str) -> None:
    w, _, blob = written(layer_tar({"f": b"data" * 100}))
    problem = problem_of(damage(blob), w.annotations())
    assert problem is not None, problem
    assert said in problem, problem


def test_a_toc_with_more_entries_than_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from xpu_release.guard import limits

    monkeypatch.setattr(limits, "MAX_TOC_ENTRIES", 3)
    w, _, blob = written(layer_tar({f"f{i}": b"x" for i in range(5)}))
    problem = problem_of(blob, w.annotations())
    assert problem is not None
    assert "more than 3 entries" in problem


def test_a_member_that_inflates_without_end_stops_at_the_size_the_manifest_says() -> None:
    bomb = gzip.compress(b"\0" * (64 * MIB), mtime=0)  # 64 KiB that inflate to 64 MiB of zero blocks
    problem = problem_of(
        bomb, {TOC_DIGEST_ANNOTATION: "sha256:" + "0" * 64, UNCOMPRESSED_SIZE_ANNOTATION: "4096"}
    )
    assert problem is not None
    assert "more than the 4096 bytes" in problem


def test_the_toc_json_is_read_by_the_guarded_reader() -> None:
    _, _, blob = written(layer_tar({"f": b"x"}))

    def deep(doc: dict[str, Any]) -> None:
        nested: Any = []
        for _ in range(100):
            nested = [nested]
        doc["entries"][0]["deep"] = nested

    lying, annotations = with_toc(blob, deep)
    assert "nested" in (problem_of(lying, annotations) or "")


def test_xattr_values_are_base64_of_their_bytes_in_the_toc() -> None:
    _, _, blob = written(layer_tar())
    (sym,) = [e for e in toc_of(blob)["entries"] if e["name"] == "usr/bin/sym"]
    assert base64.b64decode(sym["xattrs"]["user.note"]) == b"\xff\xfe binary"
