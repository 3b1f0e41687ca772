"""The evaluation of a release against a fake engine (release/run/evaluate.py, release/run/evalnotes.py):
the image against its base and the release it extends, like with like; a clearly slower image is
stopped (exit 17) naming the variant, the ratio and its interval; the same regression accepted
in the manifest passes and the notes say so; the record keeps every round's figures and passes
its schema; the notes are rendered from the record alone (the same record, the same notes); and
`diff` shows how the new release measured against the old."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import PerformanceRegression
from xpu_release.image.bounded import Finished, Limits
from xpu_release.image.engine import ImageInfo
from xpu_release.image.evaluation import Reference
from xpu_release.labels import WORKLOAD_LABEL_PREFIX
from xpu_release.manifest import Repo
from xpu_release.manifest.registries import load_registries
from xpu_release.oci.credentials import CredentialStore
from xpu_release.release.model import record as records
from xpu_release.release.run.evaluate import _previous, evaluate_image, gate_failure
from xpu_release.release.run.notes import render_notes
from xpu_release.settings import Settings

from ..helpers import run, write_manifest
from .test_record import COMPLETE

REF = "training-cpu-pytorch:25.03"
LABEL = {f"{WORKLOAD_LABEL_PREFIX}xpu-bench": "sha256:" + "ab" * 32}
IDS = {"this": "sha256:" + "1" * 64, "base": "sha256:" + "2" * 64, "previous": "sha256:" + "3" * 64}


@dataclass
class Fake:
    """The engine's images, and a runner whose figures are ``speed[image id]`` with a little
    noise that follows the round (as a shared machine's load would)."""

    speed: dict[str, float]
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    runs: int = 0
    ran: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)  # (image, its env's names)

    def image(self, ref: str) -> ImageInfo | None:
        if ref not in self.speed:
            return None
        return ImageInfo(id=ref, tags=(), labels=self.labels.get(ref, LABEL), size=1, repo_digests=(), env=())

    def pull(self, ref: str, auth: dict[str, str] | None = None) -> None:
        said = f"nothing is pulled here: {ref}"
        raise AssertionError(said)

    def run_bounded(self, image: str, argv: list[str], *, env: dict[str, str], purpose: str,
                    limits: Limits, timeout: float, arm: str = "") -> Finished:  # fmt: skip
        self.runs += 1
        self.ran.add((image, tuple(sorted(env))))
        if env.get("XPU_BENCH_COMPILE"):
            return Finished(exit_code=0, stdout=b'{"unsupported": "no C++ compiler"}\n', stderr="")
        if env.get("XPU_BENCH_ACCELERATE") and image == IDS["base"]:
            return Finished(exit_code=0, stdout=b'{"unsupported": "no accelerate"}\n', stderr="")
        noise = 1 + 0.01 * ((self.runs * 7) % 5 - 2)
        figure = self.speed[image] * noise * (0.97 if env else 1.0)
        return Finished(
            exit_code=0, stdout=json.dumps({"tokens_per_second": figure}).encode() + b"\n", stderr=""
        )

    def prepare(
        self, image: str, argv: list[str], *, env: dict[str, str], purpose: str, limits: Limits, arm: str = ""
    ) -> None:
        pass  # each run is a process of its own

    def cpu_count(self) -> int:
        return 2

    def now(self) -> float:
        return time.monotonic()


def refs(*roles: str) -> tuple[Reference, ...]:
    names = {"base": "pytorch-cpu-sdk:2.13.0", "previous": REF}
    return tuple(Reference(role=r, ref=names[r], image_id=IDS[r]) for r in roles)


def evaluated(repo: Path, ref: str, fake: Fake, *roles: str) -> Any:
    spec = Repo(repo).load_ref(ref)
    return evaluate_image(spec, fake, IDS["this"], refs(*roles), on_line=lambda _: None, runner=fake)


def notes_of(repo: Path, ref: str, entry: dict[str, Any], lang: str) -> str:
    spec = Repo(repo).load_ref(ref)
    record = replace(COMPLETE, ref=ref, evaluation=entry)
    return render_notes(Repo(repo), spec, load_registries(repo), lang, record).text


