"""Build and smoke-test for real: the local engine, the hub registry, testinfra in containers."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from xpu_release.errors import BuildFailed
from xpu_release.image.engine import Engine

from .conftest import ArtifactServer, Cli

pytestmark = pytest.mark.integration


def test_build_labels_the_image_with_its_pins_and_provenance(
    built_fixture: subprocess.CompletedProcess[str], engine: Engine
) -> None:
    info = engine.require_image("xpu-fixture:1.0")

    assert "built in" in built_fixture.stdout
    labels = info.labels
    assert labels["org.opencontainers.image.title"] == "xpu-fixture"
    assert labels["org.opencontainers.image.version"] == "1.0"
    # The base by name and by the digest the lock pins; no host of the registry that served it.
    assert labels["org.opencontainers.image.base.name"] == "debian/bookworm-python:12"
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert labels["io.xpu-release.component.six"] == "1.16.0"
    assert labels["io.xpu-release.component.blob"] == "1.0"
    assert len(labels["io.xpu-release.manifest.sha256"]) == 64
    # Nothing of the build's time or place: created is the release's epoch (1.0 is no
    # calendar version: 1970), and no revision or source that differs between checkouts.
    assert labels["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z"
    assert "org.opencontainers.image.revision" not in labels
    assert "org.opencontainers.image.source" not in labels


def test_the_artifact_token_never_reaches_history_config_or_logs(
    built_fixture: subprocess.CompletedProcess[str], engine: Engine, artifact_server: ArtifactServer
) -> None:
    history = "\n".join(engine.history("xpu-fixture:1.0"))
    config = json.dumps(engine.inspect_raw("xpu-fixture:1.0"))

    # What we search is really there: the history of every layer and the labelled config.
    assert "pip uninstall --quiet --yes setuptools" in history
    assert "io.xpu-release.component.blob" in config
    for text in (history, config, built_fixture.stdout, built_fixture.stderr):
        assert artifact_server.token not in text


def test_without_the_token_the_private_artifact_is_refused(fixture_cli: Cli, tmp_path: Path) -> None:
    env = {"XPU_RELEASE_ARTIFACT_TOKEN": "", "XPU_RELEASE_CACHE": str(tmp_path / "empty-cache")}

    result = fixture_cli.run("build", "xpu-fixture:1.0", "--rebuild", env=env)

    assert result.returncode == 5
    assert "refused us (401)" in result.stderr
    assert "set XPU_RELEASE_ARTIFACT_TOKEN" in result.stderr


def test_an_unchanged_image_is_not_rebuilt(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli
) -> None:
    again = fixture_cli.run("build", "xpu-fixture:1.0", "--json", check=True)

    result = json.loads(again.stdout)
    assert result["skipped"] is True
    assert "up to date" in again.stderr


def test_smoke_checks_pass_on_the_built_image(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli, engine: Engine
) -> None:
    result = fixture_cli.run("test", "xpu-fixture:1.0", "--json", check=True)

    summary = json.loads(result.stdout)
    # pin, pip check, import, 2 env vars, file, tool, artifact, 5 labels, no leftovers, own test
    assert summary["passed"] >= 15
    assert summary["failed"] == []
    # On an engine of more than one CPU, the generic checks and the image's own each in a
    # container of their own, at once.
    started = dict(re.findall(r"smoke-testing \S+ in container (\S+): (\S+)", result.stderr))
    if engine.cpu_count() > 1:
        assert sorted(started.values()) == ["checks", "images/xpu-fixture/tests"], result.stderr[-2000:]


def test_the_smoke_run_ignores_the_repository_pytest_settings(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli
) -> None:
    # A repository's own pytest settings (here: options of plugins the runner lacks, like
    # pytest-timeout's `timeout`) are its test suite's; the smoke run must not warn about them.
    settings = fixture_cli.root / "pyproject.toml"
    settings.write_text("[tool.pytest.ini_options]\nnot_a_known_option = 1\naddopts = '--no-such-flag'\n")
    try:
        result = fixture_cli.run("test", "xpu-fixture:1.0")
    finally:
        settings.unlink()

    assert result.returncode == 0, result.stderr[-2000:]
    assert "Unknown config option" not in result.stdout + result.stderr
    assert "PytestConfigWarning" not in result.stdout + result.stderr


def test_the_smoke_run_loads_no_conftest_of_the_repositorys_own_test_suite(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli
) -> None:
    # A release job installs xpu-release without the dev extras; the repository's own test
    # suite's conftest (tests/conftest.py, root conftest.py) needs them, and is not the smoke run's.
    planted = [fixture_cli.root / "tests" / "conftest.py", fixture_cli.root / "conftest.py"]
    kept = {p: p.read_bytes() for p in planted if p.is_file()}
    made = [d for d in {p.parent for p in planted} if not d.exists()]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("import a_dev_only_module_that_is_not_installed\n")
    try:
        result = fixture_cli.run("test", "xpu-fixture:1.0", "--json")
    finally:
        for p in planted:
            p.unlink()
        for p, data in kept.items():
            p.write_bytes(data)
        for d in made:
            d.rmdir()

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert summary["passed"] >= 15


def test_the_sbom_as_spdx_passes_spdx_tools_validator(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli, tmp_path: Path
) -> None:
    import shutil
    import sys

    out = tmp_path / "sbom.spdx.json"
    fixture_cli.run("sbom", "xpu-fixture:1.0", "--format", "spdx-json", "-o", str(out), check=True)
    tool = shutil.which("pyspdxtools") or str(Path(sys.executable).parent / "pyspdxtools")
    check = subprocess.run([tool, "-i", str(out)], capture_output=True, text=True, check=False)

    assert check.returncode == 0, check.stdout + check.stderr
    names = {p["name"] for p in json.loads(out.read_text())["packages"]}
    assert {"six", "bash", "Blob"} <= names  # a pip pin, a Debian package, the artifact


def test_a_wrong_pin_fails_the_smoke_test_and_names_it(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli, tmp_path: Path
) -> None:
    manifest = fixture_cli.root / "manifests" / "xpu-fixture" / "1.0.yaml"
    original = manifest.read_text()
    manifest.write_text(original.replace("version: 1.16.0", "version: 1.17.0"))
    try:
        result = fixture_cli.run("test", "xpu-fixture:1.0")
    finally:
        manifest.write_text(original)

    assert result.returncode == 6
    assert "must not be published" in result.stderr
    assert "test_pin_is_installed_at_exactly_its_version" in result.stderr
    assert "six: manifest pins 1.17.0, image has 1.16.0" in result.stderr


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["ctrl-c", "sigterm-ci-cancel", "sighup"],
)
def test_a_signal_during_test_leaves_no_container(
    built_fixture: subprocess.CompletedProcess[str], fixture_cli: Cli, engine: Engine, sig: int, code: int
) -> None:
    # The signal lands as soon as the engine lists this run's container: often while the run
    # still waits for the engine's answer to its create (the hold in interrupts.py is for that).
    before = set(engine.containers("smoke"))  # another test's leftover is not this run's
    proc = fixture_cli.popen("test", "xpu-fixture:1.0")
    deadline = time.monotonic() + 60
    while not set(engine.containers("smoke")) - before and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    assert set(engine.containers("smoke")) - before, "the smoke container never started"

    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)

    assert proc.returncode == code, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert set(engine.containers("smoke")) - before == set()
    assert before == set()


def test_a_build_that_fails_midway_keeps_the_full_log(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM 127.0.0.1:15000/base/debian/bookworm-python:12\n"
        "RUN echo first-step-ran\n"
        "RUN echo about-to-fail && exit 3\n"
        "RUN echo never\n"
    )
    lines: list[str] = []

    with pytest.raises(BuildFailed) as failure:
        engine.build(context=tmp_path, tag="xpu-broken:0", buildargs={}, labels={}, on_line=lines.append)

    assert "returned a non-zero code: 3" in failure.value.message
    assert "first-step-ran" in failure.value.details
    assert "about-to-fail" in failure.value.details
    assert "never" not in "".join(lines)


def test_build_containers_have_no_network(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM 127.0.0.1:15000/base/debian/bookworm-python:12\n"
        'RUN python3 -c "import socket; print(sorted(n for _, n in socket.if_nameindex()))" '
        "&& python3 -c \"import socket; socket.create_connection(('172.17.0.1', 15000), timeout=5)\"\n"
    )
    lines: list[str] = []

    with pytest.raises(BuildFailed) as failure:
        engine.build(context=tmp_path, tag="xpu-netcheck:0", buildargs={}, labels={}, on_line=lines.append)

    assert "['lo']" in failure.value.details  # only loopback inside the build container
    assert "Network is unreachable" in failure.value.details


def test_a_corrupt_artifact_fails_the_build_with_exit_5_and_the_log(fixture_cli: Cli, tmp_path: Path) -> None:
    import hashlib

    blob = tmp_path / "blob.tar.gz"
    blob.write_bytes(b"this is not a gzip file\n")
    manifest = fixture_cli.root / "manifests" / "xpu-fixture" / "1.0.yaml"
    original = manifest.read_text()
    text = original.split("url: ")[0] + "url: file://" + str(blob) + "\n    sha256: "
    text += (
        hashlib.sha256(blob.read_bytes()).hexdigest()
        + "\n    format: tar.gz"
        + original.split("format: tar.gz")[1]
    )
    manifest.write_text(text)
    try:
        fixture_cli.run("render", "xpu-fixture:1.0", check=True)
        result = fixture_cli.run("build", "xpu-fixture:1.0")
    finally:
        manifest.write_text(original)
        fixture_cli.run("render", "xpu-fixture:1.0", check=True)

    assert result.returncode == 5
    assert "error: build of xpu-fixture:1.0 failed" in result.stderr
    assert "gzip" in result.stderr  # tar's own words, from the build log
    assert "Traceback" not in result.stderr


def test_push_with_a_wrong_password_is_an_auth_error(engine: Engine, built_fixture: Any) -> None:
    from xpu_release.errors import RegistryAuthError

    ref = "127.0.0.1:15001/egslingjun/xpu-auth-check:1.0"
    engine.tag("xpu-fixture:1.0", ref)

    with pytest.raises(RegistryAuthError) as refused:
        engine.push(ref, {"username": "xpu", "password": "wrong-password-123"}, on_line=lambda _: None)

    assert "wrong-password-123" not in refused.value.message + refused.value.details


@pytest.mark.parametrize("family", ["training-cpu-pytorch:25.03"])
def test_the_cpu_family_builds_and_passes_its_smoke_tests(fixture_cli: Cli, family: str) -> None:
    build = fixture_cli.run("build", family, check=True, timeout=1800)
    assert family in build.stdout

    result = fixture_cli.run("test", family, "--json", check=True)

    summary = json.loads(result.stdout)
    assert summary["failed"] == []
    assert summary["passed"] >= 20  # generic checks plus the training steps


def test_lock_of_conflicting_pins_fails_with_pips_explanation(fixture_cli: Cli) -> None:
    manifest = fixture_cli.root / "manifests" / "xpu-fixture" / "1.1.yaml"
    manifest.write_text(
        'image: xpu-fixture\nversion: "1.1"\nextends: "1.0"\n'
        "components:\n"
        "  transformers: {kind: pip, version: 4.49.0}\n"
        "  tokenizers: {kind: pip, version: 0.15.0}\n"
    )
    try:
        result = fixture_cli.run("lock", "xpu-fixture:1.1")
    finally:
        manifest.unlink()

    assert result.returncode == 4
    assert "pip cannot resolve the pins of xpu-fixture:1.1" in result.stderr
    assert "conflict" in result.stderr.lower()
    assert not (fixture_cli.root / "images" / "xpu-fixture" / "1.1" / "requirements.lock").exists()


def test_the_xpu_family_cannot_be_locked_here_and_says_why(fixture_cli: Cli) -> None:
    result = fixture_cli.run("lock", "training-xpu-pytorch:25.03")

    assert result.returncode == 4
    assert "cannot reach the package index https://ppu-pypi.registry.invalid/simple" in result.stderr
    assert "No lock was written" in result.stderr


def test_the_xpu_family_refuses_to_build_with_unpinned_artifacts(fixture_cli: Cli) -> None:
    result = fixture_cli.run("build", "training-xpu-pytorch:25.03")

    assert result.returncode == 2
    assert "accl-p, eic have no sha256" in result.stderr
