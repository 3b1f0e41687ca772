"""A registry's answers are read bounded, against the fake registry's attacks: a body that
trickles a byte at a time fails on the minimum rate (a socket timeout never would: each byte
resets it), a body that never ends stops at the size expected, a declared length past the bound
is refused before a byte is read. Each test runs under its own deadline: the pace is shrunk so
that the bound trips in a fraction of a second."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import WireError
from xpu_release.guard.bodies import Pace
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.downloads import read_blob, save_blob
from xpu_release.oci.registry import OCI_MANIFEST, RegistryClient, RetryPolicy

from ..fake_registry import State, digest_of, fake_registry

REPO = "ns/image"
BLOB = b"eleven byte"  # 11 bytes
QUICK = Pace(min_rate=1000, window=0.3, deadline=2.0)
DEADLINE = 5.0  # seconds any one read may take here; the bounds trip well before


def client(host: str, state: State, *, attempts: int = 1) -> RegistryClient:
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
    policy = RetryPolicy(attempts=attempts, base_delay=0.0, max_delay=0.0, timeout=3.0, pace=QUICK)
    return RegistryClient(ep, Credentials(username=state.username, password=state.password), policy)


@pytest.fixture
def registry() -> Iterator[tuple[str, State]]:
    with fake_registry() as (host, state):
        state.blobs[digest_of(BLOB)] = BLOB
        config = b"{}"
        state.blobs[digest_of(config)] = config
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": digest_of(config), "size": 2},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": digest_of(BLOB), "size": len(BLOB)}]}).encode()  # fmt: skip
        state.manifests[(REPO, "1.0")] = (OCI_MANIFEST, body)
        yield host, state


def test_a_blob_that_trickles_fails_on_the_minimum_rate_not_the_socket_timeout(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    state.faults.trickle = 0.05  # 20 bytes a second; the socket timeout (3 s) never trips

    start = time.monotonic()
    with pytest.raises(
        WireError, match=r"arrives at \d+ bytes/s .* below the minimum of 1000 bytes/s"
    ) as slow:
        save_blob(client(host, state), REPO, digest_of(BLOB), tmp_path / "b", size=len(BLOB))

    assert time.monotonic() - start < DEADLINE
    assert digest_of(BLOB) in slow.value.message
    assert slow.value.temporary
    assert list(tmp_path.iterdir()) == []  # nothing half-written is kept


def test_a_manifest_that_trickles_fails_within_the_deadline(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults.trickle = 0.05

    start = time.monotonic()
    with pytest.raises(WireError, match="below the minimum"):
        client(host, state).get_manifest(REPO, "1.0")
    assert time.monotonic() - start < DEADLINE


@pytest.mark.parametrize("declares", [None, 1 << 40], ids=["no length", "a terabyte"])
def test_a_blob_listed_at_11_bytes_is_read_for_11_even_when_the_registry_floods(
    registry: tuple[str, State], tmp_path: Path, declares: int | None
) -> None:
    host, state = registry
    state.faults.flood, state.faults.flood_declares = "blobs", declares

    start = time.monotonic()
    with pytest.raises(WireError, match="11 bytes expected") as flood:
        save_blob(client(host, state), REPO, digest_of(BLOB), tmp_path / "b", size=len(BLOB))

    assert time.monotonic() - start < DEADLINE
    assert ("declares 1099511627776 bytes" in flood.value.message) == (declares is not None)
    assert list(tmp_path.iterdir()) == []


def test_a_streamed_blob_stops_at_its_size_too(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults.flood = "blobs"

    with pytest.raises(WireError, match="sends more than the 11 bytes expected"):
        b"".join(read_blob(client(host, state), REPO, digest_of(BLOB), size=len(BLOB)))


def test_a_manifest_that_never_ends_stops_at_the_manifest_bound(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults.flood = "manifests"

    start = time.monotonic()
    with pytest.raises(WireError, match="more than the limit of 4194304 bytes"):
        client(host, state).get_manifest(REPO, "1.0")
    assert time.monotonic() - start < DEADLINE


def test_a_body_that_breaks_off_is_a_temporary_wire_error(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    state.faults.cut_blob_gets = 1

    with pytest.raises(WireError, match=r"broke|ends after") as cut:
        save_blob(client(host, state), REPO, digest_of(BLOB), tmp_path / "b", size=len(BLOB))
    assert cut.value.temporary


def test_an_honest_registry_is_read_as_before(registry: tuple[str, State], tmp_path: Path) -> None:
    host, state = registry
    c = client(host, state)

    save_blob(c, REPO, digest_of(BLOB), tmp_path / "b", size=len(BLOB))
    manifest = c.get_manifest(REPO, "1.0")

    assert (tmp_path / "b").read_bytes() == BLOB
    assert manifest is not None
    assert [d.digest for d in manifest.layers] == [digest_of(BLOB)]