def test_the_image_against_its_base_in_the_seeds_form(repo: Path, tmp_path: Path) -> None:
    fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
    got = evaluated(repo, REF, fake, "base")
    assert got is not None
    assert got.stops == ()
    entry = got.entry
    assert entry["status"] == "passed"
    assert entry["cpuset"] == "0-1"
    this = next(a for a in entry["arms"] if (a["image"], a["variant"]) == ("this", "plain"))
    assert len(this["figures"]) == 5
    assert len(this["warmup"]) == 1
    unsupported = {a["variant"]: a["unsupported"] for a in entry["arms"] if a["image"] == "this"}
    assert unsupported["+CompilerOpt"] == "no C++ compiler"  # reported, not dropped
    plain = next(c for c in entry["comparisons"] if (c["variant"], c["against"]) == ("plain", "base"))
    assert plain["verdict"] == "within"
    assert plain["low"] <= plain["ratio"] <= plain["high"]

    # The record keeps every round's figures and reads back through its schema.
    path = tmp_path / "25.03.json"
    records.write(replace(COMPLETE, evaluation=entry), path)
    assert records.read(path).evaluation == json.loads(json.dumps(entry))

    zh, en = notes_of(repo, REF, entry, "zh"), notes_of(repo, REF, entry, "en")
    assert "## E2E性能收益评估" in zh
    assert "### 镜像对比基础镜像&迭代评估" in zh
    assert "### 核心组件E2E性能贡献分析" in zh
    assert "| plain（不开启任何优化） |" in zh
    assert "对比pytorch-cpu-sdk:2.13.0" in zh
    assert "## End-to-end performance evaluation" in en
    assert f"{plain['ratio']:.2f}x [{plain['low']:.2f}, {plain['high']:.2f}] within the threshold" in en
    assert "| +CompilerOpt | no C++ compiler |" in en
    # Rendered from the record alone: the same record gives the same notes.
    assert notes_of(repo, REF, entry, "en") == en


def slower_release(repo: Path, accepted: bool) -> str:
    accepts = (
        "  accepted:\n    - {variant: plain, against: previous, reason: 'one thread, on purpose'}\n"
        "    - {variant: +Accelerate, against: previous, reason: 'one thread, on purpose'}\n"
    )
    write_manifest(repo, "training-cpu-pytorch", "25.04", (
        'image: training-cpu-pytorch\nversion: "25.04"\nextends: "25.03"\n'
        "env: {OMP_NUM_THREADS: '1'}\nrelease: {highlights: [{en: fewer threads, zh: 更少的线程}]}\n"
        + ("evaluation:\n" + accepts if accepted else "")
    ))  # fmt: skip
    return "training-cpu-pytorch:25.04"


def test_a_clearly_slower_release_is_stopped_naming_the_variant_ratio_and_interval(repo: Path) -> None:
    ref = slower_release(repo, accepted=False)
    fake = Fake(speed={IDS["this"]: 550.0, IDS["base"]: 1000.0, IDS["previous"]: 1000.0})
    got = evaluated(repo, ref, fake, "base", "previous")
    assert got is not None
    stops = {(c.variant, c.against) for c in got.stops}
    assert ("plain", "previous") in stops
    assert ("+Accelerate", "base") not in stops  # the base cannot run it: no comparison, no verdict
    message = gate_failure(Repo(repo).load_ref(ref), got)
    error = PerformanceRegression(message)
    assert error.exit_code == 17
    line = next(x for x in message.splitlines() if "plain against training-cpu-pytorch:25.03" in x)
    j = next(c.judgement for c in got.stops if (c.variant, c.against) == ("plain", "previous"))
    assert j is not None
    assert f"{j.ratio:.2f}x [{j.low:.2f}, {j.high:.2f}]" in line
    assert j.high < 0.9
    assert "evaluation.accepted" in message


