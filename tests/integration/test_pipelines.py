"""The GitLab pipelines, run by a runner: gitlab-ci-local (pinned; ci/test.sh installs it from
the npm registry) with its shell executor, against the local stack.

- The tag pipeline's `release` job, after the job per platform it needs (`--needs`), releases
  the tagged fixture image: served at every endpoint, the record and the notes in the job's
  artifacts.
- The merge-request fan-out: `changed --gitlab-pipeline` is generated in the project as the
  `changed` job would, and that child pipeline is run. gitlab-ci-local does not run `trigger:`
  jobs (the parent's `build-changed`), so the child file is run directly, with `--file`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from ..gitlab_runner import as_checkout, gitlab_ci_local
from .conftest import ROOT, Cli
from .test_publish import REF, registries_file, served

pytestmark = pytest.mark.integration

PROJECT_FILES = ("pyproject.toml", "README.md", ".gitlab-ci.yml", "registries.yaml")
PROJECT_DIRS = ("src", "ci", "schema", "templates")
HIGH = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"
FIXED_IN_1_17 = {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.17.0"}]}


def _project(tested: Cli, dst: Path) -> Path:
    """This project as a runner checks it out (a git clone with a remote), plus the fixture
    image, rendered and locked as the session's repository copy has it."""
    dst.mkdir()
    for name in PROJECT_FILES:
        shutil.copy(ROOT / name, dst / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in PROJECT_DIRS:
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    for name in ("manifests", "images"):  # the generic in-image checks come with src
        shutil.copytree(tested.root / name, dst / name, ignore=ignore)
    return as_checkout(dst)


def _run(tested: Cli, project: Path, *args: str, env: dict[str, str] | None = None,
         variables: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """gitlab-ci-local in ``project``, each job in a checkout of its own (``--shell-isolation``:
    the project's tracked files copied, as a runner clones; what a job hands on goes through
    its artifacts, and jobs of one stage do not share a folder). The job's shell inherits this
    environment, as a self-hosted runner's jobs inherit the runner's: the stack's engine, docker config and
    registries, the artifact token (a secret: never in argv). ``variables`` are the pipeline's
    (gitlab-ci-local's variables file; it turns a value that names a file into a file variable)."""
    if variables:
        (project / ".gitlab-ci-local-variables.yml").write_text(yaml.safe_dump(variables))
    job_env = {k: v for k, v in tested.env.items() if k != "XPU_RELEASE_ROOT"}  # the job finds its checkout
    return subprocess.run(
        [str(gitlab_ci_local()), "--shell-executor-no-image", "--shell-isolation", *args],
        cwd=project, env={**job_env, **(env or {})}, capture_output=True, text=True, timeout=1200,
        check=False,
    )  # fmt: skip


def _osv_mirror(folder: Path, *extra: dict[str, object]) -> Path:
    """osv.dev's two export archives as the job downloads them, with one record each (made for
    the test) that does not affect the fixture image, and the ``extra`` PyPI records."""
    import zipfile

    for eco, name in (("PyPI", "six"), ("Debian", "bash")):
        (folder / eco).mkdir(parents=True)
        ecosystem = "PyPI" if eco == "PyPI" else "Debian:12"
        rec = {"schema_version": "1.6.0", "id": f"TEST-MIRROR-{eco}", "modified": "2026-12-01T00:00:00Z",
               "affected": [{"package": {"ecosystem": ecosystem, "name": name}, "ranges": [
                   {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "0.0.1"}]}]}]}  # fmt: skip
        with zipfile.ZipFile(folder / eco / "all.zip", "w") as z:
            z.writestr(f"{rec['id']}.json", json.dumps(rec))
            for r in extra if eco == "PyPI" else ():
                z.writestr(f"{r['id']}.json", json.dumps(r))
    return folder


def test_the_gitlab_tag_pipeline_releases_the_tagged_image_under_a_runner(
    tested: Cli, tmp_path: Path
) -> None:
    project = _project(tested, tmp_path / "project")
    regs = registries_file(tmp_path / "regs.yaml", "g" + uuid.uuid4().hex[:10])
    tag = {"CI_COMMIT_TAG": "xpu-fixture/1.0"}
    mirror = _osv_mirror(tmp_path / "osv-mirror")  # the job fetches its advisories from here

    listed = _run(tested, project, "--list", variables=tag)
    # `release` with the jobs it needs: a job per platform (issue 43), then the release.
    run = _run(tested, project, "release", "--needs", variables=tag,
               env={"XPU_RELEASE_REGISTRIES": str(regs), "OSV_BASE_URL": mirror.as_uri()})  # fmt: skip

    assert "release" in listed.stdout
    assert "release-platform: [linux/amd64,docker]" in listed.stdout
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # 1.0 is for linux/amd64 alone: its job builds, tests, scans and hands on the image, which the
    # release loads; the linux/arm64 job has nothing to do and passes.
    assert f"saved {REF} (linux/amd64) to out/images/linux-amd64.tar" in run.stdout
    assert f"{REF} does not declare linux/arm64: nothing to build for it" in run.stdout
    assert f"Loaded image: {REF}" in run.stdout
    record = json.loads((project / "out" / "releases" / "xpu-fixture" / "1.0.json").read_text())
    assert record["complete"] is True
    assert set(served(tested, regs, "1.0").values()) == {record["digest"]}
    assert (project / "out" / "releases" / "xpu-fixture" / "1.0.en.md").is_file()
    assert (project / "out" / "releases" / "xpu-fixture" / "1.0.zh.md").is_file()
    assert record["scan"]["status"] == "passed"  # the gate ran on the fetched archives
    assert "advisories: PyPI/all.zip fetched" in run.stdout
    summary = json.loads((project / "out" / "release-summary.json").read_text())
    assert summary["ref"] == REF
    token = tested.env["XPU_RELEASE_ARTIFACT_TOKEN"]
    assert token not in run.stdout + run.stderr


