"""A push with no blob for an image's eStargz layer writes it again from the engine's export; the
write is checked against the layer the image holds. One that comes out different is made once
more (a write that varied once, seen here twice and not explained, publishes the tested layer);
one that differs again refuses to publish, saying whether the two writes agreed."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from xpu_release.errors import PublishError
from xpu_release.oci.codec import DEFAULT
from xpu_release.oci.members import Blob
from xpu_release.release.publishing import push

BUILT = "sha256:" + "b" * 64
OTHER = "sha256:" + "7" * 64
THIRD = "sha256:" + "3" * 64


class _Writes:
    """The eStargz writer, answering each write with the next digest of ``answers``."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls = list(answers), 0

    def __call__(self, *_: Any) -> str:
        self.calls += 1
        return self.answers.pop(0)


def _blob(diff_id: str) -> Blob:
    return Blob(digest="sha256:" + diff_id[-64:][::-1], size=1, media_type=DEFAULT.media_type)


@pytest.fixture
def remaking(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[push._Remaking, list[str], list[Blob]]]:
    """A ``_Remaking`` sink fed one layer that holds a TOC, and what it says and keeps."""
    monkeypatch.setattr(push, "written_profile", lambda _path: ("usr/bin/python3",))
    said: list[str] = []
    kept: list[Blob] = []
    how = SimpleNamespace(form=SimpleNamespace(codec=DEFAULT, blob_key="estargz"), on_line=said.append)
    lazy = SimpleNamespace(get=lambda d: _blob(d))
    with ThreadPoolExecutor(max_workers=1) as pool:
        sink = push._Remaking(how, pool, lazy, lambda _d, blob: kept.append(blob))  # type: ignore[arg-type]
        sink.write(b"the layer's tar, as the engine exported it")
        yield sink, said, kept


def test_a_write_that_gives_the_built_layer_is_kept_at_once(
    remaking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, said, kept = remaking
    writes = _Writes([BUILT])
    monkeypatch.setattr(push, "spool_estargz", writes)
    sink.keep(BUILT)
    assert (writes.calls, kept, said) == (1, [_blob(BUILT)], [])


def test_a_write_that_varied_once_is_made_again_and_the_built_layer_published(
    remaking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, said, kept = remaking
    writes = _Writes([OTHER, BUILT])
    monkeypatch.setattr(push, "spool_estargz", writes)
    sink.keep(BUILT)
    assert writes.calls == 2
    assert kept == [_blob(BUILT)]
    assert said == [
        f"the eStargz layer {BUILT[:19]} written again came out as {OTHER[:19]}; writing it once more"
    ]


def test_two_writes_that_agree_on_another_layer_refuse_naming_it_once(
    remaking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, _, kept = remaking
    monkeypatch.setattr(push, "spool_estargz", _Writes([OTHER, OTHER]))
    with pytest.raises(PublishError) as refused:
        sink.keep(BUILT)
    assert f"written again on this runner is {OTHER}: its codec" in str(refused.value)
    assert kept == []


def test_two_writes_that_disagree_refuse_naming_both(remaking: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sink, _, kept = remaking
    monkeypatch.setattr(push, "spool_estargz", _Writes([OTHER, THIRD]))
    with pytest.raises(PublishError) as refused:
        sink.keep(BUILT)
    assert f"written again on this runner is {OTHER}, then {THIRD}: its codec" in str(refused.value)
    assert kept == []


def test_the_exported_tar_is_removed_however_the_write_ends(
    remaking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, _, _ = remaking
    monkeypatch.setattr(push, "spool_estargz", _Writes([OTHER, OTHER]))
    folder = Path(sink._dir.name)
    with pytest.raises(PublishError):
        sink.keep(BUILT)
    assert not folder.exists()
