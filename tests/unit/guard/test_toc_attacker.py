"""A Hypothesis attacker of an eStargz layer's TOC, as ``verify --deep`` reads a blob a registry
serves (``oci/toc.LayerCheck``): a TOC edited at will (any field set to any JSON value, entries
dropped, repeated, moved, a hundred thousand of them) and announced with its own digest, or a blob
whose bytes are cut, repeated or changed, gives a sentence or a pass, never an exception and never
a hang. And what passes says of every entry what the layer holds: a lie is never let through."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ...conftest import examples
from ..oci.estargz_layers import layer_tar, problem_of, toc_of, with_toc, written
from .hostile import deadline

SMALL = layer_tar({"d/": None, "d/a": b"alpha" * 300, "d/b": b"", "d/c": b"x" * 5000})
WRITTEN, _, BLOB = written(SMALL, prefetch=("/d/c",))
ORIGINAL = toc_of(BLOB)
FIELDS = ("name", "type", "size", "modtime", "linkName", "mode", "uid", "gid", "offset", "devMajor",
          "devMinor", "xattrs", "digest", "chunkOffset", "chunkSize", "chunkDigest", "userName")  # fmt: skip
CHECKED = tuple(f for f in FIELDS if f != "userName")

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
EDIT = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 20), st.sampled_from(FIELDS), JSON),
    st.tuples(st.just("set-int"), st.integers(0, 20), st.sampled_from(FIELDS), st.integers(-5, 10_000)),
    st.tuples(st.just("drop"), st.integers(0, 20), st.just(""), st.none()),
    st.tuples(st.just("repeat"), st.integers(0, 20), st.just(""), st.none()),
    st.tuples(st.just("swap"), st.integers(0, 20), st.just(""), st.none()),
    st.tuples(st.just("flood"), st.integers(1, 100_000), st.just(""), st.none()),
    st.tuples(st.just("top"), st.integers(0, 2), st.sampled_from(["version", "entries"]), JSON),
)


def _apply(doc: dict[str, Any], edits: list[tuple[str, int, str, Any]]) -> None:
    for action, i, key, value in edits:
        entries = doc.get("entries")
        if action == "top":
            doc[key] = value
            continue
        if not isinstance(entries, list) or not entries:
            continue
        at = i % len(entries)
        if action.startswith("set") and isinstance(entries[at], dict):
            entries[at][key] = value
        elif action == "drop":
            entries.pop(at)
        elif action == "repeat":
            entries.insert(at, copy.deepcopy(entries[at]))
        elif action == "swap":
            entries[at], entries[-1] = entries[-1], entries[at]
        elif action == "flood":
            entries.extend({"name": f"f{n}", "type": "dir"} for n in range(i))


def _said(entry: Any) -> tuple[Any, ...]:
    defaults = {"size": 0, "mode": 0, "uid": 0, "gid": 0, "offset": 0, "devMajor": 0, "devMinor": 0,
                "chunkOffset": 0, "chunkSize": 0}  # fmt: skip
    return tuple(entry.get(f, defaults.get(f, "")) for f in CHECKED) if isinstance(entry, dict) else (entry,)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDIT, min_size=1, max_size=4))
def test_an_edited_toc_is_named_or_says_what_the_layer_holds(edits: list[tuple[str, int, str, Any]]) -> None:
    doc = copy.deepcopy(ORIGINAL)
    lying, annotations = with_toc(BLOB, lambda d: _apply(d, edits))
    with deadline(20):
        problem = problem_of(lying, annotations)
    assert problem is None or isinstance(problem, str)
    if problem is None:  # then the TOC says of each entry what the original (true) one said
        _apply(doc, edits)
        entries = doc["entries"]
        assert doc["version"] == 1
        assert [_said(e) for e in entries] == [_said(e) for e in ORIGINAL["entries"]]


DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, len(BLOB)), st.binary(max_size=0)),
    st.tuples(st.just("flip"), st.integers(0, len(BLOB) - 1), st.binary(min_size=1, max_size=1)),
    st.tuples(st.just("insert"), st.integers(0, len(BLOB)), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("repeat"), st.integers(0, len(BLOB) - 1), st.binary(max_size=0)),
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(DAMAGE, min_size=1, max_size=3), st.sampled_from([1, 7, 512, 4096, 1 << 20]))
def test_a_damaged_blob_is_a_sentence_or_a_pass_never_an_exception(
    damage: list[tuple[str, int, bytes]], block: int
) -> None:
    blob = bytearray(BLOB)
    for action, at, data in damage:
        at = min(at, len(blob))
        if action == "cut":
            del blob[at:]
        elif action == "flip" and at < len(blob):
            blob[at] ^= data[0] or 1
        elif action == "insert":
            blob[at:at] = data
        elif action == "repeat":
            blob[at:at] = blob[at : at + 4096]
    with deadline(20):
        problem = problem_of(bytes(blob), WRITTEN.annotations(), block)
    assert problem is None or isinstance(problem, str)
