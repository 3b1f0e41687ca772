"""Many runners at once, on the real stack: a prune while a publish runs, two different images
released together on one runner. (Three publishes of one release at once: test_publish.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import Cli
from .test_publish import REF, registries_file, served

pytestmark = pytest.mark.integration


def _start(cli: Cli, *args: str, cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "xpu_release", "--root", str(cli.root), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**cli.env, "XPU_RELEASE_CACHE": str(cache)},
    )  # fmt: skip


def test_a_prune_during_a_publish_waits_and_breaks_neither(tested: Cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tested.run("test", REF, env={"XPU_RELEASE_CACHE": str(cache)}, check=True)
    regs = registries_file(tmp_path / "regs.yaml", "p" + uuid.uuid4().hex[:10])
    record = tmp_path / "record.json"
    publish = _start(tested, "--registries", str(regs), "publish", REF, "--record", str(record), cache=cache)
    assert publish.stderr is not None
    seen = []
    for line in publish.stderr:  # the publish is under way: it holds the cache
        seen.append(line)
        if line.startswith("pushing"):
            break
    prune = _start(tested, "cache", "prune", "--keep-storage", "0", "--json", cache=cache)

    out, err = prune.communicate(timeout=600)
    _, rest = publish.communicate(timeout=600)

    assert publish.returncode == 0, "".join(seen) + rest
    assert prune.returncode == 0, err
    assert "waiting: a run is using the cache" in err
    assert json.loads(record.read_text())["complete"] is True
    verify = tested.run("--registries", str(regs), "verify", REF, "--record", str(record),
                        env={"XPU_RELEASE_CACHE": str(cache)})  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    # The prune ran after the publish: the spool it filled is gone, the smoke-test marker stays.
    assert json.loads(out)["freed_bytes"] > 0
    assert not list((cache / "oci-blobs").iterdir())
    assert list((cache / "tested").iterdir())


def test_the_cache_cap_after_a_publish_brings_the_cache_under_it(tested: Cli, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"XPU_RELEASE_CACHE": str(cache)}
    tested.run("test", REF, env=env, check=True)
    regs = registries_file(tmp_path / "regs.yaml", "q" + uuid.uuid4().hex[:10])

    result = tested.run("--registries", str(regs), "publish", REF, "--record", str(tmp_path / "r.json"),
                        env={**env, "XPU_RELEASE_CACHE_MAX": "1M"})  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "cache: removed" in result.stderr
    du = json.loads(tested.run("cache", "du", "--json", env=env, check=True).stdout)
    assert sum(k["bytes"] for k in du["kinds"]) <= 1 << 20
    assert set(served(tested, regs, "1.0").values()) == {
        json.loads((tmp_path / "r.json").read_text())["digest"]
    }


def test_the_engine_prune_lists_only_what_xpu_release_built_and_keeps_the_tested_image(
    tested: Cli, tmp_path: Path, hub_base: str
) -> None:
    # A dry run: the engine is shared by the whole suite. An image built here with our label,
    # under a name no manifest has, is one a prune would remove; the tested fixture image is
    # kept, and the stack's base image (not ours) is never looked at.
    from xpu_release.image.engine import Engine
    from xpu_release.labels import INPUTS_LABEL

    engine = Engine.connect()
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {hub_base}\nRUN echo {uuid.uuid4().hex} > /stray\n")
    tag = f"xpu-prune-test:{uuid.uuid4().hex[:8]}"
    stray = engine.build(context=ctx, tag=tag, buildargs={}, labels={INPUTS_LABEL: "prune-test"},
                         on_line=lambda _: None)  # fmt: skip
    try:
        result = tested.run("cache", "prune", "--engine", "--dry-run", "--json",
                            env={"XPU_RELEASE_CACHE": str(tmp_path / "cache")})  # fmt: skip

        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)["engine"]
        assert stray in data["removed"]
        assert engine.image(stray) is not None  # a dry run
        assert engine.require_image(REF).id in data["kept"]
        assert engine.require_image(REF).id not in data["removed"]
        assert engine.require_image(hub_base).id not in data["removed"]
    finally:
        engine.api.remove_image(stray, force=True)


def test_two_different_images_released_at_once_on_one_runner_both_succeed(
    tested: Cli, tmp_path: Path
) -> None:
    # A merge request that changes two images: both jobs run on one runner (one cache, one
    # engine) at the same moment. The second image is the fixture under another name.
    other = "xpu-fixture-b"
    try:
        _two_images_at_once(tested, tmp_path, other)
    finally:  # the fixture repository is shared by the session: it loses the second image again
        shutil.rmtree(tested.root / "manifests" / other, ignore_errors=True)
        shutil.rmtree(tested.root / "images" / other, ignore_errors=True)


def _two_images_at_once(tested: Cli, tmp_path: Path, other: str) -> None:
    src = tested.root / "manifests" / "xpu-fixture" / "1.0.yaml"
    (tested.root / "manifests" / other).mkdir(exist_ok=True)
    (tested.root / "manifests" / other / "1.0.yaml").write_text(
        src.read_text().replace("image: xpu-fixture", f"image: {other}")
    )
    images = tested.root / "images"
    shutil.copytree(images / "xpu-fixture" / "tests", images / other / "tests", dirs_exist_ok=True)
    tested.run("render", f"{other}:1.0", check=True)
    tested.run("lock", f"{other}:1.0", check=True)
    cache = tmp_path / "cache"
    namespace = "m" + uuid.uuid4().hex[:10]
    regs = registries_file(tmp_path / "regs.yaml", namespace)
    procs = [
        _start(tested, "--registries", str(regs), "release", ref, cache=cache)
        for ref in (REF, f"{other}:1.0")
    ]
    results = [p.communicate(timeout=900) for p in procs]

    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    for image in ("xpu-fixture", other):
        digests = set(served(tested, regs, "1.0", image).values())
        assert len(digests) == 1
        assert None not in digests
