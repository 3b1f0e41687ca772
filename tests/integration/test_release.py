"""`xpu-release release` end to end on the local stack: release, bump one pin, release again."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli
from .test_publish import registries_file, served

pytestmark = pytest.mark.integration


def release(cli: Cli, regs: Path, ref: str, *args: str) -> dict[str, object]:
    result = cli.run("--registries", str(regs), "release", ref, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def stages(summary: dict[str, object]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in summary["stages"]}  # type: ignore[attr-defined, index]


def detail(summary: dict[str, object], name: str) -> str:
    return next(s["detail"] for s in summary["stages"] if s["name"] == name)  # type: ignore[attr-defined, index]


def test_release_then_bump_one_pin_and_release_again(fixture_cli: Cli, tmp_path: Path) -> None:
    cli = fixture_cli
    regs = registries_file(tmp_path / "regs.yaml", "r" + uuid.uuid4().hex[:10])

    dry = release(cli, regs, "xpu-fixture:1.0", "--dry-run")
    assert set(stages(dry).values()) == {"done", "planned"}
    assert set(served(cli, regs, "1.0").values()) == {None}

    first = release(cli, regs, "xpu-fixture:1.0")
    assert list(stages(first)) == [
        "validate",
        "render",
        "lock",
        "build",
        "test",
        "evaluate",
        "scan",
        "publish",
        "verify",
        "notes",
        "record",
    ]
    digest_10 = first["record"]["digest"]  # type: ignore[index]
    assert set(served(cli, regs, "1.0").values()) == {digest_10}

    again = release(cli, regs, "xpu-fixture:1.0")
    assert stages(again)["build"] == "skipped"
    assert stages(again)["test"] == "skipped"
    assert all(e["status"] == "unchanged" for e in again["record"]["endpoints"][1:])  # type: ignore[index]

    bump = cli.run("new-version", "xpu-fixture:1.1", "--from", "1.0", "--set", "six=1.17.0")
    assert bump.returncode == 0, bump.stderr
    cli.run("lock", "xpu-fixture:1.1", check=True)
    second = release(cli, regs, "xpu-fixture:1.1")
    digest_11 = second["record"]["digest"]  # type: ignore[index]

    assert digest_11 != digest_10
    assert set(served(cli, regs, "1.0").values()) == {digest_10}  # the earlier tag is untouched
    assert set(served(cli, regs, "1.1").values()) == {digest_11}
    assert set(served(cli, regs, "latest").values()) == {digest_11}  # the floating tag moved
    notes = Path(second["notes"][1]).read_text()  # type: ignore[index]
    assert "six 1.16.0 → 1.17.0" in notes
    assert digest_11 in notes
    zh = Path(second["notes"][0]).read_text()  # type: ignore[index]
    assert "Bugs Fix" in zh

    # Re-releasing 1.0 with other content is refused; nothing moves.
    manifest = cli.root / "manifests" / "xpu-fixture" / "1.0.yaml"
    original = manifest.read_text()
    manifest.write_text(original.replace('FIXTURE_MODE: "on"', 'FIXTURE_MODE: "changed"'))
    try:
        cli.run("render", "xpu-fixture:1.0", check=True)
        refused = cli.run("--registries", str(regs), "release", "xpu-fixture:1.0")
    finally:
        manifest.write_text(original)
        cli.run("render", "xpu-fixture:1.0", check=True)
        (cli.root / "manifests" / "xpu-fixture" / "1.1.yaml").unlink()

    assert refused.returncode == 9, refused.stderr
    assert "version tags are immutable" in refused.stderr
    assert set(served(cli, regs, "1.0").values()) == {digest_10}
    assert set(served(cli, regs, "latest").values()) == {digest_11}


def test_a_failing_smoke_test_publishes_nothing(fixture_cli: Cli, tmp_path: Path) -> None:
    cli = fixture_cli
    regs = registries_file(tmp_path / "regs.yaml", "r" + uuid.uuid4().hex[:10])
    check = cli.root / "images" / "xpu-fixture" / "tests" / "test_fails.py"
    check.write_text("def test_this_release_is_broken() -> None:\n    assert 1 == 2, 'broken on purpose'\n")
    try:
        result = cli.run("--registries", str(regs), "release", "xpu-fixture:1.0")
    finally:
        check.unlink()

    assert result.returncode == 6
    assert "test_this_release_is_broken" in result.stderr
    assert set(served(cli, regs, "1.0").values()) == {None}
    assert set(served(cli, regs, "latest").values()) == {None}


def test_from_tag_maps_both_spellings_and_refuses_unknown_ones(fixture_cli: Cli) -> None:
    for tag in ("xpu-fixture/1.0", "xpu-fixture-1.0", "refs/tags/training-xpu-pytorch/25.03"):
        result = fixture_cli.run("from-tag", tag)
        assert result.returncode == 0, result.stderr
    assert fixture_cli.run("from-tag", "xpu-fixture-1.0").stdout.strip() == "xpu-fixture:1.0"

    missing = fixture_cli.run("from-tag", "xpu-fixture/9.9")
    assert missing.returncode == 11
    assert "no manifest manifests/xpu-fixture/9.9.yaml" in missing.stderr


def test_a_newer_version_not_released_yet_holds_no_tag_and_the_release_passes_verify(
    fixture_cli: Cli, tmp_path: Path
) -> None:
    # 1.9's manifest is written and not released: it holds no floating tag yet (the line rule,
    # release/model/withdrawn.past_withdrawn), so 1.0, the newest release published, takes
    # latest beside its line's tag; 1.9's own release moves latest on. (Before session 14 latest
    # waited for 1.9, and a patch of 1.0 released meanwhile left it on the unpatched image.)
    cli = fixture_cli
    regs = registries_file(tmp_path / "regs.yaml", "o" + uuid.uuid4().hex[:10])
    newer = cli.root / "manifests" / "xpu-fixture" / "1.9.yaml"
    newer.write_text('image: xpu-fixture\nversion: "1.9"\nextends: "1.0"\n')
    try:
        summary = release(cli, regs, "xpu-fixture:1.0")
    finally:
        newer.unlink()

    record: dict[str, Any] = summary["record"]  # type: ignore[assignment]
    assert {ref.rpartition(":")[2] for ref in record["floating_moved"]} == {"latest", "1.0-latest"}
    assert {s["name"]: s["status"] for s in summary["stages"]}["verify"] == "done"  # type: ignore[attr-defined, index]
    assert set(served(cli, regs, "1.0").values()) == {record["digest"]}
    assert set(served(cli, regs, "latest").values()) == {record["digest"]}


# --- the dry run is a preflight ------------------------------------------------------------


def dry_run(
    cli: Cli, regs: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    result = cli.run(
        "--registries", str(regs), "release", "xpu-fixture:1.0", "--dry-run", "--json", *args, env=env
    )
    return result.returncode, json.loads(result.stdout), result.stderr


def test_a_dry_run_checks_what_the_real_run_needs_and_touches_nothing(
    fixture_cli: Cli, tmp_path: Path
) -> None:
    regs = registries_file(tmp_path / "regs.yaml", "d" + uuid.uuid4().hex[:10])

    code, summary, log = dry_run(fixture_cli, regs)

    assert code == 0, log
    assert list(stages(summary).items()) == [
        ("validate", "done"), ("render", "done"), ("lock", "done"), ("preflight", "done"),
        ("build", "planned"), ("test", "planned"), ("evaluate", "planned"), ("scan", "planned"),
        ("publish", "planned"), ("verify", "planned"), ("notes", "planned"), ("record", "planned"),
    ]  # fmt: skip
    assert "would check nothing: no advisories configured" in detail(summary, "scan")
    assert "127.0.0.1:15001/" in detail(summary, "publish")
    assert summary["record"] is None
    for line in (
        "ok   engine: answers",
        "ok   base image: 127.0.0.1:15000/base/debian/bookworm-python:12 is still sha256:",
        "ok   artifact blob:",
        "ok   endpoint public: 127.0.0.1:15001/",
        "ok   endpoint vpc/cn-beijing: ",
    ):
        assert line in log
    assert set(served(fixture_cli, regs, "1.0").values()) == {None}


@pytest.mark.parametrize(
    ("fault", "code", "names"),
    [
        ("no engine", 10, "engine: no Docker engine answers"),
        ("a region down", 10, "endpoint vpc/cn-shanghai"),
        ("a wrong password", 8, "endpoint public: public (127.0.0.1:15001) refused"),
    ],
)
def test_a_dry_run_fails_as_the_real_run_would(
    fixture_cli: Cli, tmp_path: Path, fault: str, code: int, names: str
) -> None:
    ns = "d" + uuid.uuid4().hex[:10]
    env: dict[str, str] = {}
    hosts = None
    if fault == "no engine":
        env["DOCKER_HOST"] = f"unix://{tmp_path}/no-engine.sock"
    elif fault == "a region down":
        hosts = {"cn-beijing": "127.0.0.1:15002", "cn-shanghai": "127.0.0.1:1"}
    else:
        env.update(XPU_RELEASE_USERNAME="xpu", XPU_RELEASE_PASSWORD="wrong-" + uuid.uuid4().hex)
    regs = registries_file(tmp_path / "regs.yaml", ns, hosts)

    got, summary, log = dry_run(fixture_cli, regs, env=env)

    assert got == code, log
    assert summary["failed"]["stage"] == "preflight"
    assert summary["failed"]["exit_code"] == code
    assert names in summary["failed"]["error"]
    assert "build" not in stages(summary)
    assert env.get("XPU_RELEASE_PASSWORD", "no password given") not in log + json.dumps(summary)


def test_doctor_checks_the_whole_setup(fixture_cli: Cli, tmp_path: Path) -> None:
    regs = registries_file(tmp_path / "regs.yaml", "d" + uuid.uuid4().hex[:10])
    down = registries_file(tmp_path / "down.yaml", "d" + uuid.uuid4().hex[:10], {"cn-beijing": "127.0.0.1:1"})

    ok = fixture_cli.run("--registries", str(regs), "doctor", "xpu-fixture:1.0")
    bad = fixture_cli.run("--registries", str(down), "doctor", "xpu-fixture:1.0", "--json")

    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok   xpu-fixture:1.0 lock: " in ok.stdout
    assert "ok   xpu-fixture:1.0 base image" in ok.stdout
    assert bad.returncode == 10
    failed = [c["what"] for c in json.loads(bad.stdout) if not c["ok"]]
    assert failed == ["endpoint vpc/cn-beijing"]


def test_a_base_release_that_is_not_published_is_named_with_the_command_that_publishes_it(
    fixture_cli: Cli, tmp_path: Path
) -> None:
    # A namespace where nothing was released: the SDK the CPU image builds on is not there.
    regs = registries_file(tmp_path / "regs.yaml", "b" + uuid.uuid4().hex[:10])

    result = fixture_cli.run("--registries", str(regs), "build", "training-cpu-pytorch:25.03", "--rebuild")

    assert result.returncode == 11, result.stderr
    assert "the base release pytorch-cpu-sdk:2.13.0 is not published at 127.0.0.1:15001/" in result.stderr
    assert "xpu-release release pytorch-cpu-sdk:2.13.0" in result.stderr
    assert "internal error" not in result.stderr
