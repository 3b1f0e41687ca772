"""The re-scan history as ``watch`` finds it, whatever is in the folder: only entries named by a
UTC time, of watch's own shape, read through the guarded layer (a FIFO, a link to a device, a
huge file are passed over, never waited on or read whole); the newest real entry wins; the
first day a finding was seen survives runs that saw nothing. And the days an SLA counts with,
whatever dates come from outside."""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpu_release.errors import OutputError
from xpu_release.guard.limits import MAX_HISTORY_ENTRY_BYTES
from xpu_release.guard.reading import days_after
from xpu_release.release.model import history
from xpu_release.release.watching.sla import Clock

from ...conftest import examples

IMAGE, VERSION = "training-cpu-pytorch", "25.03"
REF = f"{IMAGE}:{VERSION}"
NOW = datetime(2026, 12, 3, 1, 2, 3, tzinfo=UTC)
# watching.md's table of answers
WATCH_STATES = ("up to date", "needs a patch", "out of SLA", "superseded", "not published", "end of life",
                "could not check")  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
entry_like = st.fixed_dictionaries(
    {},
    optional={
        "ref": st.sampled_from([REF, "other:1.0", ""]) | json_values,
        "state": st.sampled_from([*WATCH_STATES, "all good!"]) | json_values,
        "checked_at": st.just("2026-12-03T00:00:00Z") | json_values,
        "open": st.dictionaries(st.sampled_from(["high", "low"]), json_values, max_size=2) | json_values,
        "sla": st.sampled_from(["within", "out", "none", "bogus"]) | json_values,
        "superseded_by": json_values,
        "advisories": json_values,
        "seen": json_values,
        "findings": json_values,
    },
)


def entry(state: str = "up to date", **more: Any) -> dict[str, Any]:
    return {"ref": REF, "state": state, "checked_at": "2026-12-03T00:00:00Z", **more}


near_entries = st.builds(
    lambda state, ref, at: {"ref": ref, "state": state, "checked_at": at},
    st.sampled_from([*WATCH_STATES, "all good!", ""]),
    st.sampled_from([REF, f"{REF}.1"]),
    st.sampled_from(["2026-12-03T00:00:00Z", None]),
)


def folder(root: Path) -> Path:
    where = history.folder(root, IMAGE, VERSION)
    where.mkdir(parents=True, exist_ok=True)
    return where


@settings(
    max_examples=examples(150), deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.lists(near_entries | entry_like | json_values, min_size=1, max_size=4))
def test_whatever_the_entries_hold_only_one_of_watchs_shape_is_shown(tmp_path: Path, data: list[Any]) -> None:
    where = history.folder(tmp_path, IMAGE, VERSION)
    for old in where.glob("*") if where.exists() else ():
        old.unlink()
    for n, value in enumerate(data):
        (folder(tmp_path) / f"2026120{n}T000000.000000Z.json").write_text(json.dumps(value))

    found = history.latest(tmp_path, IMAGE, VERSION)
    shown = history.security(tmp_path, IMAGE, VERSION)
    seen = history.first_seen(found)

    mine = [v for v in data if isinstance(v, dict) and v.get("ref") == REF and v.get("state") in WATCH_STATES
            and isinstance(v.get("checked_at"), str)]  # fmt: skip
    assert found == (mine[-1] if mine else None)  # the newest of watch's own shape, or nothing
    if shown is not None:
        assert shown["state"] in WATCH_STATES
        assert shown["sla"] in ("within", "out", "none")
        assert all(type(n) is int and n >= 0 for n in shown["open"].values())
        assert isinstance(history.describe(shown), str)
    assert all(isinstance(d, date) for d in seen.values())


@settings(
    max_examples=examples(100), deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(st.text(alphabet="0123456789TZ.-abjson", min_size=1, max_size=30), max_size=6))
def test_a_file_not_named_by_a_utc_time_never_shadows_a_real_entry(tmp_path: Path, names: list[str]) -> None:
    where = history.folder(tmp_path, IMAGE, VERSION)
    for old in where.glob("*") if where.exists() else ():
        old.unlink()
    real = history.append(tmp_path, IMAGE, VERSION, entry("needs a patch"), NOW)
    for name in names:
        path = where / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(entry("up to date", stray=name)))

    found = history.latest(tmp_path, IMAGE, VERSION)

    assert found is not None
    newer_real = [n for n in names if history._NAME.fullmatch(f"{n}.json") and f"{n}.json" > real.name]
    assert found["state"] == ("up to date" if newer_real else "needs a patch"), (names, found)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("what", ["fifo", "device", "huge", "loop", "folder"])
def test_an_entry_that_is_no_regular_file_is_passed_over_without_reading_it(
    tmp_path: Path, what: str
) -> None:
    history.append(tmp_path, IMAGE, VERSION, entry("needs a patch"), NOW)
    newest = folder(tmp_path) / "20991231T000000.000000Z.json"
    if what == "fifo":
        os.mkfifo(newest)  # opening it for reading would wait for a writer for ever
    elif what == "device":
        newest.symlink_to("/dev/zero")  # reading it would never end
    elif what == "huge":
        with newest.open("wb") as f:  # sparse: no disk, but its size is past the bound
            f.truncate(MAX_HISTORY_ENTRY_BYTES + 1)
    elif what == "loop":
        newest.symlink_to(newest)
    else:
        newest.mkdir()

    found = history.latest(tmp_path, IMAGE, VERSION)

    assert found is not None
    assert found["state"] == "needs a patch"


@pytest.mark.parametrize("kind", ["file", "fifo", "loop"])
def test_a_history_folder_that_is_not_one_is_named_with_what_to_do(tmp_path: Path, kind: str) -> None:
    where = history.folder(tmp_path, IMAGE, VERSION)
    where.parent.mkdir(parents=True)
    if kind == "file":
        where.write_text("stray")
    elif kind == "fifo":
        os.mkfifo(where)
    else:
        where.symlink_to(where)

    with pytest.raises(OutputError) as caught:
        history.append(tmp_path, IMAGE, VERSION, entry(), NOW)

    assert "not a folder" in caught.value.message
    assert "move it away" in caught.value.message
    assert history.latest(tmp_path, IMAGE, VERSION) is None


days = st.dates(min_value=date(1970, 1, 1), max_value=date.max)


@given(since=days, today=days, limit=st.none() | st.integers(1, 3660))
def test_an_sla_clock_has_an_answer_for_any_day_of_the_calendar(
    since: date, today: date, limit: int | None
) -> None:
    c = Clock(since=since, source="published", days=limit, today=today)

    said = c.to_json()

    assert said["state"] in ("within", "out", "none")
    assert c.age >= 0
    if limit is not None:
        assert c.due is not None
        assert c.due >= since
        assert c.due == date.max or (c.due - since).days == limit


@given(day=st.dates(), n=st.integers(-(10**6), 10**6))
def test_days_after_saturates_at_the_ends_of_the_calendar(day: date, n: int) -> None:
    try:
        exact = day + timedelta(days=n)
    except OverflowError:
        exact = date.max if n > 0 else date.min

    assert days_after(day, n) == exact


@given(
    seen=st.dictionaries(st.tuples(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8)), days)
)
def test_the_days_seen_read_back_as_they_were_written(seen: dict[tuple[str, str], date]) -> None:
    written = json.loads(json.dumps(entry(seen=history.seen_json(seen))))

    assert history.first_seen(written) == seen
