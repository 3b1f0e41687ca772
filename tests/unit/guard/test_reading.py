"""The one way in for outside files and JSON: every bound refuses with the input and the bound
named, a special file is never opened, and no JSON value reaches a parser or a walk deeper, longer
or less finite than the bounds say."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_release.errors import ConfigError, DamagedFileError
from xpu_release.guard import limits
from xpu_release.guard.reading import depth_of, file_chunks, is_int, loads, parse_json, read_file
from xpu_release.guard.shown import shown, shown_lines


def test_a_regular_file_is_read_whole_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)

    assert read_file(path, what="f", limit=100) == b"x" * 100
    with pytest.raises(DamagedFileError, match=r"^f: 100 bytes or more; the limit is 99"):
        read_file(path, what="f", limit=99)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "index.json"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_file(fifo, what="oci:x/index.json", limit=100)
        except DamagedFileError as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    refused = done.wait(5)
    if not refused:  # opened for reading after all: release it before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert refused, "reading a FIFO waited for a writer"
    assert "oci:x/index.json is a FIFO, socket or device, not a regular file" in str(errors[0])


@pytest.mark.parametrize(
    ("shape", "said"),
    [("directory", "is a directory"), ("dangling", "is a symbolic link to nothing"),
     ("loop", "is a symbolic link loop"), ("missing", "no such file")],
)  # fmt: skip
def test_every_way_a_path_is_no_file_is_said(tmp_path: Path, shape: str, said: str) -> None:
    path = tmp_path / "f"
    if shape == "directory":
        path.mkdir()
    elif shape == "dangling":
        path.symlink_to(tmp_path / "gone")
    elif shape == "loop":
        path.symlink_to(path.name)

    with pytest.raises(DamagedFileError, match=said):
        read_file(path, what="f", limit=10)


def test_a_missing_file_may_be_another_error_than_a_damaged_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not there"):
        read_file(tmp_path / "f", what="f", limit=10, missing=lambda _: ConfigError("not there"))


def test_a_blob_of_a_known_size_is_refused_when_longer_or_shorter(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 11)

    assert b"".join(file_chunks(path, what="blob", limit=11, exact=True)) == b"x" * 11
    with pytest.raises(DamagedFileError, match="it should be 10"):
        b"".join(file_chunks(path, what="blob", limit=10, exact=True))
    with pytest.raises(DamagedFileError, match="11 bytes; it should be 12"):
        b"".join(file_chunks(path, what="blob", limit=12, exact=True))


def test_a_file_that_grows_while_it_is_read_is_refused_at_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    chunks = file_chunks(path, what="growing", limit=20, chunk=10)

    assert next(chunks) == b"x" * 10  # its size was within the bound when it was opened
    with path.open("ab") as f:
        f.write(b"y" * 100)
    with pytest.raises(DamagedFileError, match="the limit is 20"):
        list(chunks)


# --- JSON ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"size": 1e400}', "the number 1e400 is beyond a 64-bit float"),
        ('{"size": ' + "9" * 400 + "}", "longer than 32 characters"),
        ('{"size": NaN}', "NaN is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[" * 5000 + "]" * 5000, "nested 5000 levels deep; the limit is 64"),
        ('{"a": ' * 65 + "1" + "}" * 65, "nested 65 levels deep"),
        ("{", "is not JSON (line 1, column 2"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
    ],
)
def test_json_past_a_bound_is_refused_naming_the_input(text: str | bytes, said: str) -> None:
    with pytest.raises(DamagedFileError, match=r"^doc\b") as refused:
        parse_json(text.encode() if isinstance(text, str) else text, what="doc")
    assert said in refused.value.message


def test_json_at_the_bounds_is_read() -> None:
    deep = '{"a": ' * 63 + "[1]" + "}" * 63
    assert depth_of(deep) == 64
    assert parse_json(deep, what="doc") is not None
    assert parse_json('{"n": 9223372036854775807, "x": 1.5e300}', what="doc") == {
        "n": limits.MAX_INT64,
        "x": 1.5e300,
    }


def _nesting(v: object) -> int:
    """How deep a parsed JSON value nests (a list or an object is one level)."""
    if isinstance(v, dict):
        return 1 + max(map(_nesting, v.values()), default=0)
    if isinstance(v, list):
        return 1 + max(map(_nesting, v), default=0)
    return 0


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
                    max_leaves=30))  # fmt: skip
def test_depth_of_counts_brackets_as_the_parser_nests_them_strings_aside(value: object) -> None:
    text = json.dumps(value)

    assert depth_of(text) == _nesting(value)
    assert depth_of(json.dumps({"s": "[[[{{{" * 50})) == 1  # brackets inside a string are text


_TRICKY = '"\\[]{}a'  # what a string scan could take for the end of a string, or a bracket


@given(st.recursive(st.none() | st.text(_TRICKY, max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_TRICKY, max_size=3),
                                                                               inner),
                    max_leaves=20))  # fmt: skip
def test_depth_of_skips_strings_of_quotes_and_backslashes_as_the_parser_does(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)

    assert depth_of(text) == depth_of(json.dumps(value)) == _nesting(json.loads(text))


@given(st.lists(st.sampled_from(['"', "\\", "[", "]", "{", "}", "a", ":", ",", " "]), max_size=60))
def test_depth_of_a_text_with_no_escaped_quote_is_what_the_string_scan_finds(pieces: list[str]) -> None:
    """The split of a text whose quotes are all unescaped (the fast way) finds what the regex's
    scan of strings finds, on any text, JSON or not (an unclosed string hides the rest)."""
    from itertools import accumulate

    from xpu_release.guard.reading import _BRACKETS, _STEP, _STRING

    text = "".join(pieces).replace('\\"', '\\ "').encode()
    steps = _STRING.sub(b"", text).translate(None, _BRACKETS).translate(_STEP)
    scanned = max(accumulate(b if b < 128 else b - 256 for b in steps), default=0) if steps else 0

    assert depth_of(text) == scanned


# Pieces of JSON a scan could stumble on: quotes, escapes, brackets. A piece repeated to 256 KiB
# is measured in milliseconds by a linear scan; the old one took minutes on ``"\\"\\"…``.
_PIECES = st.lists(st.sampled_from(['"', "\\", '\\"', "[", "]", "{", "}", "a", ":", ","]), min_size=1,
                   max_size=8)  # fmt: skip


@given(_PIECES)
def test_measuring_the_depth_takes_time_linear_in_the_size_whatever_the_text(pieces: list[str]) -> None:
    unit = "".join(pieces).encode()
    text = (unit * ((256 << 10) // len(unit) + 1))[: 256 << 10]
    start = time.monotonic()

    depth_of(text)

    assert time.monotonic() - start < 1.0, f"{unit!r} repeated to 256 KiB: not linear"


def test_loads_refusals_are_value_errors_as_json_loads_are() -> None:
    with pytest.raises(ValueError, match="nested"):
        loads("[" * 1000)


@pytest.mark.parametrize("value", [True, False, 1.0, -1, limits.MAX_INT64 + 1, "1", None])
def test_a_boolean_a_float_a_string_or_an_out_of_range_number_is_no_size(value: object) -> None:
    assert not is_int(value)


# --- showing outside text ------------------------------------------------------------------------


def test_outside_text_cannot_forge_a_line_or_move_the_cursor() -> None:
    forged = "GHSA-1\nerror: passed\x1b[2J\r\u202eevil\u2028"

    out = shown(forged)

    assert "\n" not in out
    assert "\x1b" not in out
    assert "\r" not in out
    assert "\u202e" not in out
    assert "\u2028" not in out
    assert out == "GHSA-1\\nerror: passed\\x1b[2J\\r\\u202eevil\\u2028"
    assert shown("é 中文 CVE-2024-1") == "é 中文 CVE-2024-1"  # text a person reads stays as it is
    assert shown("v" * 1000).endswith("... (1000 characters)")
    assert shown_lines("one\ntwo\x1b[31m") == "one\ntwo\\x1b[31m"  # a message keeps its own lines
