"""Exit 70 is our bug, never outside data's: the commands that read outside data, driven by
Hypothesis with structure-aware inputs (``tests/unit/guard/strategies.py``): OCI layouts built
field by field with FIFOs, links and damage among their files (``mirror --from oci:``); a fake
registry that serves hostile documents and lies, truncates, trickles or floods (``mirror --from
HOST/REPO``); advisories loose and zipped, with bombs, FIFOs and forged ids (``scan``); release
records of any field's type (``notes``, ``status``, ``diff``); YAML and JSON nested at any depth
(``validate``, ``render``, ``plan``); sizes as a user types them (``cache``, ``release``).

Every example: a documented exit code, never 70, no traceback, a few short lines, done within
a deadline (a hang fails, and is released), and nothing written outside the example's folder.
CI runs a modest number of examples (``EXAMPLES``); ``--hypothesis-profile=long`` goes deep."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from xpu_release.guard import bodies

from ...conftest import ROOT
from ..fake_registry import fake_registry
from ..guard.strategies import (
    EXAMPLES,
    TEXT,
    AdvisoryPlan,
    LayoutPlan,
    Raw,
    advisory_plans,
    documents,
    dumps,
    fitted,
    hostile,
    layout_plans,
    manifest_values,
    nested_yaml,
    write_advisories,
    write_layout,
)
from .hostile import (
    CONFIG,
    LAYER,
    REF,
    REPO,
    TAG,
    evaluation_value,
    invoke,
    publish_to,
    record_value,
    registries_for,
    release_fifos,
    without_an_engine,
)
from .hostile import a_users_error as users_error

FEW = max(8, EXAMPLES // 2)  # for the examples that start a registry or a scan
QUICK = bodies.Pace(min_rate=1000, window=0.2, deadline=2.0)
_FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as a user has it: copied again for an example that may change it."""
    dst = tmp_path_factory.mktemp("template") / "repo"
    dst.mkdir()
    for name in ("manifests", "templates", "images", "schema"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("tests", "*.lock"))
    shutil.copy(ROOT / "registries.yaml", dst / "registries.yaml")
    return dst


@contextmanager
def example(template: Path) -> Iterator[tuple[Path, Path]]:
    """A folder of the example's own, with a copy of the repository in it; afterwards, nothing
    may be there but what the example made in the places it names."""
    outer = Path(tempfile.mkdtemp(prefix="xpu-read-"))
    repo = outer / "repo"
    shutil.copytree(template, repo, symlinks=True)
    try:
        yield outer, repo
    finally:
        shutil.rmtree(outer, ignore_errors=True)


def a_users_error(result: Any) -> None:
    """``hostile.a_users_error``, the exit code counted (``--hypothesis-show-statistics``)."""
    event(f"exit {result.exit_code}")
    users_error(result)


def cache_in(outer: Path) -> dict[str, str]:
    return {"XPU_RELEASE_CACHE": str(outer / "cache")}


def nothing_else(outer: Path, *allowed: str) -> None:
    """Only the example's own places are in its folder (those ``allowed`` may or may not be)."""
    assert {p.name for p in outer.iterdir()} <= {"repo", *allowed}
    assert not (outer / "elsewhere").exists() or not list((outer / "elsewhere").iterdir())  # a link's target


# --- OCI layouts -----------------------------------------------------------------------------------


@settings(max_examples=EXAMPLES, suppress_health_check=_FIXTURES)
@given(plan=layout_plans(TAG))
def test_any_source_layout_is_copied_or_refused_never_a_crash(template: Path, plan: LayoutPlan) -> None:
    with example(template) as (outer, repo):
        source, target = outer / "source", outer / "target"
        write_layout(source, plan, TAG, outer)

        result = invoke(repo, ["mirror", REF, "--from", f"oci:{source}", "--to", f"oci:{target}"],
                        env=cache_in(outer), unstick=release_fifos(source))  # fmt: skip

        a_users_error(result)
        nothing_else(outer, "source", "target", "cache", "elsewhere")
        if result.exit_code != 0:
            assert not (target / "index.json").exists() or TAG not in (target / "index.json").read_text()


# --- a registry's answers --------------------------------------------------------------------------

FAULTS = st.fixed_dictionaries({}, optional={
    "trickle": st.just(0.02), "flood": st.sampled_from(["blobs", "manifests"]),
    "flood_declares": st.sampled_from([0, 5, 1 << 40]), "cut_blob_gets": st.integers(1, 3),
    "wrong_digest_header": st.just(True), "referrers_body": documents(),
    "manifest_type": st.sampled_from(["", "x"]),
})  # fmt: skip


