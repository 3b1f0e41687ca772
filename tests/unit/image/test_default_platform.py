"""A release that names no platforms (every release before issue 43) does not change: its
resolved manifest's hash, its lock's pins hash, its Dockerfile, its lock file and its inputs
digest (the image's identity label) are byte for byte what they were before platforms existed,
and so is the config normalization makes of a build (the image id). The figures below were
computed by the code of the commit before platforms (ac98566) on this very repository (its
manifests, images, templates and carried workload as of xpu-bench 2, which changed the
Dockerfiles, the inputs and the training lock's base; the script: the commit's message). Since
the family's layers became eStargz (image.yaml's ``layers``), the inputs digest holds the form
too: what is pinned here is the digest of the same inputs as gzip, which is what it was; and
the training lock pins the eStargz SDK's digest (its lock and inputs figures moved with it).
Recomputed the same way (ac98566's code, the image.yaml ``layers`` key left out, which that code
does not know) for xpu-bench 3 (it serves) and the SDK's base with g++ (bookworm-python-cxx).
Since a variant names what it is compared with (the training image's compiled variants:
``against: [previous]``), which ac98566's code cannot read, the training manifest's hash and its
inputs digest are this code's (its pins, Dockerfile and lock still the old code's figures)."""

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
        "content": "abec2ca9a28792afd200373871d4142c606208d0e195f34daf10711db4c1c075",
        "pins": "a1dccac5bd368ff813d90c2d204f345458245931347ae6c43e96a9c1ddbe9788",
        "inputs": "a78ff140156ecc505080ef29869c8e7d61ec1ff70989798e81460630e27afcae",
        "dockerfile": "b24092149de73535af363b9eced5455528dce9d8d1976a6d1515edf9b57485b1",
        "lock": "34daa9265c120df94b2278a6e54ae2140d54a639457846b9bd3794f197eccdcc",
    },
    "training-cpu-pytorch:25.03": {
        "content": "d1b0709c73a4a47a1d42e628feb328917f065d946738c6e2679ed3be3200eb7e",
        "pins": "f46b89d0b45c598a42ae6752057f57d630297e22f6226f77d71f5ad66fdc0f52",
        "inputs": "2523be501bc4adc31e43e9ab964b08da9e843c5cfb46d3d6f3c043ab1d81b77e",
        "dockerfile": "ef8cc83be25354f2b92c085a367b2a77c1169c27d00f832c7ced04020a141ee6",
        "lock": "ee5c2c35e45f1fa6493b11143b38fc4a09b36948dacda7ea5bad4cd976f7fb66",
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
