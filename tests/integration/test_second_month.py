"""The CPU family's second month on the local stack, as a month's work goes: the SDK ships a new
version (2.13.1), the CPU image starts 25.04 from 25.03 with one pin bumped (`new-version --set
accelerate=1.6.0`) and its base moved to the new SDK (one edited line), and both are released
parents first, the CPU image built on a fresh runner. What it proves:

- a new SDK reaches what builds on it, in the order `xpu-release order` gives;
- `latest` moves to 25.04 at every endpoint and 25.03 still serves what it served;
- the upgrade ships only what it changed: the SDK (an environment change) no layer, the CPU
  image two small layers of its own; every other layer is the month before's by digest (locks
  keep the versions the earlier lock chose; a fresh runner rebuilds the unchanged layers byte
  for byte);
- the notes and `diff` name the new version;
- each CPU release mounts the SDK's layers from the SDK's repository at every endpoint and
  sends only its own.

One scenario serves these tests (its builds are the slowest part of the suite); each test
asserts one property of it."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from xpu_release.image.engine import Engine

from .conftest import NO_EVALUATE, Cli, Family
from .test_publish import endpoint_client, served
from .test_reproducible import fresh_runner

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch"
SDK_NEW = "pytorch-cpu-sdk:2.13.1"


@dataclass(frozen=True)
class Month:
    cli: Cli
    regs: Path
    order: list[str]
    first: str  # the digest 25.03 was released as
    second: str  # the digest 25.04 was released as
    records: dict[str, dict[str, Any]]  # ref → its release record (25.03 and 25.04)
    lock: str  # 25.04's requirements.lock
    locked: dict[str, str]  # ref → what `lock` said (stderr) when it locked the new version
    sdk: str  # the digest 2.13.1 was released as
    notes_en: str
    notes_zh: str
    changes: str  # `xpu-release diff 25.03 25.04`


def _record(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout)["record"])


@pytest.fixture(scope="module")
def month(family: Family, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Month]:
    cli, regs = family.cli, family.regs  # month one: the family released parents first there
    tmp = tmp_path_factory.mktemp("month")
    records = {f"{CPU}:25.03": family.record}
    first = str(records[f"{CPU}:25.03"]["digest"])
    assert set(served(cli, regs, "latest", CPU).values()) == {first}

    sdk_new = cli.root / "manifests" / "pytorch-cpu-sdk" / "2.13.1.yaml"
    cpu_new = cli.root / "manifests" / CPU / "25.04.yaml"
    env = fresh_runner(engine, tmp, f"{CPU}:25.03")
    try:
        sdk_new.write_text(
            'image: pytorch-cpu-sdk\nversion: "2.13.1"\nextends: "2.13.0"\n'
            "env: {OMP_NUM_THREADS: '2'}\n"
            "release: {highlights: [{en: Two OpenMP threads., zh: 两个OpenMP线程。}]}\n"
        )
        bump = cli.run("new-version", f"{CPU}:25.04", "--from", "25.03", "--set", "accelerate=1.6.0")
        assert bump.returncode == 0, bump.stderr
        with cpu_new.open("a") as manifest:  # the one line a person edits to take the new SDK
            manifest.write("base: {version: '2.13.1'}\n")
        order = cli.run("order", f"{CPU}:25.04", SDK_NEW, check=True).stdout.split()
        locked = {}
        for ref in order:
            cli.run("render", ref, check=True)
            locked[ref] = cli.run("--registries", str(regs), "lock", ref, check=True, timeout=900).stderr
            if ref.startswith(CPU):
                cli.run(
                    "--registries", str(regs), "build", ref, "--no-cache", env=env, check=True, timeout=1800
                )
            release = cli.run("--registries", str(regs), "release", ref, "--json", *NO_EVALUATE, env=env,
                              timeout=1800)  # fmt: skip
            records[ref] = _record(release)
        yield Month(
            cli=cli,
            regs=regs,
            order=order,
            first=first,
            second=str(records[f"{CPU}:25.04"]["digest"]),
            records=records,
            lock=(cli.root / "images" / CPU / "25.04" / "requirements.lock").read_text(),
            locked=locked,
            sdk=str(records[SDK_NEW]["digest"]),
            notes_en=cli.run("notes", f"{CPU}:25.04", "--lang", "en", check=True).stdout,
            notes_zh=cli.run("notes", f"{CPU}:25.04", "--lang", "zh", check=True).stdout,
            changes=cli.run("diff", f"{CPU}:25.03", f"{CPU}:25.04", check=True).stdout,
        )
    finally:
        sdk_new.unlink(missing_ok=True)
        cpu_new.unlink(missing_ok=True)
        for folder in ("pytorch-cpu-sdk/2.13.1", f"{CPU}/25.04"):
            shutil.rmtree(cli.root / "images" / folder, ignore_errors=True)
        for ref in (f"{CPU}:25.04", SDK_NEW):
            with contextlib.suppress(Exception):
                engine.api.remove_image(ref, force=True)


def _layers(cli: Cli, regs: Path, image: str, tag: str) -> dict[str, int]:
    client, repo = endpoint_client(cli, regs, image=image)
    manifest = client.get_manifest(repo, tag)
    assert manifest is not None, f"{repo} is not served at {tag}"
    return {layer.digest: layer.size for layer in manifest.layers}


def test_a_new_sdk_reaches_what_builds_on_it_parents_first(month: Month) -> None:
    assert month.order == [SDK_NEW, f"{CPU}:25.04"]
    assert f"# base: {SDK_NEW}@{month.sdk}" in month.lock


def test_latest_moves_to_the_new_version_and_the_old_one_serves_what_it_served(month: Month) -> None:
    cli, regs = month.cli, month.regs

    assert month.second != month.first
    assert set(served(cli, regs, "latest", CPU).values()) == {month.second}
    assert set(served(cli, regs, "25.04", CPU).values()) == {month.second}
    assert set(served(cli, regs, "25.03", CPU).values()) == {month.first}


def test_an_upgrade_built_on_a_fresh_runner_ships_only_the_layer_it_changed(month: Month) -> None:
    """The new SDK changed only its environment: it ships no layer (its lock kept every version
    2.13.0's chose, whatever the index offers today). Of 25.04's layers, those that are neither
    25.03's nor the new SDK's are the two it changed."""
    old = _layers(month.cli, month.regs, CPU, "25.03")
    new = _layers(month.cli, month.regs, CPU, "25.04")
    sdk_old = _layers(month.cli, month.regs, "pytorch-cpu-sdk", "2.13.0")
    sdk_new = _layers(month.cli, month.regs, "pytorch-cpu-sdk", "2.13.1")

    assert sdk_new == sdk_old
    assert "versions images/pytorch-cpu-sdk/2.13.0/requirements.lock chose" in month.locked[SDK_NEW]
    assert "; new:" not in month.locked[SDK_NEW]  # it kept all of them
    assert "; new: " in month.locked[f"{CPU}:25.04"]
    assert "accelerate 1.6.0" in month.locked[f"{CPU}:25.04"].partition("; new: ")[2]
    own_old = {d: s for d, s in old.items() if d not in sdk_old}
    own_new = {d: s for d, s in new.items() if d not in sdk_new}
    changed = sorted(size for digest, size in own_new.items() if digest not in old)
    assert list(new)[: len(sdk_new)] == list(sdk_new)  # built on the new SDK, layer for layer
    assert len(own_new) == len(own_old)
    # The accelerate layer, and the image's pip constraints file (every pin: it changes with any
    # bump, a few KB); every other layer of its own is 25.03's, by digest.
    assert len(changed) == 2
    assert changed[0] < 16 << 10
    assert sum(changed) <= 0.05 * sum(own_new.values()), (changed, sum(own_new.values()))


def test_the_notes_and_the_diff_name_the_new_version(month: Month) -> None:
    assert month.notes_en.startswith(f"# {CPU} 25.04\n")
    assert "accelerate 1.5.2 → 1.6.0" in month.notes_en
    assert "accelerate 1.5.2 → 1.6.0，合入对应版本功能和Bug fix。" in month.notes_zh
    assert "components   ~ accelerate 1.5.2 → 1.6.0" in month.changes


@pytest.mark.parametrize(("version", "sdk_version", "previous"), [("25.03", "2.13.0", None),
                                                                  ("25.04", "2.13.1", "25.03")])  # fmt: skip
def test_the_child_mounts_the_sdks_layers_at_every_endpoint_and_sends_only_its_own(
    month: Month, version: str, sdk_version: str, previous: str | None
) -> None:
    sdk = _layers(month.cli, month.regs, "pytorch-cpu-sdk", sdk_version)
    image = _layers(month.cli, month.regs, CPU, version)
    held = _layers(month.cli, month.regs, CPU, previous) if previous else {}
    own = sum(size for digest, size in image.items() if digest not in sdk)
    endpoints = month.records[f"{CPU}:{version}"]["endpoints"]

    assert list(image)[: len(sdk)] == list(sdk)
    assert len(endpoints) == 4
    for endpoint in endpoints:
        # Each SDK layer the image's repository did not hold (from the release before) is
        # mounted from the SDK's repository there; sent: the image's own layers (where they are
        # new), its config and its documents, never the SDK's hundreds of MB.
        assert endpoint["mounted_blobs"] >= len([d for d in sdk if d not in held]), endpoint
        assert endpoint["uploaded_bytes"] < own + (8 << 20), endpoint
    assert sum(sdk.values()) > 8 << 20  # what the bound above leaves out