@settings(max_examples=FEW, suppress_health_check=_FIXTURES)
@given(image=manifest_values() | documents(), referrer=st.none() | manifest_values(subject="IMAGE"),
       faults=FAULTS, api=st.booleans())  # fmt: skip
def test_any_registry_answer_is_copied_or_refused_never_a_crash(
    template: Path,
    monkeypatch: pytest.MonkeyPatch,
    image: Any,
    referrer: Any,
    faults: dict[str, Any],
    api: bool,
) -> None:
    monkeypatch.setattr(bodies, "DEFAULT_PACE", QUICK)
    with example(template) as (outer, repo), fake_registry() as (host, state):
        text = (
            image.decode("utf-8", "replace")
            if isinstance(image, bytes)
            else dumps(fitted(image, CONFIG, LAYER))
        )
        publish_to(
            state, image=text, referrer=None if referrer is None else dumps(fitted(referrer, CONFIG, LAYER))
        )
        state.referrers_api = api
        for k, v in faults.items():
            setattr(state.faults, k, v)

        result = invoke(repo, ["--registries", str(registries_for(outer, host)), "mirror", REF, "--from",
                               f"{host}/{REPO}", "--to", f"oci:{outer / 'target'}"],
                        env=cache_in(outer), unstick=state.stopped.set)  # fmt: skip

        a_users_error(result)
        nothing_else(outer, "target", "cache", "fake-registries.yaml")


# --- advisories ------------------------------------------------------------------------------------


@settings(max_examples=FEW, suppress_health_check=_FIXTURES)
@given(plan=advisory_plans())
def test_any_advisories_are_read_or_refused_and_shown_safely(
    template: Path, monkeypatch: pytest.MonkeyPatch, plan: AdvisoryPlan
) -> None:
    without_an_engine(monkeypatch)
    with example(template) as (outer, repo):
        write_advisories(outer / "osv", plan)

        result = invoke(repo, ["scan", REF, "--advisories", str(outer / "osv")],
                        env=cache_in(outer), unstick=release_fifos(outer / "osv"))  # fmt: skip

        a_users_error(result)
        assert "\x1b" not in result.output  # no escape sequence from an advisory reaches a terminal
        lines = result.stdout.splitlines()
        assert all(line.startswith(("  ", REF)) for line in lines), lines  # no line an advisory forged
        nothing_else(outer, "osv", "cache")


# --- release records -------------------------------------------------------------------------------

FINDING_FIELDS = [
    "id",
    "aliases",
    "package",
    "installed",
    "severity",
    "fixed",
    "purls",
    "vex",
    "justification",
]
RECORD_FIELDS = ["ref", "digest", "complete", "endpoints", "attachments", "scan", "floating_moved"]


@settings(max_examples=EXAMPLES, suppress_health_check=_FIXTURES)
@given(
    finding=st.dictionaries(
        st.sampled_from(FINDING_FIELDS), TEXT | st.sampled_from(hostile.SIZES), max_size=2
    ),
    top=st.dictionaries(st.sampled_from(RECORD_FIELDS), TEXT | st.sampled_from(hostile.SIZES), max_size=1),
    deep=st.none() | st.integers(65, 3000),
    command=st.sampled_from(["notes", "status", "diff"]),
)
def test_any_release_record_is_read_or_refused_never_a_crash(
    template: Path, finding: dict[str, Any], top: dict[str, Any], deep: int | None, command: str
) -> None:
    with example(template) as (outer, repo):
        value = {**record_value(**finding), **top}
        text = dumps(value) if deep is None else dumps({**value, "scan": Raw("[" * deep + "]" * deep)})
        path = repo / "out" / "releases" / "training-cpu-pytorch" / f"{TAG}.json"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        argv = {"notes": ["notes", REF], "status": ["status", REF], "diff": ["diff", REF, REF]}[command]

        result = invoke(repo, ["--registries", str(registries_for(outer, "127.0.0.1:1")), *argv])

        a_users_error(result)
        nothing_else(outer, "fake-registries.yaml")


ARM_FIELDS = ["image", "variant", "unsupported", "median", "warmup", "figures"]
COMPARISON_FIELDS = ["variant", "against", "against_ref", "ratio", "low", "high", "verdict", "rounds_needed",
                     "note", "accepted"]  # fmt: skip
EVALUATION_FIELDS = ["status", "reason", "metric", "better", "threshold_percent", "command", "method",
                     "rounds", "warmup_rounds", "cpuset", "memory_mb", "images", "arms",
                     "comparisons"]  # fmt: skip
