"""A Hypothesis attacker for the OSV reader's shape rule (issue 53, class 4): whatever an advisory
record's ``affected`` holds, reading it never raises, and a record is either read (its packages
looked up, each judged or said unjudgeable) or counted as malformed: never read as "about
nothing" while it names a package in a shape the reader skips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.evidence.matching import affects, unjudgeable
from xpu_release.evidence.osv import Advisories

from ...conftest import examples

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.just("accelerate") | st.just("PyPI")
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["package", "ecosystem", "name", "ranges", "events", "type", "introduced", "fixed",
                     "versions", "limit", "last_affected"]), inner, max_size=4), max_leaves=20)  # fmt: skip


@settings(max_examples=examples(120), deadline=None)
@given(affected=JSON)
def test_any_affected_is_read_or_counted_malformed_never_a_crash(
    tmp_path_factory: Any, affected: Any
) -> None:
    folder: Path = tmp_path_factory.mktemp("osv")
    record = {"schema_version": "1.6.0", "id": "X-1", "affected": affected}
    (folder / "X-1.json").write_text(json.dumps(record))

    found = Advisories([folder], folder / "cache")
    looked = found.lookup("PyPI", "accelerate")
    judged = [affects(a.data, "PyPI", "accelerate", "1.5.2") for a in looked]
    reasons = [unjudgeable(a.data, "PyPI", "accelerate") for a in looked]
    found.close()

    assert found.counts.records + found.counts.malformed == 1
    if found.counts.malformed:
        assert found.unread is not None  # said: watch answers "could not check"
    assert len(judged) == len(reasons) == len(looked)


def test_a_folder_given_three_times_is_read_once(tmp_path: Path) -> None:
    folder = tmp_path / "osv"
    folder.mkdir()
    (folder / "X-1.json").write_text(json.dumps({"schema_version": "1.6.0", "id": "X-1", "affected": []}))
    (tmp_path / "again").symlink_to(folder)

    found = Advisories(
        [folder, folder, tmp_path / "again", tmp_path / "osv" / ".." / "osv"], tmp_path / "cache"
    )
    found.close()

    assert found.counts.records == 1
    assert len(found.sources) == 1
