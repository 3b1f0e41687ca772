"""The evaluate stage as the release pipeline runs it (release/run/stages.py, reading the
``ReleaseContext``): what it hands the record when the release skips it, when the manifest
declares none, and when these very images were measured before (a rerun: nothing is run); and
what a dry run's plan says it would do. Measuring and the gate: test_evaluate.py."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from xpu_release.errors import PerformanceRegression
from xpu_release.image.baseimage import pinned_ref
from xpu_release.image.evaluation import skipped
from xpu_release.image.lock import Lock
from xpu_release.image.lockfile import load_lock
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import CredentialStore
from xpu_release.release.run import stages
from xpu_release.release.run.context import Status
from xpu_release.release.run.evaluate import evaluate_image, references, remember
from xpu_release.release.run.pipeline import Choices, Release, Reporter
from xpu_release.settings import Settings, current, use

from .test_evaluate import IDS, Fake, evaluated, refs, slower_release

ROOT = Path(__file__).resolve().parents[3]
REF = "training-cpu-pytorch:25.03"


class NoEngine:
    """An engine the stage must not ask anything."""

    def __getattr__(self, name: str) -> Any:
        said = f"the engine was asked for {name}"
        raise AssertionError(said)


def context(repo: Path, ref: str, *, no_evaluate: str | None = None) -> Any:
    """What the stage reads of a ``ReleaseContext``: the manifest, its lock, the registries, the
    pool's credentials, the line sink, and the release's --no-evaluate."""
    spec = Repo(repo).load_ref(ref)
    # The committed lock, for its base digest (the xpu family has none on this machine)
    lock: Lock | None = load_lock(ROOT, spec, current=False) if spec.evaluation is not None else None
    return SimpleNamespace(
        spec=spec, repo=Repo(repo), registries=load_registries(repo), inputs=SimpleNamespace(lock=lock),
        pool=SimpleNamespace(credentials=CredentialStore()), on_line=lambda _: None, no_evaluate=no_evaluate,
    )  # fmt: skip


def test_a_release_that_skips_it_records_why_and_asks_no_engine(repo: Path) -> None:
    ctx = context(repo, REF, no_evaluate="no engine time today")

    got = stages.evaluate(ctx, NoEngine(), IDS["this"])  # type: ignore[arg-type]

    assert got.status == Status.SKIPPED
    assert got.detail == "--no-evaluate: no engine time today"
    assert got.value == skipped("no engine time today")
    assert stages._plan_of_evaluation(ctx) == "would skip: --no-evaluate: no engine time today"


def test_a_manifest_without_an_evaluation_records_none(repo: Path) -> None:
    ctx = context(repo, "training-xpu-pytorch:25.03")

    got = stages.evaluate(ctx, NoEngine(), IDS["this"])  # type: ignore[arg-type]

    assert got.status == Status.SKIPPED
    assert got.value is None
    assert stages._plan_of_evaluation(ctx) == "the manifest declares no evaluation"


def test_a_dry_run_says_what_it_would_run(repo: Path) -> None:
    plan = stages._plan_of_evaluation(context(repo, REF))

    assert plan == (
        "would run `xpu-bench --steps 30`, 4 variants, against base, previous: 1+5 rounds within 600 s"
    )


def test_a_rerun_takes_what_was_measured_and_runs_nothing(repo: Path, tmp_path: Path) -> None:
    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        ctx = context(repo, REF)
        spec, lock = ctx.spec, ctx.inputs.lock
        base = pinned_ref(spec, ctx.registries, lock)  # the SDK release, by the digest the lock pins
        fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
        fake.speed[base] = fake.speed[IDS["base"]]
        refs = references(ctx.repo, spec, ctx.registries, lock, fake, CredentialStore(), IDS["this"])
        kept = evaluated(repo, REF, fake, "base").entry
        remember(spec, IDS["this"], refs, kept)
        runs = fake.runs

        got = stages.evaluate(ctx, fake, IDS["this"])  # type: ignore[arg-type]

        assert got.status == Status.SKIPPED
        assert got.detail == "measured before for these very images (5 rounds): kept"
        assert got.value == kept
        assert fake.runs == runs  # nothing measured again
    finally:
        use(before)


def test_a_release_the_gate_stops_keeps_what_it_measured_in_its_failure_summary(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stopped release writes no record: `release --json` prints the failure summary, and the
    # figures that stopped it are there (else a user could not see what was measured).
    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        ref = slower_release(repo, accepted=False)
        ctx = context(repo, REF)
        ctx.spec = Repo(repo).load_ref(ref)  # 25.04 has no lock of its own: compared with 25.03 only
        fake = Fake(speed={IDS["this"]: 550.0, IDS["previous"]: 1000.0})
        monkeypatch.setattr(stages, "references", lambda *_, **__: refs("previous"))
        monkeypatch.setattr(stages, "evaluate_image", partial(evaluate_image, runner=fake))
        pipeline = Release(Repo(repo), ref, ctx.registries, CredentialStore(), None,  # type: ignore[arg-type]
                            Reporter(lambda _: None), Choices(builder="docker"))  # fmt: skip
        with pytest.raises(PerformanceRegression):
            pipeline.stage("evaluate", lambda: stages.evaluate(ctx, fake, IDS["this"]))  # type: ignore[arg-type]
        summary = pipeline.failure_summary()
    finally:
        use(before)
    assert summary["failed"]["exit_code"] == 17
    assert summary["record"] is None
    kept = summary["evaluation"]
    assert kept["status"] == "failed"
    assert any(c["verdict"] == "regression" for c in kept["comparisons"])
    assert all(a["figures"] for a in kept["arms"] if a["unsupported"] is None)