ANY_VALUE = (
    TEXT
    | st.sampled_from(hostile.SIZES)
    | st.lists(TEXT | st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=8), TEXT | st.floats(allow_nan=False) | st.none(), max_size=2)
)


@settings(max_examples=EXAMPLES, suppress_health_check=_FIXTURES)
@given(
    arm=st.dictionaries(st.sampled_from(ARM_FIELDS), ANY_VALUE, max_size=2),
    comparison=st.dictionaries(st.sampled_from(COMPARISON_FIELDS), ANY_VALUE, max_size=2),
    top=st.dictionaries(st.sampled_from(EVALUATION_FIELDS), ANY_VALUE, max_size=2),
    command=st.sampled_from(["notes", "diff"]),
)
def test_any_evaluation_in_a_record_is_read_or_refused_never_a_crash(
    template: Path, arm: dict[str, Any], comparison: dict[str, Any], top: dict[str, Any], command: str
) -> None:
    # The notes' section and diff's are rendered from the record alone: every field they read has
    # its type in the record's schema, or the record is refused (exit 12).
    with example(template) as (outer, repo):
        value = {**record_value(), "evaluation": evaluation_value(arm, comparison, top)}
        path = repo / "out" / "releases" / "training-cpu-pytorch" / f"{TAG}.json"
        path.parent.mkdir(parents=True)
        path.write_text(dumps(value))
        argv = {"notes": ["notes", REF], "diff": ["diff", REF, REF]}[command]

        result = invoke(repo, argv)

        a_users_error(result)
        assert result.exit_code in (0, 12), result.output
        nothing_else(outer)


# --- YAML and JSON nesting, sizes ------------------------------------------------------------------

PLACES = {
    "a manifest": ("manifests/training-cpu-pytorch/25.03.yaml", ["validate"]),
    "a VEX document": ("images/training-cpu-pytorch/vex.openvex.json", ["validate"]),
    "image.yaml": ("images/training-cpu-pytorch/image.yaml", ["render", REF]),
    "a registries file": ("deep.yaml", ["--registries", "DEEP", "plan", REF]),
}


@settings(max_examples=EXAMPLES, suppress_health_check=_FIXTURES)
@given(place=st.sampled_from(sorted(PLACES)), depth=st.integers(1, 1200), flow=st.booleans())
def test_yaml_at_any_depth_is_read_or_a_located_error(
    template: Path, place: str, depth: int, flow: bool
) -> None:
    where, argv = PLACES[place]
    with example(template) as (outer, repo):
        (repo / where).write_text(nested_yaml(depth, flow))

        result = invoke(repo, [str(repo / where) if a == "DEEP" else a for a in argv])

        a_users_error(result)
        if depth > 70:
            assert result.exit_code != 0
        nothing_else(outer)


SIZES = st.one_of(
    st.integers(0, 10**30).map(str), st.integers(300, 5000).map(lambda n: "9" * n),
    st.sampled_from(["1e400", "20G", "1.5t", "-1", "0x10", "NaN", "inf", "", " ", "20GiB", "1" * 20 + "T"]),
)  # fmt: skip


@settings(max_examples=EXAMPLES, suppress_health_check=_FIXTURES)
@given(size=SIZES, where=st.sampled_from(["--keep-storage", "--older-than", "XPU_RELEASE_CACHE_MAX"]))
def test_a_size_or_age_of_any_length_is_taken_or_refused(template: Path, size: str, where: str) -> None:
    with example(template) as (outer, repo):
        env = {"XPU_RELEASE_CACHE": str(outer / "cache")}
        if where == "XPU_RELEASE_CACHE_MAX":
            argv = ["--registries", str(registries_for(outer, "127.0.0.1:1")), "release", REF, "--dry-run"]
            env[where] = size
        else:
            argv = ["cache", "prune", where, size, "--dry-run"]

        result = invoke(repo, argv, env=env)

        a_users_error(result)
        nothing_else(outer, "cache", "fake-registries.yaml")


def test_the_strategies_make_the_inputs_they_name(tmp_path: Path) -> None:
    """The plans are the inputs: a layout plan's FIFO is a FIFO, its deep index is deep."""
    import stat

    from ..guard.strategies import write_layout as write

    plan = LayoutPlan(image={"schemaVersion": 2}, index_raw='{"manifests": ' + "[" * 70 + "]" * 70 + "}",
                      damage=[("oci-layout", "fifo")])  # fmt: skip
    named = write(tmp_path / "l", plan, TAG, tmp_path)

    assert stat.S_ISFIFO(named["oci-layout"].lstat().st_mode)
    assert "[" * 70 in (tmp_path / "l" / "index.json").read_text()