def test_the_same_regression_accepted_publishes_and_the_notes_say_so(repo: Path) -> None:
    ref = slower_release(repo, accepted=True)
    fake = Fake(speed={IDS["this"]: 550.0, IDS["base"]: 550.0, IDS["previous"]: 1000.0})
    got = evaluated(repo, ref, fake, "base", "previous")
    assert got is not None
    assert got.stops == ()
    accepted = [c for c in got.comparisons if c.accepted]
    assert [(c.variant, c.against) for c in accepted] == [("plain", "previous"), ("+Accelerate", "previous")]
    assert {c.accepted for c in accepted} == {"one thread, on purpose"}
    assert got.entry["status"] == "passed"
    en, zh = notes_of(repo, ref, got.entry, "en"), notes_of(repo, ref, got.entry, "zh")
    assert "accepted regression" in en
    assert "one thread, on purpose" in en
    assert "已接受的性能回退" in zh


def test_a_variant_compared_with_the_previous_release_only_is_not_run_in_the_base(repo: Path) -> None:
    write_manifest(repo, "training-cpu-pytorch", "25.04", (
        'image: training-cpu-pytorch\nversion: "25.04"\nextends: "25.03"\n'
        "release: {highlights: [{en: the same, zh: 相同}]}\n"
        "evaluation:\n  variants:\n"
        "    - {name: +Accelerate, env: {XPU_BENCH_ACCELERATE: '1'}, against: [previous]}\n"
    ))  # fmt: skip
    fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0, IDS["previous"]: 1000.0})
    got = evaluated(repo, "training-cpu-pytorch:25.04", fake, "base", "previous")
    assert got is not None
    accelerated = ("XPU_BENCH_ACCELERATE",)
    assert (IDS["base"], accelerated) not in fake.ran  # no arm measures what nothing compares
    assert {(IDS["this"], accelerated), (IDS["previous"], accelerated), (IDS["base"], ())} <= fake.ran
    pairs = {(c.variant, c.against): c for c in got.comparisons}
    assert ("+Accelerate", "base") not in pairs
    assert pairs[("+Accelerate", "previous")].judgement is not None
    assert pairs[("+Accelerate", "plain")].judgement is not None  # its contribution, as before
    assert pairs[("plain", "base")].judgement is not None
    en = notes_of(repo, "training-cpu-pytorch:25.04", got.entry, "en")
    row = next(line for line in en.splitlines() if line.startswith("| +Accelerate |"))
    assert "not compared (the manifest does not compare this variant with it)" in row
    assert "未对比" in notes_of(repo, "training-cpu-pytorch:25.04", got.entry, "zh")


def test_the_release_it_extends_is_found_by_the_image_its_record_says_was_tested(repo: Path) -> None:
    slower_release(repo, accepted=False)
    spec = Repo(repo).load_ref("training-cpu-pytorch:25.04")
    records.write(
        replace(COMPLETE, tested_image_id=IDS["previous"]), records.default_path(repo, *REF.split(":"))
    )
    fake = Fake(speed={IDS["previous"]: 1.0})
    found = _previous(Repo(repo), spec, fake, CredentialStore.from_settings(Settings()))
    assert (found.ref, found.image_id, found.missing) == (REF, IDS["previous"], None)


def test_an_image_that_carries_another_workload_is_not_compared(repo: Path) -> None:
    from xpu_release.release.run.evaluate import _same_workload

    spec = Repo(repo).load_ref(REF)
    other = {IDS["base"]: {f"{WORKLOAD_LABEL_PREFIX}xpu-bench": "sha256:" + "ff" * 32}}
    fake = Fake(speed={IDS["this"]: 1.0, IDS["base"]: 1.0}, labels=other)
    checked = _same_workload(spec, fake, IDS["this"], refs("base")[0])
    assert checked.missing is not None
    assert "carries another xpu-bench" in checked.missing


def test_diff_shows_how_the_new_release_measured_against_the_old(repo: Path) -> None:
    ref = slower_release(repo, accepted=True)
    fake = Fake(speed={IDS["this"]: 550.0, IDS["base"]: 550.0, IDS["previous"]: 1000.0})
    got = evaluated(repo, ref, fake, "base", "previous")
    assert got is not None
    records.write(
        replace(COMPLETE, ref=ref, evaluation=got.entry), records.default_path(repo, *ref.split(":"))
    )
    result = run(repo, "diff", REF, ref)
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("evaluation") and "plain" in x)
    assert "0.5" in line
    assert "accepted regression" in line


