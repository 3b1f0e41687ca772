"""Two and three ``mirror`` runs at once (#38, done-means 5), as CI jobs on one runner start
them: separate processes sharing one cache, copying into one layout and into one registry
repository, round after round; after every round each blob at every target is hashed. Once,
two runs sharing a cache spooled a layer to one file and one exited 0 with a truncated layer.

The layer is ``XPU_RELEASE_TEST_LAYER_MB`` (default 32: the fast tier; at 32 MB the shared spool of
old is caught in most rounds, at 8 MB the runs rarely overlap) and the rounds
``XPU_RELEASE_TEST_ROUNDS`` (default 3); the issue's scale is a few hundred MB (256 MB, 4 rounds:
30 s here): ``XPU_RELEASE_TEST_LAYER_MB=256 XPU_RELEASE_TEST_ROUNDS=4 pytest <this file>``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from xpu_release.oci.layout import Layout

from ..fake_registry import State, fake_registry
from ..real_registry import blob_data, real_registry
from .layouts import blobs_of, damaged_blobs, into_registry, release_layout

LAYER_MB = int(os.environ.get("XPU_RELEASE_TEST_LAYER_MB", "32"))
ROUNDS = int(os.environ.get("XPU_RELEASE_TEST_ROUNDS", "3"))
RELEASES = {"training-cpu-pytorch": "25.03", "pytorch-cpu-sdk": "2.13.0"}  # two images, one runner
RUN_SECONDS = 300 + LAYER_MB  # one run at the largest scale, on a loaded runner


@pytest.fixture
def world(
    repo: Path, tmp_path: Path
) -> Iterator[tuple[Path, dict[str, str], dict[str, dict[str, int]], State]]:
    """The two releases served by a fake source registry, an empty fake target registry, and a
    registries file that names both (plain HTTP on loopback, the environment's login)."""
    with fake_registry() as (source, source_state), fake_registry() as (target, target_state):
        source_state.referrers_api = True
        blobs = {}
        for i, (image, version) in enumerate(RELEASES.items()):
            made = tmp_path / f"made-{image}"
            manifest, docs = release_layout(made, version, seed=image, layers=(LAYER_MB << 20, 5000 + i),
                                            referrers=2)  # fmt: skip
            into_registry(made, source_state, f"ns/{image}", version)
            blobs[image] = blobs_of([manifest, *docs])
        regs = tmp_path / "regs.yaml"
        regs.write_text(
            f"registries:\n  public: {{host: '{source}', insecure: true, namespace: ns}}\n"
            f"  vpc: {{hosts: {{cn-beijing: '{target}', cn-wulanchabu: '{target}'}}, insecure: true,"
            " namespace: ns}\n  hub: {host: '127.0.0.1:1', insecure: true}\n"
        )
        env = {**os.environ, "XPU_RELEASE_CACHE": str(tmp_path / "cache"), "XPU_RELEASE_USERNAME": "u",
               "XPU_RELEASE_PASSWORD": "the-password", "XPU_RELEASE_REGISTRIES": str(regs),
               "XPU_RELEASE_ROOT": str(repo), "NO_COLOR": "1"}  # fmt: skip
        yield tmp_path, {"source": source, "target": target, **env}, blobs, target_state


def _run(env: dict[str, str], image: str, source: str, to: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "xpu_release",
        "mirror",
        f"{image}:{RELEASES[image]}",
        "--from",
        source,
        "--to",
        to,
    ]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _start(env: dict[str, str], image: str, to: str) -> subprocess.Popen[str]:
    """A mirror of ``image`` from the fake source registry."""
    return _run(env, image, f"{env['source']}/ns/{image}", to)


def _all_succeed(runs: list[subprocess.Popen[str]]) -> None:
    results = [(run.wait(timeout=RUN_SECONDS), *run.communicate()) for run in runs]
    assert [code for code, _, _ in results] == [0] * len(runs), [err[-1500:] for _, _, err in results]


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.name.startswith("xpu-mirror-") or ".tmp" in p.name
                  or p.name.endswith(".partial"))  # fmt: skip


