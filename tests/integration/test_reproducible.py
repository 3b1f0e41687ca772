"""Reproducible releases on the real stack: the same manifest, lock and base digest give the same
image on a fresh runner, and so does a one-pin rebuild that reads only its stages; a rerun on a
fresh runner finishes a release; and `repro` names the file that breaks reproducibility. (An
upgrade built on a fresh runner ships only the layer it changed: test_second_month.py.)"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from pathlib import Path

import pytest

from xpu_release.image.engine import Engine
from xpu_release.image.export import save_layers
from xpu_release.image.normalize import engine_config, normalized_config

from .conftest import Cli
from .test_publish import endpoint_client, registries_file, served

pytestmark = pytest.mark.integration

FIXTURE = "xpu-fixture:1.0"


def fresh_runner(engine: Engine, tmp_path: Path, *refs: str) -> dict[str, str]:
    """What a new CI runner has of ``refs``: no image, no build cache, an empty xpu-release
    cache. Returns the environment that points xpu-release at the empty cache."""
    from docker.errors import ImageNotFound

    for ref in refs:
        name, _, version = ref.partition(":")
        for tag in (ref, f"xpu-release-build/{name}:{version}"):
            # Removing the tag removes its untagged parents: the classic builder's cache.
            with contextlib.suppress(ImageNotFound):
                engine.api.remove_image(tag, force=True)
    cache = tmp_path / f"cache-{uuid.uuid4().hex[:8]}"
    cache.mkdir()
    return {"XPU_RELEASE_CACHE": str(cache)}


def image_id(cli: Cli, ref: str, env: dict[str, str] | None = None, *args: str) -> str:
    built = cli.run("build", ref, "--json", *args, env=env, check=True, timeout=1800)
    return str(json.loads(built.stdout)["image_id"])


def test_the_same_inputs_give_the_same_image_on_a_fresh_runner(
    fixture_cli: Cli, built_fixture: object, engine: Engine, tmp_path: Path
) -> None:
    first = engine.require_image(FIXTURE).id
    env = fresh_runner(engine, tmp_path, FIXTURE)
    assert engine.image(FIXTURE) is None

    second = image_id(fixture_cli, FIXTURE, env, "--no-cache")

    assert second == first
    # The epoch of a version that is no calendar version (1.0) is 1970-01-01, everywhere.
    assert engine.inspect_raw(second)["Created"] == "1970-01-01T00:00:00Z"
    assert {h["Created"] for h in engine.api.history(second)} == {0}


def test_a_one_pin_rebuild_reads_its_layers_from_their_stages_and_gives_the_image_of_a_cold_build(
    fixture_cli: Cli, built_fixture: object, engine: Engine, tmp_path: Path
) -> None:
    cli, bumped = fixture_cli, "xpu-fixture:1.1"
    manifest = cli.root / "manifests" / "xpu-fixture" / "1.1.yaml"
    runner = {"XPU_RELEASE_CACHE": str(tmp_path / "runner-cache")}  # one runner's month to month
    try:
        cli.run("build", FIXTURE, "--rebuild", env=runner, check=True, timeout=1800)
        cli.run("new-version", bumped, "--from", "1.0", "--set", "six=1.17.0", check=True)
        cli.run("render", bumped, check=True)
        cli.run("lock", bumped, check=True, timeout=900)

        # --rebuild: another test may have left an image of these inputs (test_release's 1.1).
        built = cli.run("build", bumped, "--json", "--rebuild", env=runner, check=True, timeout=1800)
        rebuilt = json.loads(built.stdout)
        assert rebuilt["skipped"] is False
        # six's layer and the constraints file's, each read from its stage's /out: the image's
        # export (which streams every layer, the base's included) is never asked for.
        assert (rebuilt["layers_rewritten"], rebuilt["layers_exported"]) == (2, 0)
        raw_id = engine.inspect_raw("xpu-release-build/xpu-fixture:1.1")["Id"]
        exact, _ = save_layers(engine, raw_id, set(), tmp_path)
        diffs = engine.inspect_raw(raw_id)["RootFS"]["Layers"]
        from_engine = engine_config(engine.inspect_raw(raw_id), list(reversed(engine.api.history(raw_id))))
        assert from_engine is not None
        assert normalized_config(from_engine, diffs, 0) == normalized_config(json.loads(exact), diffs, 0)

        env = fresh_runner(engine, tmp_path, bumped)
        cold = json.loads(
            cli.run("build", bumped, "--json", "--no-cache", env=env, check=True, timeout=1800).stdout
        )
        # Cold: the blob's, six's and the constraints' layers from their stages; the venv's (made in
        # the system stage itself) out of the export.
        assert (cold["layers_rewritten"], cold["layers_exported"]) == (4, 1)
        assert cold["image_id"] == rebuilt["image_id"]
    finally:
        manifest.unlink(missing_ok=True)
        shutil.rmtree(cli.root / "images" / "xpu-fixture" / "1.1", ignore_errors=True)
        for tag in (bumped, "xpu-release-build/xpu-fixture:1.1"):
            with contextlib.suppress(Exception):
                engine.api.remove_image(tag, force=True)


def test_the_build_uses_the_base_digest_the_lock_pins(fixture_cli: Cli, engine: Engine) -> None:
    lock = (fixture_cli.root / "images" / "xpu-fixture" / "1.0" / "requirements.lock").read_text()
    pinned = next(line for line in lock.splitlines() if line.startswith("# base: ")).split("@")[1]

    base = engine.inspect_raw(f"127.0.0.1:15000/base/debian/bookworm-python@{pinned}")["RootFS"]["Layers"]
    image = engine.inspect_raw(FIXTURE)

    assert image["RootFS"]["Layers"][: len(base)] == base
    assert image["Config"]["Labels"]["org.opencontainers.image.base.digest"] == pinned


def test_lock_check_reports_a_moved_base_tag(
    fixture_cli: Cli, engine: Engine, tmp_path: Path, hub_base: str
) -> None:
    # The fixture's base tag is moved to another image in a registry of its own.
    ns = "m" + uuid.uuid4().hex[:8]
    regs = tmp_path / "regs.yaml"
    regs.write_text(
        f"registries:\n  hub: {{host: '127.0.0.1:15000', namespace: {ns}, insecure: true}}\n"
        "  public: {host: '127.0.0.1:15002', insecure: true}\n"
        "  vpc: {regions: [cn-beijing], hosts: {cn-beijing: '127.0.0.1:15003'}, insecure: true}\n"
    )
    target = f"127.0.0.1:15000/{ns}/debian/bookworm-python:12"
    engine.tag(hub_base, target)
    engine.push(target, None, on_line=lambda _: None)
    locked = fixture_cli.run("--registries", str(regs), "lock", FIXTURE, check=True)
    assert "wrote" in locked.stderr  # a message: on stderr
    current = fixture_cli.run("--registries", str(regs), "lock", FIXTURE, "--check")
    assert current.returncode == 0, current.stderr

    engine.tag("xpu-fixture:1.0", target)  # the tag now names another image
    engine.push(target, None, on_line=lambda _: None)
    moved = fixture_cli.run("--registries", str(regs), "lock", FIXTURE, "--check")
    dry = fixture_cli.run("--registries", str(regs), "release", FIXTURE, "--dry-run")
    fixture_cli.run("lock", FIXTURE, check=True)  # back to the stack's base for the other tests

    assert moved.returncode == 4
    assert "has moved" in moved.stderr
    assert "xpu-release lock xpu-fixture:1.0" in moved.stderr
    # The dry run's preflight says so too; it passes, as the build would: it uses the pinned digest.
    assert dry.returncode == 0, dry.stderr
    assert "ok   base image: the lock pins sha256:" in dry.stderr
    assert "has moved to sha256:" in dry.stderr


def test_repro_says_a_reproducible_image_is_reproducible(fixture_cli: Cli) -> None:
    result = fixture_cli.run("repro", FIXTURE, "--json", timeout=1800)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["same"] is True
    assert report["differing"] == []


def test_repro_names_the_file_that_breaks_reproducibility(fixture_cli: Cli) -> None:
    partial = fixture_cli.root / "templates" / "partials" / "os_packages.j2"
    original = partial.read_text()
    partial.write_text(
        original.replace(
            "&& /opt/venv/bin/pip uninstall --quiet --yes setuptools\n{% endif %}",
            "&& /opt/venv/bin/pip uninstall --quiet --yes setuptools \\\n"
            " && date +%s%N > /opt/venv/build-stamp\n{% endif %}",
        )
    )
    try:
        fixture_cli.run("render", FIXTURE, check=True)
        result = fixture_cli.run("repro", FIXTURE, timeout=1800)
    finally:
        partial.write_text(original)
        fixture_cli.run("render", FIXTURE, check=True)

    assert result.returncode == 5, result.stderr
    assert "is not reproducible" in result.stderr
    assert "/opt/venv/build-stamp: sha256:" in result.stderr
    assert "Traceback" not in result.stderr


def _delete_tag(regs: Path, cli: Cli, endpoint: str, tag: str) -> None:
    client, repo = endpoint_client(cli, regs, endpoint)
    digest = client.head_manifest(repo, tag)
    assert digest is not None
    client.delete_manifest(repo, digest)


def _released(cli: Cli, tmp_path: Path) -> tuple[Path, str]:
    """The fixture released to a namespace of its own: its registries file and digest."""
    regs = registries_file(tmp_path / "regs.yaml", "f" + uuid.uuid4().hex[:10])
    first = cli.run("--registries", str(regs), "release", FIXTURE, "--json", check=True)
    return regs, str(json.loads(first.stdout)["record"]["digest"])


def test_a_fresh_runner_finishes_a_release_that_was_published_in_part(
    fixture_cli: Cli, built_fixture: object, engine: Engine, tmp_path: Path
) -> None:
    cli = fixture_cli
    regs, digest = _released(cli, tmp_path)
    _delete_tag(regs, cli, "vpc/cn-shanghai", "1.0")  # as if the region had failed
    assert served(cli, regs, "1.0")["vpc/cn-shanghai"] is None

    env = fresh_runner(engine, tmp_path, FIXTURE)
    rerun = cli.run("--registries", str(regs), "release", FIXTURE, "--json", env=env)

    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    stages = {s["name"]: s["status"] for s in summary["stages"]}
    assert stages["build"] == "pulled"  # build avoidance: no rebuild
    assert stages["test"] == "done"  # the pulled image is smoke-tested like a built one
    assert set(served(cli, regs, "1.0").values()) == {digest}
    assert summary["record"]["digest"] == digest


def test_a_built_image_is_published_from_the_blobs_its_build_made_never_exported_again(
    fixture_cli: Cli, built_fixture: object, engine: Engine, tmp_path: Path, hub_base: str
) -> None:
    """The build compresses each layer it writes into the publish spool; the push then finds
    them by diff_id and compresses (out of the engine's export) only the base's layers, which
    no build of ours wrote."""
    cli = fixture_cli
    env = fresh_runner(engine, tmp_path, FIXTURE)
    cli.run("build", FIXTURE, "--no-cache", env=env, check=True)
    cli.run("test", FIXTURE, env=env, check=True)
    regs = registries_file(tmp_path / "regs.yaml", "p" + uuid.uuid4().hex[:10])

    published = cli.run("--registries", str(regs), "publish", FIXTURE, "--json", env=env)

    assert published.returncode == 0, published.stderr
    assert json.loads(published.stdout)["complete"] is True
    base = len(engine.inspect_raw(hub_base)["RootFS"]["Layers"])
    every = len(engine.inspect_raw(FIXTURE)["RootFS"]["Layers"])
    assert every > base
    assert f"compressing {base} of {every} layers" in published.stderr


def test_a_fresh_runner_rebuilds_the_same_image_and_publish_changes_nothing(
    fixture_cli: Cli, built_fixture: object, engine: Engine, tmp_path: Path
) -> None:
    cli = fixture_cli
    regs, digest = _released(cli, tmp_path)

    env = fresh_runner(engine, tmp_path, FIXTURE)
    cli.run("build", FIXTURE, "--no-cache", env=env, check=True)
    cli.run("test", FIXTURE, env=env, check=True)
    again = cli.run("--registries", str(regs), "publish", FIXTURE, "--json", env=env)

    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["digest"] == digest
    assert {e["status"] for e in record["endpoints"][1:]} == {"unchanged"}