@pytest.mark.parametrize("reason", ["no engine on this runner"])
def test_a_skipped_evaluation_is_said_in_the_notes(repo: Path, reason: str) -> None:
    from xpu_release.image.evaluation import skipped

    assert f"未评估：{reason}" in notes_of(repo, REF, skipped(reason), "zh")
    assert f"Not evaluated: {reason}" in notes_of(repo, REF, skipped(reason), "en")


def test_a_rerun_takes_what_was_measured_for_the_very_same_images(repo: Path, tmp_path: Path) -> None:
    from xpu_release.release.run.evaluate import measured_before, remember
    from xpu_release.settings import current, use

    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        spec = Repo(repo).load_ref(REF)
        fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
        got = evaluated(repo, REF, fake, "base")
        assert got is not None
        assert measured_before(spec, IDS["this"], refs("base")) is None
        remember(spec, IDS["this"], refs("base"), got.entry)
        assert measured_before(spec, IDS["this"], refs("base")) == got.entry
        # Another base, another image or another evaluation is measured again.
        another = (replace(refs("base")[0], image_id=IDS["previous"]),)
        assert measured_before(spec, IDS["this"], another) is None
        assert measured_before(spec, IDS["previous"], refs("base")) is None
        assert spec.evaluation is not None
        other = replace(spec, evaluation=replace(spec.evaluation, rounds=7))
        assert measured_before(other, IDS["this"], refs("base")) is None
    finally:
        use(before)


DAMAGED = {
    "not JSON": b"{not json",
    "nested too deep": b"[" * 5000 + b"]" * 5000,
    "a number of 400 digits": b'{"status": "passed", "rounds": ' + b"9" * 400 + b"}",
    "another shape": b'{"status": "passed", "reason": "x", "images": ["this"]}',
    # all a rerun looks at is right; the notes would fail on the command
    "a command that is a number": json.dumps(
        {"status": "passed", "reason": "x", "command": 5, "images": {"this": {"id": IDS["this"]}}}
    ).encode(),
}


@pytest.mark.parametrize("damage", [*sorted(DAMAGED), "a FIFO"])
def test_a_damaged_kept_evaluation_is_measured_again(repo: Path, tmp_path: Path, damage: str) -> None:
    from xpu_release.release.run.evaluate import _cached, measured_before, remember
    from xpu_release.settings import current, use

    before = current()
    use(Settings(cache=tmp_path / "cache"))
    try:
        spec = Repo(repo).load_ref(REF)
        got = evaluated(repo, REF, Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0}), "base")
        remember(spec, IDS["this"], refs("base"), got.entry)
        kept = _cached(spec, IDS["this"], refs("base"))
        kept.unlink()
        if damage == "a FIFO":
            os.mkfifo(kept)  # never opened to wait for a writer
        else:
            kept.write_bytes(DAMAGED[damage])

        assert measured_before(spec, IDS["this"], refs("base")) is None
    finally:
        use(before)


def test_the_command_line_refuses_what_it_cannot_evaluate_before_asking_the_engine(repo: Path) -> None:
    none = run(repo, "evaluate", "training-xpu-pytorch:25.03")
    assert none.exit_code == 3
    assert "declares no evaluation" in none.stderr
    against = run(repo, "evaluate", REF, "--against", "not a ref")
    assert against.exit_code == 3
    assert "is not NAME:VERSION" in against.stderr
    no_reason = run(repo, "release", REF, "--dry-run", "--no-evaluate", " ")
    assert no_reason.exit_code == 3
    assert "--no-evaluate needs a reason" in no_reason.stderr


@pytest.mark.parametrize(
    ("verdict", "cell"),
    [
        (None, "1.10x [1.00, 1.20]"),
        ("undecided", "1.10x [1.00, 1.20] undecided"),
        ("bogus", "1.10x [1.00, 1.20] bogus"),
    ],
)
def test_a_comparison_without_a_verdict_is_shown_without_one(verdict: str | None, cell: str) -> None:
    # `diff` printed "None" for a verdict the record's schema allows to be null (issue 53).
    from xpu_release.release.run.evalnotes import LABELS, _cell

    shown = _cell({"ratio": 1.1, "low": 1.0, "high": 1.2, "verdict": verdict}, LABELS["en"])

    assert shown.startswith(cell)
    assert "None" not in shown
