"""The JSON people and scripts read (``--json``, the release record, the re-scan history): any
value comes back as it went in, small containers stay on one line, large ones are indented."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from xpu_release.jsontext import WIDTH, readable

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=12), inner, max_size=8),
    max_leaves=60,
)


@given(VALUES)
def test_any_value_reads_back_as_it_was(value: Any) -> None:
    assert json.loads(readable(value)) == value


def test_a_small_object_stays_on_one_line_and_a_large_one_is_indented() -> None:
    finding = {"id": "CVE-2026-0001", "package": "six", "fix": "1.17.0"}
    text = readable({"findings": [finding] * 40, "state": "needs a patch"})

    lines = text.splitlines()
    assert lines[0] == "{"
    assert '    {"id": "CVE-2026-0001", "package": "six", "fix": "1.17.0"},' in lines
    assert '  "state": "needs a patch"' in lines
    assert all(len(line) <= WIDTH + 2 for line in lines)


def test_a_container_nested_deeper_than_depth_levels_is_one_line() -> None:
    finding = {"id": "CVE-2026-0001", "note": "x" * 200, "ids": ["a", "b"]}
    releases = [{"ref": "training-cpu-pytorch:25.03", "findings": [finding, finding]}]  # watch --json

    lines = readable(releases).splitlines()

    one_line = json.dumps(finding, separators=(", ", ": "))
    assert lines[4:6] == ["      " + one_line + ",", "      " + one_line]
    assert len(lines) == 9


def test_text_is_written_as_it_is_unless_asked_for_ascii() -> None:
    assert readable({"说明": "端到端"}) == '{"说明": "端到端"}'
    assert readable({"说明": "端到端"}, ensure_ascii=True) == json.dumps(
        {"说明": "端到端"}, separators=(", ", ": ")
    )


def test_keys_that_are_not_text_are_named_as_json_names_them() -> None:
    keys = {2: "a", False: "b", None: "c", 1.5: "d"}
    assert readable(keys) == json.dumps(keys, separators=(", ", ": "))