def test_three_mirrors_into_one_layout_and_one_cache_round_after_round(
    world: tuple[Path, dict[str, str], dict[str, dict[str, int]], State],
) -> None:
    tmp, env, blobs, _ = world
    for round_ in range(ROUNDS):
        usb = tmp / f"usb-{round_ % 2}"  # a fresh layout, then one that holds the copy already
        images = ["training-cpu-pytorch", "pytorch-cpu-sdk", "training-cpu-pytorch"]
        runs = [_start(env, image, f"oci:{usb}") for image in images]
        _all_succeed(runs)

        layout = Layout(usb)
        for image, version in RELEASES.items():
            assert layout.resolve(version) is not None, (round_, image)  # no index.json entry lost
            assert damaged_blobs(usb, blobs[image]) == [], (round_, image)
        assert _leftovers(tmp / "cache") == []
        assert [p.name for p in (usb / "blobs" / "sha256").iterdir() if p.name.startswith(".")] == []


def test_two_and_three_mirrors_into_one_registry_sharing_one_cache_round_after_round(
    world: tuple[Path, dict[str, str], dict[str, dict[str, int]], State],
) -> None:
    tmp, env, blobs, state = world
    for round_ in range(ROUNDS):
        repo = f"ns/round-{round_}"
        runs = [_start(env, "training-cpu-pytorch", f"{env['target']}/{repo}") for _ in range(2 + round_ % 2)]
        _all_succeed(runs)

        for digest in blobs["training-cpu-pytorch"]:
            held = state.blobs.get(digest) or state.manifests[(repo, digest)][1]
            assert "sha256:" + hashlib.sha256(held).hexdigest() == digest, round_
        assert _leftovers(tmp / "cache") == []


# --- a real registry: what distribution 2.8 does ------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    """A release in a layout (``usb``), a real registry (``host``, its ``storage``) that the
    registries file names as the VPC endpoints, and the environment of a command."""

    usb: Path
    host: str
    storage: Path
    env: dict[str, str]
    blobs: dict[str, int]
    cache: Path

    def into(self, repo: str) -> subprocess.Popen[str]:
        """A mirror of training-cpu-pytorch from the layout into ``host/repo``."""
        return _run(self.env, "training-cpu-pytorch", f"oci:{self.usb}", f"{self.host}/{repo}")


@pytest.fixture
def distribution(
    world: tuple[Path, dict[str, str], dict[str, dict[str, int]], State],
) -> Iterator[Distribution]:
    tmp, env, blobs, _ = world
    with real_registry(tmp / "distribution") as (host, storage):
        usb = tmp / "usb"
        _all_succeed([_start(env, "training-cpu-pytorch", f"oci:{usb}")])
        regs = Path(env["XPU_RELEASE_REGISTRIES"])
        regs.write_text(regs.read_text().replace(env["target"], host))  # the VPC endpoints: distribution
        yield Distribution(usb, host, storage, env, blobs["training-cpu-pytorch"], tmp / "cache")


def test_three_mirrors_into_one_distribution_repository_and_its_storage_holds_every_blob_intact(
    distribution: Distribution,
) -> None:
    for round_ in range(ROUNDS):
        _all_succeed([distribution.into(f"ns/round-{round_}") for _ in range(3)])

        for digest in distribution.blobs:
            data = blob_data(distribution.storage, digest).read_bytes()
            assert "sha256:" + hashlib.sha256(data).hexdigest() == digest, round_
        assert _leftovers(distribution.cache) == []


def test_damage_in_distributions_storage_is_found_and_named_since_a_copy_cannot_replace_it(
    distribution: Distribution,
) -> None:
    _all_succeed([distribution.into("ns/image")])
    layer = max(distribution.blobs, key=distribution.blobs.__getitem__)
    stored = blob_data(distribution.storage, layer)
    stored.write_bytes(b"z" * stored.stat().st_size)  # the disk under the registry went bad

    again = distribution.into("ns/image")
    code, _, err = again.wait(timeout=RUN_SECONDS), *again.communicate()

    assert code == 7, err
    assert layer in err
    assert "the target keeps its damaged copy" in err
    assert "Traceback" not in err
