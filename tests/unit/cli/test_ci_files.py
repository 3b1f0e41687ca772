"""The CI pipelines call commands that exist, and never put a secret in argv or a log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from xpu_release.cli import cli
from xpu_release.manifest.order import build_order

from ..helpers import check_jsonschema

ROOT = Path(__file__).resolve().parents[3]
PIPELINES = [ROOT / ".github" / "workflows" / "release.yml", ROOT / ".gitlab-ci.yml"]
SCRIPTS = sorted((ROOT / "ci").glob("*.sh"))


def _commands(value: object) -> list[str]:
    """Every shell line in a parsed pipeline (run: and script: entries)."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("run", "script", "before_script") and isinstance(v, str):
                out.append(v)
            elif k in ("script", "before_script") and isinstance(v, list):
                out.extend(str(x) for x in v)
            else:
                out.extend(_commands(v))
    elif isinstance(value, list):
        for item in value:
            out.extend(_commands(item))
    return out


def _xpu_calls(text: str) -> list[str]:
    return re.findall(r"xpu-release\s+(?:--\S+\s+\S+\s+)*([a-z][a-z-]+)", text)


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_every_xpu_release_command_in_a_pipeline_exists(path: Path) -> None:
    lines = _commands(yaml.safe_load(path.read_text()))
    calls = [c for line in lines for c in _xpu_calls(line)]
    scripts = [s for line in lines for s in re.findall(r"(ci/[a-z-]+\.sh)", line)]
    for script in scripts:
        calls += _xpu_calls((ROOT / script).read_text())

    assert "release" in calls or "from-tag" in calls
    assert "watch" in calls  # the scheduled job
    assert set(calls) <= set(cli.commands), set(calls) - set(cli.commands)
    assert all((ROOT / s).is_file() for s in scripts)


@pytest.mark.parametrize("path", PIPELINES + SCRIPTS, ids=lambda p: p.name)
def test_no_secret_is_echoed_or_passed_in_argv(path: Path) -> None:
    text = path.read_text()

    assert not re.search(r"^\s*(echo|printf)\b.*\$\{?[A-Z_]*(PASSWORD|TOKEN)\}?\b", text, re.MULTILINE)
    assert "--password " not in text
    assert not re.search(r"docker login[^\n]*-p", text)


