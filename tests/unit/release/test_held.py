"""What an endpoint already holds of an image, against an in-process registry that keeps blobs
per repository and mounts them as distribution does: the base release's layers are mounted
from its repository (never sent), found only by the digest the image was built on, and a
registry that will not mount leaves them to an upload."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from xpu_release.labels import BASE_DIGEST_LABEL
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.registry import RegistryClient, RetryPolicy, sha256_digest
from xpu_release.release.publishing.held import BaseLayers, base_layers, mounted
from xpu_release.release.publishing.manifests import Blob, image_manifest

from ..fake_registry import State, fake_registry

SDK = "ns/pytorch-cpu-sdk"
CHILD = "ns/training-cpu-pytorch"
FAST = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, timeout=10.0)


@pytest.fixture
def registry() -> Iterator[tuple[RegistryClient, State]]:
    with fake_registry(State(per_repository=True)) as (host, state):
        ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
        yield RegistryClient(ep, Credentials(username=state.username, password=state.password), FAST), state


def publish_base(client: RegistryClient, tmp_path: Path, layers: dict[str, bytes]) -> str:
    """A release of the base in ``SDK``: its layers (diff_id → blob bytes), config, manifest.
    Returns the manifest's digest."""
    blobs = []
    for i, data in enumerate(layers.values()):
        path = tmp_path / f"layer-{i}"
        path.write_bytes(data)
        client.upload_blob(SDK, sha256_digest(data), path)
        blobs.append(Blob(digest=sha256_digest(data), size=len(data)))
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": list(layers)}}).encode()
    (tmp_path / "config").write_bytes(config)
    client.upload_blob(SDK, sha256_digest(config), tmp_path / "config")
    manifest = image_manifest(config, blobs)
    client.put_manifest(SDK, manifest.digest, manifest)
    return manifest.digest


LAYERS = {"sha256:" + "a" * 64: b"the base layer", "sha256:" + "b" * 64: b"the sdk's torch"}


def test_the_base_releases_layers_are_mounted_into_the_child_and_never_sent(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    digest = publish_base(client, tmp_path, LAYERS)
    base = BaseLayers.at(client, SDK, digest)
    sent_before = client.stats["uploaded_bytes"]

    held = [mounted(client, CHILD, blob.digest, base) for blob in base.blobs.values()]

    assert held == [True, True]
    assert set(base.blobs) == set(LAYERS)
    assert client.stats["mounted"] == 2
    assert client.stats["uploaded_bytes"] == sent_before
    assert {sha256_digest(d) for d in LAYERS.values()} <= state.repo_blobs[CHILD]


def test_a_blob_that_is_not_the_bases_is_never_asked_of_its_repository(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    base = BaseLayers.at(client, SDK, publish_base(client, tmp_path, LAYERS))
    asked = len(state.requests)

    assert mounted(client, CHILD, "sha256:" + "c" * 64, base) is False
    assert mounted(client, CHILD, "sha256:" + "c" * 64, None) is False
    assert len(state.requests) == asked


def test_the_base_is_found_only_by_the_digest_the_image_was_built_on(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, _ = registry
    publish_base(client, tmp_path, LAYERS)

    elsewhere = BaseLayers.at(client, SDK, "sha256:" + "d" * 64)  # another build's base
    missing = BaseLayers.at(client, "ns/no-such-sdk", "sha256:" + "d" * 64)

    assert elsewhere.blobs == {}
    assert elsewhere.digests == frozenset()
    assert missing.blobs == {}


def test_a_registry_that_will_not_mount_leaves_the_layer_to_an_upload(
    registry: tuple[RegistryClient, State], tmp_path: Path
) -> None:
    client, state = registry
    base = BaseLayers.at(client, SDK, publish_base(client, tmp_path, LAYERS))
    state.repo_blobs[SDK].clear()  # the base's repository no longer holds them

    held = mounted(client, CHILD, next(iter(base.digests)), base)

    assert held is False
    assert client.stats["mounted"] == 0
    assert state.uploads == {}  # the session the mount attempt opened was given up


@pytest.mark.parametrize(
    "label",
    [
        "",
        "latest",
        "sha256:../../v2/_catalog",
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 64 + "\n",
    ],
)
def test_a_base_digest_label_that_is_no_digest_reaches_no_registry(
    registry: tuple[RegistryClient, State], label: str
) -> None:
    client, state = registry
    spec = SimpleNamespace(base=SimpleNamespace(image="pytorch-cpu-sdk"))
    asked = len(state.requests)

    found = base_layers(spec, client.endpoint, client, {"Config": {"Labels": {BASE_DIGEST_LABEL: label}}})  # type: ignore[arg-type]

    assert found is None
    assert len(state.requests) == asked
