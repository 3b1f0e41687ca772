"""One blob at several endpoints, checked in one pass: each copy's verdict is exactly what hashing
that copy alone would say, though only the copies that differ are hashed on their own."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.oci.blobcheck import Source, check_copies

from ...conftest import examples
from ..fake_registry import State, digest_of, fake_registry
from .test_codec import client_for

REPO = "ns/image"
BLOB = os.urandom(300_000)
DIGEST = digest_of(BLOB)
CHUNK = 1 << 16  # the blob spans five blocks
Endpoints = list[tuple[Source, State]]  # where each copy is read, and its registry's state


@pytest.fixture(scope="module")
def three() -> Iterator[Endpoints]:
    """Three endpoints, each a registry of its own."""
    with fake_registry() as a, fake_registry() as b, fake_registry() as c:
        yield [(Source(client_for(host, state), REPO), state) for host, state in (a, b, c)]


def serve(endpoints: Endpoints, copies: list[bytes | None]) -> list[Source]:
    """Each endpoint stores its copy of BLOB under BLOB's digest (None: has none)."""
    for (_, state), copy in zip(endpoints, copies, strict=True):
        state.blobs.clear()
        state.faults.cut_blob_gets = 0
        if copy is not None:
            state.blobs[DIGEST] = copy
    return [source for source, _ in endpoints]


def alone(copy: bytes) -> str | None:
    """What hashing this copy alone says of it."""
    if digest_of(copy) != DIGEST:
        return f"its bytes hash to sha256:{hashlib.sha256(copy).hexdigest()} ({len(copy)} bytes)"
    return None


def says(result: tuple[str | None, int], copy: bytes) -> bool:
    """``result`` is what reading ``copy`` alone says: a copy longer than the manifest lists is
    not read at all (the registry declares its length: no byte past the bound is taken);
    any other is hashed, and named by what it hashes to."""
    problem, got = result
    if len(copy) > len(BLOB):
        return got == 0 and problem is not None and f"declares {len(copy)} bytes" in problem
    return result == (alone(copy), len(copy))


def flipped(at: int, blob: bytes = BLOB) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 1]) + blob[at + 1 :]


def test_copies_equal_to_the_blob_are_all_fine_and_each_counted_whole(three: Endpoints) -> None:
    counted: dict[int, int] = {0: 0, 1: 0, 2: 0}

    def counter(i: int) -> Source:
        source = three[i][0]
        return Source(source.client, source.repo, lambda n: counted.__setitem__(i, counted[i] + n))

    serve(three, [BLOB, BLOB, BLOB])
    results = check_copies([counter(i) for i in range(3)], DIGEST, len(BLOB), CHUNK).copies

    assert results == [(None, len(BLOB))] * 3
    assert counted == {0: len(BLOB), 1: len(BLOB), 2: len(BLOB)}


@pytest.mark.parametrize("which", [0, 1, 2], ids=["the first", "the second", "the last"])
def test_a_flipped_byte_in_one_copy_names_that_copy_and_what_it_hashes_to(
    three: Endpoints, which: int
) -> None:
    copies = [BLOB, BLOB, BLOB]
    copies[which] = flipped(200_000)

    results = check_copies(serve(three, list(copies)), DIGEST, len(BLOB), CHUNK).copies

    assert [problem for problem, _ in results] == [alone(c) for c in copies]
    assert results[which][0] is not None
    assert hashlib.sha256(copies[which]).hexdigest() in results[which][0]


def test_a_copy_cut_short_or_grown_is_named_with_its_length(three: Endpoints) -> None:
    copies = [BLOB[: 3 * CHUNK], BLOB, BLOB + b"x"]  # ends on a block's edge; one byte too many

    results = check_copies(serve(three, list(copies)), DIGEST, len(BLOB), CHUNK).copies

    assert all(says(r, c) for r, c in zip(results, copies, strict=True)), results
    assert results[2][0] is not None
    assert "300001" in results[2][0]


def test_a_missing_copy_is_missing_and_the_others_are_still_checked(three: Endpoints) -> None:
    results = check_copies(serve(three, [None, flipped(5), BLOB]), DIGEST, len(BLOB), CHUNK).copies

    assert results == [("missing", 0), (alone(flipped(5)), len(BLOB)), (None, len(BLOB))]


def test_a_broken_download_of_the_first_copy_leaves_the_others_checked(three: Endpoints) -> None:
    serve(three, [BLOB, BLOB, flipped(299_999)])
    three[0][1].faults.cut_blob_gets = 1  # half the body, then the connection closes

    fed = bytearray()
    checked = check_copies([s for s, _ in three], DIGEST, len(BLOB), CHUNK, also=fed.extend)
    results = checked.copies

    assert results[0][0] is not None
    assert "broke" in results[0][0]
    assert results[1:] == [(None, len(BLOB)), (alone(flipped(299_999)), len(BLOB))]
    # What ``also`` was shown went on with the copies still in step: the blob, whole, and said so.
    assert bytes(fed) == BLOB
    assert checked.shared == DIGEST


def test_also_is_told_nothing_is_whole_when_every_copy_broke_off(three: Endpoints) -> None:
    serve(three, [BLOB, BLOB, BLOB])
    for _, state in three:
        state.faults.cut_blob_gets = 1

    fed = bytearray()
    checked = check_copies([s for s, _ in three], DIGEST, len(BLOB), CHUNK, also=fed.extend)

    assert all(problem is not None and "broke" in problem for problem, _ in checked.copies)
    assert checked.shared is None
    assert len(fed) < len(BLOB)


damage = st.one_of(
    st.just(("same", 0)),
    st.tuples(st.just("flip"), st.integers(0, len(BLOB) - 1)),
    st.tuples(st.just("cut"), st.integers(0, len(BLOB) - 1)),
    st.tuples(st.just("grow"), st.integers(1, 3 * CHUNK)),
)


def damaged(how: tuple[str, int]) -> bytes:
    kind, n = how
    if kind == "flip":
        return flipped(n)
    if kind == "cut":
        return BLOB[:n]
    if kind == "grow":
        return BLOB + BLOB[:n]
    return BLOB


@settings(max_examples=examples(60), deadline=None)
@given(
    hows=st.lists(damage, min_size=3, max_size=3),
    chunk=st.sampled_from([1 << 12, 1 << 16, 100_000, 1 << 20]),
)
def test_every_copys_verdict_is_what_hashing_it_alone_would_say(
    three: Endpoints, hows: list[tuple[str, int]], chunk: int
) -> None:
    copies = [damaged(how) for how in hows]

    fed = bytearray()
    checked = check_copies(serve(three, list(copies)), DIGEST, len(BLOB), chunk, also=fed.extend)
    results = checked.copies

    assert all(says(r, c) for r, c in zip(results, copies, strict=True)), [r[0] for r in results]
    # ``also`` saw the bytes of the copies that stayed in step to their end, and ``shared`` says
    # what they hash to: the blob's digest exactly when they are the blob (so what ``also`` made
    # of them is of the blob), which it is whenever every copy is.
    assert any(c.startswith(fed) for c in copies)
    if checked.shared is not None:  # None: no copy was read to its end (each went past the size)
        assert checked.shared == "sha256:" + hashlib.sha256(fed).hexdigest()
    assert (checked.shared == DIGEST) == (bytes(fed) == BLOB)
    if all(c == BLOB for c in copies):
        assert checked.shared == DIGEST