def test_the_merge_request_fan_out_builds_and_tests_each_changed_image_in_its_own_job(
    tested: Cli, tmp_path: Path
) -> None:
    project = _project(tested, tmp_path / "project")
    base = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    # The merge request: a change to the fixture image's manifest (its title).
    manifest = project / "manifests" / "xpu-fixture" / "1.0.yaml"
    manifest.write_text(manifest.read_text() + "\n# changed by the merge request\n")
    git = ["git", "-C", str(project), "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    subprocess.run([*git, "commit", "-q", "-am", "change the fixture"], check=True)
    child = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "xpu-release"), "--root", str(project), "changed", "--since", base,
         "--gitlab-pipeline"], capture_output=True, text=True, check=True, env=tested.env,
    ).stdout  # fmt: skip
    (project / "changed.gitlab-ci.yml").write_text(child)
    subprocess.run([*git, "add", "changed.gitlab-ci.yml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the generated child pipeline"], check=True)
    run = _run(tested, project, "--file", "changed.gitlab-ci.yml")

    assert list(yaml.safe_load(child)) == ["stages", "default", f"build {REF}"]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert f"build {REF}" in run.stdout
    assert "passed" in run.stdout.lower() or "PASS" in run.stdout


def test_the_gitlab_schedule_pipeline_patches_and_releases_what_a_new_advisory_needs(
    tested: Cli, tmp_path: Path
) -> None:
    """The scheduled job (`CI_PIPELINE_SOURCE=schedule`) on a runner: 1.0 was released clean; an
    advisory against its six 1.16.0 (high, fixed in 1.17.0) appears in the mirror; the job
    fetches it, `watch --release` patches 1.0 into 1.0.1 and releases it, and `latest` serves
    the patch while 1.0 keeps its digest. The next scheduled run, whose checkout lacks the
    patch's files, patches nothing and fails (15) until someone commits them."""
    from datetime import UTC, datetime, timedelta

    project = _project(tested, tmp_path / "project")
    regs = registries_file(tmp_path / "regs.yaml", "w" + uuid.uuid4().hex[:10])
    nothing = tmp_path / "no-advisories"
    nothing.mkdir()
    # Released from the project (its own out/): the session's repository keeps its records.
    Cli(root=project, env=tested.env).run("--registries", str(regs), "release", REF, "--advisories",
                                          str(nothing), check=True)  # fmt: skip
    before = served(tested, regs, "1.0")
    published = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    advisory = {"schema_version": "1.6.0", "id": "TEST-WATCH-1", "aliases": ["CVE-2099-0201"],
                "modified": published, "published": published, "summary": "made for the test",
                "severity": [{"type": "CVSS_V3", "score": HIGH}],
                "affected": [{"package": {"ecosystem": "PyPI", "name": "six"},
                              "ranges": [FIXED_IN_1_17]}]}  # fmt: skip
    mirror = _osv_mirror(tmp_path / "osv-mirror", advisory)
    schedule = {"CI_PIPELINE_SOURCE": "schedule"}
    env = {"XPU_RELEASE_REGISTRIES": str(regs), "OSV_BASE_URL": mirror.as_uri()}

    listed = _run(tested, project, "--list", variables=schedule)
    first = _run(tested, project, "watch", variables=schedule, env=env)
    answer = json.loads((project / "out" / "watch.json").read_text())
    again = _run(tested, project, "watch", variables=schedule, env=env)
    quiet = json.loads((project / "out" / "watch.json").read_text())

    assert "watch" in listed.stdout
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    patch = project / "manifests" / "xpu-fixture" / "1.0.1.yaml"
    assert "CVE-2099-0201" in patch.read_text()
    assert "1.17.0" in patch.read_text()
    after = served(tested, regs, "1.0.1")
    assert len(set(after.values())) == 1
    assert None not in after.values()
    assert set(served(tested, regs, "latest").values()) == set(after.values())
    assert served(tested, regs, "1.0") == before  # the patched release's tag never moves
    (step,) = answer["patched"]
    assert (step["ref"], step["patch"], step["digest"]) == (REF, "xpu-fixture:1.0.1", after["public"])
    assert step["why"]  # every reason it was patched for
    notes = (project / "out" / "releases" / "xpu-fixture" / "1.0.1.en.md").read_text()
    assert "CVE-2099-0201" in notes
    # Each job runs in a checkout of its own: the patch's files came back as the job's artifacts,
    # not yet committed, and the next scheduled run's checkout does not have them.
    untracked = subprocess.run(["git", "-C", str(project), "status", "--porcelain", "--", "manifests"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "?? manifests/xpu-fixture/1.0.1.yaml" in untracked
    assert again.returncode != 0, again.stdout[-4000:] + again.stderr[-2000:]  # a person must commit
    assert quiet["exit_code"] == 15, again.stdout[-4000:] + again.stderr[-2000:]
    assert not (project / "manifests" / "xpu-fixture" / "1.0.2.yaml").exists()
    assert quiet["patched"] == []  # the registry says 1.0.1 is published: 1.0 is not patched again
    (was,) = [r for r in quiet["releases"] if r["ref"] == REF]
    assert (was["state"], was["superseded_by"]) == ("superseded", "xpu-fixture:1.0.1")
    assert was["uncommitted"] is True
    assert served(tested, regs, "1.0.1") == after  # nothing new published