def test_the_github_release_runs_on_tags_and_archives_the_record() -> None:
    workflow = yaml.safe_load(PIPELINES[0].read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true

    assert "tags" in triggers["push"]
    steps = workflow["jobs"]["release"]["steps"]
    assert any("ci/release-tag.sh" in str(s.get("run", "")) for s in steps)
    assert any("out/releases/" in str(s.get("with", {}).get("path", "")) for s in steps)


def test_the_release_jobs_need_no_history() -> None:
    # Nothing in an image depends on git history (issue 50): a shallow clone releases the same
    # bytes, so the jobs that build do not pay for the whole history; `changed` still needs it.
    github = yaml.safe_load(PIPELINES[0].read_text())["jobs"]
    gitlab = yaml.safe_load(PIPELINES[1].read_text())

    def checkout(job: str) -> dict[str, Any]:
        return next(s for s in github[job]["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))

    for github_job, gitlab_job in (
        ("platform", "release-platform"),
        ("release", "release"),
        ("watch", "watch"),
    ):
        assert "fetch-depth" not in checkout(github_job).get("with", {}), github_job
        assert "GIT_DEPTH" not in gitlab[gitlab_job].get("variables", {}), gitlab_job
    assert checkout("matrix")["with"]["fetch-depth"] == 0
    assert gitlab["changed"]["variables"]["GIT_DEPTH"] == "0"


def test_both_pipelines_watch_on_a_schedule_with_the_tag_releases_runner_and_credentials() -> None:
    # The same runner labels and secrets as the tag release: a patch is a release like any other.
    github = yaml.safe_load(PIPELINES[0].read_text())
    gitlab = yaml.safe_load(PIPELINES[1].read_text())
    triggers = github[True] if True in github else github["on"]
    watch, release = github["jobs"]["watch"], github["jobs"]["release"]
    runs = [str(s.get("run", "")) for s in watch["steps"]]

    assert triggers["schedule"][0]["cron"]
    assert "schedule" in watch["if"]
    assert watch["runs-on"] == release["runs-on"]
    assert any("ci/fetch-advisories.sh" in r for r in runs)
    assert any("ci/watch.sh" in r for r in runs)
    env = next(s["env"] for s in watch["steps"] if "ci/watch.sh" in str(s.get("run", "")))
    assert set(env) >= {"XPU_RELEASE_USERNAME", "XPU_RELEASE_PASSWORD", "XPU_RELEASE_ARTIFACT_TOKEN"}
    job = gitlab["watch"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    assert job["tags"] == gitlab["release"]["tags"]
    assert job["script"] == ["ci/fetch-advisories.sh .cache/osv", "ci/watch.sh"]
    assert "xpu-release watch --release" in (ROOT / "ci" / "watch.sh").read_text()
    # A runner's checkout is thrown away: the patches' files leave in the job's artifacts.
    upload = next(s for s in watch["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert {"manifests/", "images/", "out/watch.json"} <= set(upload["with"]["path"].split())
    assert {"manifests/", "images/", "out/watch.json"} <= set(job["artifacts"]["paths"])
    for paths in (upload["with"]["path"].split(), job["artifacts"]["paths"]):
        assert len(paths) == len(set(paths)), paths  # each once


def test_the_ci_entry_point_runs_the_readme_test_command() -> None:
    assert "ci/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert "ci/test.sh" in (ROOT / "README.md").read_text()
    assert "ci/release-local.sh" in (ROOT / "README.md").read_text()


def test_both_tiers_of_the_test_command_check_the_generated_reference() -> None:
    script = (ROOT / "ci" / "test.sh").read_text()
    fast_exit = script.index("if ((fast)); then")

    assert 0 <= script.index("xpu-release docs --check") < fast_exit


def test_the_pull_request_build_has_a_job_for_every_wave_of_this_repository() -> None:
    from xpu_release.manifest import Repo

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    build = workflow["jobs"]["build"]
    waves = build_order(Repo(ROOT), Repo(ROOT).refs())

    assert build["strategy"]["max-parallel"] == 1  # wave after wave
    assert len(waves) <= len(build["strategy"]["matrix"]["wave"])
    assert "--waves" in workflow["jobs"]["matrix"]["steps"][-1]["run"]


# --- GitLab: the merge request fans out through a generated child pipeline ------------------


def _gitlab_schema_check(path: Path) -> Result:
    """GitLab's own CI schema, as check-jsonschema vendors it (offline)."""
    return check_jsonschema("--builtin-schema", "vendor.gitlab-ci", str(path))


def test_the_gitlab_file_passes_gitlabs_ci_schema() -> None:
    result = _gitlab_schema_check(ROOT / ".gitlab-ci.yml")
    assert result.exit_code == 0, result.output


def test_the_gitlab_merge_request_runs_the_generated_child_pipeline() -> None:
    pipeline = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    changed, trigger = pipeline["changed"], pipeline["build-changed"]

    assert "--gitlab-pipeline > changed.gitlab-ci.yml" in " ".join(changed["script"])
    assert "CI_MERGE_REQUEST_DIFF_BASE_SHA" in " ".join(changed["script"])
    assert changed["artifacts"]["paths"] == ["changed.gitlab-ci.yml"]
    assert trigger["needs"] == ["changed"]
    assert trigger["trigger"]["include"] == [{"artifact": "changed.gitlab-ci.yml", "job": "changed"}]
    assert trigger["trigger"]["strategy"] == "depend"  # the merge request waits for the builds


WAVES = [["pytorch-cpu-sdk:2.13.0", "training-xpu-pytorch:25.03"], ["training-cpu-pytorch:25.03"]]
PARENTS = {"training-cpu-pytorch:25.03": "pytorch-cpu-sdk:2.13.0", "pytorch-cpu-sdk:2.13.0": None,
           "training-xpu-pytorch:25.03": None}  # fmt: skip


def test_the_child_pipeline_has_a_job_per_release_each_after_the_job_of_its_base(tmp_path: Path) -> None:
    from xpu_release.cli.ci import gitlab_child_pipeline

    text = gitlab_child_pipeline(WAVES, PARENTS, since="abc123")
    doc = yaml.safe_load(text)
    (tmp_path / "child.yml").write_text(text)

    assert doc["stages"] == ["wave-0", "wave-1"]
    jobs = {k: v for k, v in doc.items() if k.startswith("build ")}
    assert set(jobs) == {f"build {r}" for w in WAVES for r in w}
    assert jobs["build training-cpu-pytorch:25.03"]["needs"] == ["build pytorch-cpu-sdk:2.13.0"]
    assert jobs["build training-cpu-pytorch:25.03"]["stage"] == "wave-1"
    assert jobs["build training-xpu-pytorch:25.03"]["needs"] == []
    assert jobs["build pytorch-cpu-sdk:2.13.0"]["script"] == [
        "xpu-release build pytorch-cpu-sdk:2.13.0", "xpu-release test pytorch-cpu-sdk:2.13.0"]  # fmt: skip
    assert "# assumed:" in text
    result = _gitlab_schema_check(tmp_path / "child.yml")
    assert result.exit_code == 0, result.output


def test_a_base_that_did_not_change_is_not_waited_for(tmp_path: Path) -> None:
    from xpu_release.cli.ci import gitlab_child_pipeline

    doc = yaml.safe_load(gitlab_child_pipeline([["training-cpu-pytorch:25.03"]], PARENTS, since="abc"))

    assert doc["build training-cpu-pytorch:25.03"]["needs"] == []


def test_with_nothing_changed_the_child_pipeline_still_has_a_job_and_passes(tmp_path: Path) -> None:
    from xpu_release.cli.ci import gitlab_child_pipeline

    text = gitlab_child_pipeline([], {}, since="it's-a-ref")
    (tmp_path / "child.yml").write_text(text)

    assert list(yaml.safe_load(text)) == ["stages", "nothing changed"]
    assert _gitlab_schema_check(tmp_path / "child.yml").exit_code == 0


def test_the_gitlab_schema_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "bad.yml").write_text("build:\n  stage: [not, a, string]\n  script: 42\n")
    result = _gitlab_schema_check(tmp_path / "bad.yml")

    assert result.exit_code == 1, result.output
    assert "Schema validation errors were encountered" in result.output
    assert "$.build.script: 42 is not" in result.output


# --- promotion: by hand, in a protected environment ---------------------------------------------


def test_the_github_promotion_is_run_by_hand_in_a_protected_environment() -> None:
    workflow = yaml.safe_load(PIPELINES[0].read_text())
    job = workflow["jobs"]["promote"]
    run = job["steps"][2]["run"]

    assert job["if"] == "github.event_name == 'workflow_dispatch' && inputs.ref != ''"
    assert job["environment"] == "production"
    assert 'promote "$REF" --from registries.staging.yaml' in run
    assert "${{" not in run  # the typed ref reaches the shell as a variable, never as script text
    assert job["steps"][2]["env"]["REF"] == "${{ inputs.ref }}"
    assert "docker" not in str(job["runs-on"])  # no engine: it copies by digest
    assert "github.event_name == 'push'" in workflow["jobs"]["release"]["if"]  # a dispatch releases nothing


def test_a_dispatch_with_a_ref_promotes_and_one_without_watches_never_both() -> None:
    # One workflow_dispatch serves two jobs: its optional `ref` input says which one runs.
    workflow = yaml.safe_load(PIPELINES[0].read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]
    ref = triggers["workflow_dispatch"]["inputs"]["ref"]
    jobs = workflow["jobs"]

    assert ref["required"] is False
    assert ref["default"] == ""
    assert jobs["watch"]["if"] == (
        "github.event_name == 'schedule' || (github.event_name == 'workflow_dispatch' && inputs.ref == '')"
    )
    assert jobs["promote"]["if"] == "github.event_name == 'workflow_dispatch' && inputs.ref != ''"
    for job in ("checks", "matrix", "release"):  # a dispatch builds and releases nothing
        assert "workflow_dispatch" not in jobs[job]["if"]


def test_the_gitlab_promotion_waits_for_a_person_in_a_protected_environment() -> None:
    job = yaml.safe_load(PIPELINES[1].read_text())["promote"]

    assert job["rules"] == [{"if": "$CI_COMMIT_TAG", "when": "manual", "allow_failure": True}]
    assert job["environment"]["name"] == "production"
    assert job["needs"] == ["release"]  # its record travels
    assert 'promote "$ref" --from registries.staging.yaml' in " ".join(job["script"])
    assert "tags" not in job  # no engine needed
    assert job["artifacts"]["paths"] == ["out/releases/"]


def test_the_staging_channel_is_another_namespace_at_the_same_hosts() -> None:
    from xpu_release.manifest.registries import load_registries

    production = load_registries(ROOT).publish_endpoints()
    staging = load_registries(ROOT, str(ROOT / "registries.staging.yaml")).publish_endpoints()

    assert [e.name for e in staging] == [e.name for e in production]
    assert [e.host for e in staging] == [e.host for e in production]
    assert {e.namespace for e in staging}.isdisjoint({e.namespace for e in production})


def test_strict_mode_is_cis_and_the_main_job_never_edits_a_tracked_file() -> None:
    # Issue 50: CI (.ci/run) fails on a missing engine, registry or verifier; a person's
    # ci/test.sh skips what a clone cannot have, saying where it comes from. The main job
    # re-locks a moved base in a copy under out/ (ignored), never the committed locks.
    run = (ROOT / ".ci" / "run").read_text()
    test = (ROOT / "ci" / "test.sh").read_text()
    main = (ROOT / "ci" / "release-local.sh").read_text()

    assert re.search(r"^export CI=true$", run, re.MULTILINE)
    assert run.index("export CI=true") < run.index("ci/test.sh")
    assert not re.search(r"^\s*export CI=", test, re.MULTILINE)
    relocks = [line for line in main.splitlines() if re.search(r"xpu-release .*\block\b(?!.*--check)", line)]
    assert relocks
    assert all('--root "$where"' in line for line in relocks)
    assert "where=out/local-checkout" in main
    assert "/out/" in (ROOT / ".gitignore").read_text().split()
