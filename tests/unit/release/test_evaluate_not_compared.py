"""An evaluation that measured this image but could compare it with no other (every image it is
compared with missing, or carrying another workload): it stops nothing (docs/using/evaluation.md:
an image that cannot be had is reported as not compared, never a failure), but it is not
"passed" either: its status is "not compared", said in the stage's line, the record and both
notes, and a rerun measures again (only a passed evaluation is kept)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from xpu_release.image.evaluation import NOT_COMPARED, Reference
from xpu_release.manifest import Repo
from xpu_release.release.model import record as records
from xpu_release.release.run.evaluate import evaluate_image

from .test_evaluate import IDS, REF, Fake, evaluated, notes_of
from .test_record import COMPLETE

MISSING = "not in the engine, and pulling it failed: 404 | manifest unknown"


def test_nothing_compared_is_said_in_the_record_the_stage_line_and_the_notes(
    repo: Path, tmp_path: Path
) -> None:
    fake = Fake(speed={IDS["this"]: 1000.0})
    missing = (Reference(role="base", ref="pytorch-cpu-sdk:2.13.0", missing=MISSING),)
    spec = Repo(repo).load_ref(REF)
    got = evaluate_image(spec, fake, IDS["this"], missing, on_line=lambda _: None, runner=fake)
    assert got is not None
    assert not got.stops
    assert got.entry["status"] == NOT_COMPARED
    assert "pytorch-cpu-sdk:2.13.0" in got.entry["reason"]
    assert got.detail.startswith("NOT COMPARED: compared with no other image")

    path = tmp_path / "25.03.json"
    records.write(replace(COMPLETE, ref=REF, evaluation=got.entry), path)
    assert records.read(path).evaluation == json.loads(json.dumps(got.entry))
    en, zh = notes_of(repo, REF, got.entry, "en"), notes_of(repo, REF, got.entry, "zh")
    assert "**Not compared with any other image**" in en
    assert "404 \\| manifest unknown" in en  # the registry's words, escaped for Markdown
    assert "**未与任何其他镜像对比**" in zh


def test_a_comparison_judged_is_passed_not_not_compared(repo: Path) -> None:
    fake = Fake(speed={IDS["this"]: 1000.0, IDS["base"]: 1000.0})
    got = evaluated(repo, REF, fake, "base")
    assert got.entry["status"] == "passed"
    assert "NOT COMPARED" not in got.detail
