"""A release that names no platforms (every release before issue 43) does not change: its
resolved manifest's hash, its lock's pins hash, its Dockerfile, its lock file and its inputs
digest (the image's identity label) are byte for byte what they were before platforms existed,
and so is the config normalization makes of a build (the image id). The figures below were
computed by the code of the commit before platforms (ac98566) on this very repository (its
manifests, images, templates and carried workload as of xpu-bench 2, which changed the
Dockerfiles, the inputs and the training lock's base; the script: the commit's message). Since
the family's layers became eStargz (image.yaml's ``layers``), the inputs digest holds the form
too: what is pinned here is the digest of the same inputs as gzip, which is what it was; and
the training lock pins the eStargz SDK's digest (its lock and inputs figures moved with it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from xpu_release.image.inputs import BuildInputs, inputs_sha256
from xpu_release.image.lockfile import load_locks, pins_sha256
from xpu_release.image.normalize import config_bytes, normalized_config
from xpu_release.manifest import Repo
from xpu_release.manifest.platforms import AMD64
from xpu_release.manifest.registries import load_registries

ROOT = Path(__file__).resolve().parents[3]

BEFORE = {
    "pytorch-cpu-sdk:2.13.0": {
        "content": "1b684a26616920e9e4e870d9a37c545dfc017a8df0499cf32d563681d773728a",
        "pins": "a1dccac5bd368ff813d90c2d204f345458245931347ae6c43e96a9c1ddbe9788",
        "inputs": "3ca908527ce5ec42ea401b9a45be1df2ff82465f61c3856a22a35e8e45d015bf",
        "dockerfile": "6513a70a48b5df32d000969c678edd166b15baacb1fbc1886a5f3b318013b905",
        "lock": "f9838890141c3a553c1750629d8e9fd8380c716206cb7a6e2f5f6a730b6ee8b2",
    },
    "training-cpu-pytorch:25.03": {
        "content": "8982d2ba4fdd2a05b320f3d1fa8eba6e7eb23a8387c4c06fe02357d567f29f95",
        "pins": "f46b89d0b45c598a42ae6752057f57d630297e22f6226f77d71f5ad66fdc0f52",
        "inputs": "e3470082cfd968c711f85e022b838a608409aac6b0b34ba2047e2ab6d457cae2",
        "dockerfile": "5ea05df85a5caec50003f8e7cb05094755ce62599304bda9170e8cbf06e7a0b5",
        "lock": "4fb4936695b3114176f0fdd39a2f86df887108627863a33af6a32c0ce4d314ba",
    },
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("ref", sorted(BEFORE))
def test_a_release_without_platforms_is_what_it_was_before_platforms_existed(ref: str) -> None:
    repo = Repo(ROOT)
    spec = repo.load_ref(ref)
    inputs = BuildInputs.read(ROOT, spec, load_registries(ROOT))
    locks = load_locks(ROOT, spec)

    assert spec.platforms == (AMD64,)
    assert not locks.platformed
    assert {
        "content": spec.content_hash,
        "pins": pins_sha256(spec),
        "inputs": inputs_sha256(spec, inputs.dockerfile.text, inputs.lock, inputs.platform),  # as gzip
        "dockerfile": sha(inputs.dockerfile.text),
        "lock": sha(locks.render(spec)),
    } == BEFORE[ref]
    # the committed lock file itself reads back to the very bytes it holds
    assert (
        locks.render(spec) == (ROOT / "images" / spec.image / spec.version / "requirements.lock").read_text()
    )


# What the engine reports of a build on this x86-64 machine, and what normalization made of it
# before platforms: its sha256 is the image id.
RAW = {
    "architecture": "amd64",
    "os": "linux",
    "config": {"Env": ["A=1"], "Labels": {"x": "y"}, "Cmd": ["/bin/sh"]},
    "history": [{"created_by": "RUN x", "created": "2020"}, {"created_by": "ENV A=1", "empty_layer": True}],
}
CONFIG_BEFORE = "5f2d8925ff0d4b1fb3a8956b0cd571bda10b6a33a5df2f9aeb1c7f050944e7da"


def test_the_config_of_a_linux_amd64_build_is_what_it_was_before_platforms() -> None:
    made = config_bytes(normalized_config(RAW, ["sha256:" + "a" * 64], 1740787200, AMD64))

    assert hashlib.sha256(made).hexdigest() == CONFIG_BEFORE
