"""An attacker for the prefetch profile's reader (``image.layerform.read_profile``): any bytes in
``prefetch.txt`` give either the paths it holds or a ``ManifestError`` whose every problem names a
line of the file (exit 2), never another exception; and any list of paths the recorder keeps
reads back as it was written."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpu_release.errors import ManifestError
from xpu_release.image.layerform import MAX_PROFILE_PROBLEMS, is_profile_path, read_profile
from xpu_release.image.profile import Profile

from ...conftest import examples

# Lines an editor, a bad merge or an attacker might leave: near-paths, control characters,
# separators Python's splitlines would break on, bytes that are no UTF-8, very long lines.
pieces = st.one_of(
    st.sampled_from(
        ["/", "/usr/lib/x.so", "rel/path", "#", " ", "\\", "\r", "\x00", "\x85", "\u2028", "\x1c"]
    ),
    st.text(max_size=20),
    st.binary(max_size=8).map(lambda b: b.decode("latin-1")),
)
raw_lines = st.lists(st.lists(pieces, max_size=5).map("".join), max_size=40)


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=raw_lines, tail=st.binary(max_size=16), long=st.integers(0, 5000))
def test_any_profile_file_is_paths_or_problems_each_on_a_line_of_it(
    tmp_path: Path, lines: list[str], tail: bytes, long: int
) -> None:
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + tail
    if long:
        data += b"\n/" + b"a" * long
    path = tmp_path / "prefetch.txt"
    path.write_bytes(data)
    count = data.count(b"\n") + 1

    try:
        paths = read_profile(path, "prefetch.txt")
    except ManifestError as exc:
        problems = exc.problems
    else:
        problems = ()
        assert all(is_profile_path(p) for p in paths)
        assert len(paths) == len(set(paths))
        assert all(p.encode() in data for p in paths)
    assert len(problems) <= MAX_PROFILE_PROBLEMS + 1
    assert all(1 <= p.line <= count for p in problems if p.line)
    assert all(p.file == "prefetch.txt" for p in problems)


profile_paths = st.lists(
    st.text(min_size=1, max_size=30).map(lambda t: "/" + t).filter(is_profile_path), max_size=30, unique=True
)


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(paths=profile_paths)
def test_what_the_recorder_keeps_reads_back_as_it_was_written(tmp_path: Path, paths: list[str]) -> None:
    path = tmp_path / "prefetch.txt"
    path.write_text(Profile(ref="x:1", path=path, files=tuple(paths)).text(), encoding="utf-8")

    assert read_profile(path, "prefetch.txt") == tuple(paths)
