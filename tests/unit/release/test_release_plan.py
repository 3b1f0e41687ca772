"""`release --dry-run` shows every stage's plan and changes nothing; CI log groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpu_release.errors import BuildFailed
from xpu_release.release.run.context import StageResult, Status
from xpu_release.release.run.pipeline import Reporter
from xpu_release.settings import Settings

from ..helpers import run

ROOT = Path(__file__).resolve().parents[3]


def test_a_dry_run_against_unreachable_registries_fails_its_preflight_and_writes_nothing(
    repo: Path, tmp_path: Path
) -> None:
    # The repository's registries are production hosts this machine cannot reach: a real run
    # would stop at the base image and at publish, so the dry run stops too (exit 10).
    lock = ROOT / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock"
    (repo / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock").write_text(lock.read_text())
    override = tmp_path / "nowhere.yaml"
    override.write_text(
        "registries:\n"
        "  hub: {host: '127.0.0.1:1', insecure: true}\n"
        "  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
    )

    result = run(
        repo, "--registries", str(override), "release", "training-cpu-pytorch:25.03", "--dry-run", "--json"
    )

    assert result.exit_code == 10, result.stderr
    summary = json.loads(result.stdout)
    assert [s["name"] for s in summary["stages"]] == ["validate", "render", "lock"]
    assert summary["failed"]["stage"] == "preflight"
    for check in ("base image", "endpoint public", "endpoint vpc/cn-beijing", "endpoint vpc/cn-wulanchabu"):
        assert f"FAIL {check}: " in result.stderr
    assert summary["record"] is None
    assert not (repo / "out").exists()


def test_dry_run_stops_at_a_stale_lock(repo: Path) -> None:
    result = run(repo, "release", "training-cpu-pytorch:25.03", "--dry-run")

    assert result.exit_code == 4
    assert (
        "requirements.lock does not exist; run `xpu-release lock training-cpu-pytorch:25.03`" in result.stderr
    )
    assert "lock: FAILED" in result.stderr


def test_a_failed_dry_run_still_prints_the_json_summary_with_the_failed_stage(repo: Path) -> None:
    result = run(repo, "release", "training-cpu-pytorch:25.03", "--dry-run", "--json")

    assert result.exit_code == 4
    summary = json.loads(result.stdout)
    assert [s["name"] for s in summary["stages"]] == ["validate", "render"]
    assert summary["failed"]["stage"] == "lock"
    assert summary["failed"]["exit_code"] == 4
    assert "requirements.lock does not exist" in summary["failed"]["error"]


def test_build_release_is_an_alias(repo: Path) -> None:
    result = run(repo, "build-release", "training-xpu-pytorch:25.03", "--dry-run")

    assert result.exit_code == 4  # the xpu family has no lock on this machine
    assert "==> validate" in result.stderr


@pytest.mark.parametrize(
    ("env", "start", "end"),
    [
        ({"GITHUB_ACTIONS": "true"}, "::group::build", "::endgroup::"),
        ({"GITLAB_CI": "true"}, "section_start:", "section_end:"),
        ({}, "==> build", "    build: done"),
    ],
)
def test_stages_become_ci_log_groups(env: dict[str, str], start: str, end: str) -> None:
    lines: list[str] = []
    reporter = Reporter(lines.append, ci=Settings.from_env(env).ci)

    reporter.start("build")
    reporter.end(StageResult(name="build", status=Status.DONE, seconds=1.0, detail="x"))

    assert start in lines[0]
    assert any(end in line for line in lines[1:])


def test_a_failed_stage_is_an_annotation_on_github() -> None:
    lines: list[str] = []

    Reporter(lines.append, ci="github").fail("build", BuildFailed("build of x:1 failed: boom\nmore"))

    assert "::error title=xpu-release build failed::build of x:1 failed: boom" in lines


def test_in_a_terminal_build_steps_share_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from xpu_release.cli.app import LiveLine

    live = LiveLine(tty=True)
    for line in ("==> build", "Step 1/3 : FROM base", " ---> Using cache", "Step 2/3 : RUN x", "pushing x:1"):
        live(line)

    err = capsys.readouterr().err
    assert err.startswith("==> build\n")
    assert "\r\x1b[KStep 2/3 : RUN x" in err
    assert err.count("\n") == 2  # the stage line and the push line; steps overwrite each other
    assert err.endswith("pushing x:1\n")


def test_in_ci_logs_every_line_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    from xpu_release.cli.app import LiveLine

    live = LiveLine(tty=False)
    for line in ("Step 1/2 : FROM base", " ---> Using cache", "Step 2/2 : RUN x"):
        live(line)

    assert capsys.readouterr().err.splitlines() == [
        "Step 1/2 : FROM base",
        " ---> Using cache",
        "Step 2/2 : RUN x",
    ]
