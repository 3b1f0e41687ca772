"""The registry client against an in-process fake registry (no Docker): paging, the token flow
and its failures, uploads that break or outlive their token, retries, digest checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xpu_release.errors import PublishError, RegistryAuthError, WireError
from xpu_release.manifest.registries import Endpoint
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.registry import Manifest, RegistryClient, RetryPolicy, sha256_digest

from ..fake_registry import Faults, State, digest_of, fake_registry

REPO = "ns/image"
FAST = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0, timeout=10.0)


def client_for(host: str, state: State, password: str | None = None) -> RegistryClient:
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True)
    creds = Credentials(username=state.username, password=password or state.password)
    return RegistryClient(ep, creds, FAST)


@pytest.fixture
def registry() -> Iterator[tuple[str, State]]:
    with fake_registry() as running:
        yield running


def manifest(n: int) -> Manifest:
    body = json.dumps({"schemaVersion": 2, "n": n}).encode()
    return Manifest(
        digest=sha256_digest(body), media_type="application/vnd.oci.image.manifest.v1+json", body=body
    )


def blob_file(tmp_path: Path, size: int) -> tuple[Path, str]:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    path = tmp_path / "blob"
    path.write_bytes(data)
    return path, digest_of(data)


# --- tags -------------------------------------------------------------------------------------


def test_tags_follow_link_paging_to_the_last_page(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults = Faults(page_size=40)
    client = client_for(host, state)
    names = [f"25.{i:03d}" for i in range(130)]
    for i, tag in enumerate(names):
        client.put_manifest(REPO, tag, manifest(i))

    tags = client.tags(REPO)

    assert tags == names
    assert sum(1 for r in state.requests if r.endswith("/tags/list")) >= 4  # 40 + 40 + 40 + 10


def test_tags_of_a_repository_that_does_not_exist_are_none(registry: tuple[str, State]) -> None:
    host, state = registry

    assert client_for(host, state).tags("ns/nothing") == []


# --- the token flow ---------------------------------------------------------------------------


def test_a_bearer_challenge_earns_a_token_with_our_credentials(registry: tuple[str, State]) -> None:
    host, state = registry
    client = client_for(host, state)

    client.put_manifest(REPO, "1.0", manifest(1))

    assert client.head_manifest(REPO, "1.0") == manifest(1).digest
    assert state.token_requests >= 1


def test_wrong_credentials_are_refused_and_never_printed(registry: tuple[str, State]) -> None:
    host, state = registry
    client = client_for(host, state, password="not-it-4f9a1c")

    with pytest.raises(RegistryAuthError) as info:
        client.ping()

    assert "refused our credentials (401)" in info.value.message
    assert "not-it-4f9a1c" not in info.value.message


def test_a_token_realm_that_is_not_https_gets_no_credentials(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults = Faults(realm="http://tokens.example.invalid/token")
    client = client_for(host, state)

    with pytest.raises(RegistryAuthError) as info:
        client.ping()

    assert "credentials go to an https realm only" in info.value.message
    assert state.token_requests == 0


# --- uploads ----------------------------------------------------------------------------------


def test_a_token_that_expires_during_a_chunked_upload_is_renewed_once(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    state.faults = Faults(expire_token_after_patches=2, expirations=1)
    client = client_for(host, state)
    path, digest = blob_file(tmp_path, 5000)

    client.upload_blob(REPO, digest, path, chunk_size=1000)

    assert state.blobs[digest] == path.read_bytes()
    assert state.token_requests == 2  # the first token, and its one renewal


def test_a_token_that_keeps_expiring_ends_the_upload_with_the_auth_exit_code(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    state.faults = Faults(expire_token_after_patches=1, expirations=10)
    client = client_for(host, state)
    path, digest = blob_file(tmp_path, 5000)

    with pytest.raises(RegistryAuthError) as info:
        client.upload_blob(REPO, digest, path, chunk_size=1000)

    assert info.value.exit_code == 8
    assert digest not in state.blobs


def test_an_upload_whose_connection_drops_restarts_from_a_fresh_session(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    state.faults = Faults(drop_patches=1)
    client = client_for(host, state)
    path, digest = blob_file(tmp_path, 3000)

    client.upload_blob(REPO, digest, path, chunk_size=1000)

    assert state.blobs[digest] == path.read_bytes()
    assert client.stats["retries"] == 1
    assert sum(1 for r in state.requests if r.startswith("POST")) == 2


def test_a_monolithic_upload_round_trips(registry: tuple[str, State], tmp_path: Path) -> None:
    host, state = registry
    client = client_for(host, state)
    path, digest = blob_file(tmp_path, 10_000)

    client.upload_blob(REPO, digest, path)

    assert client.blob_size(REPO, digest) == 10_000
    assert client.blob_bytes(REPO, digest, limit=1 << 20) == path.read_bytes()


# --- retries and digests ---------------------------------------------------------------------


def test_a_busy_registry_is_retried(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults = Faults(unavailable=2)
    client = client_for(host, state)

    client.ping()

    assert client.stats["retries"] == 2


def test_a_registry_that_stays_busy_fails_after_the_attempts_allowed(registry: tuple[str, State]) -> None:
    host, state = registry
    state.faults = Faults(unavailable=50)

    with pytest.raises(WireError) as info:
        client_for(host, state).ping()

    assert "answered 503" in info.value.message
    assert (info.value.status, info.value.temporary) == (503, True)  # a rerun later may help


def test_wire_errors_say_whether_trying_again_may_help(registry: tuple[str, State]) -> None:
    host, state = registry
    client = client_for(host, state)
    client.put_manifest(REPO, "1.0", manifest(1))
    state.faults = Faults(wrong_digest_header=True)

    with pytest.raises(WireError) as wrong:
        client.get_manifest(REPO, "1.0")
    with pytest.raises(WireError) as down:
        client_for("127.0.0.1:1", state).ping()

    assert wrong.value.temporary is False  # a definitive answer: the same again next time
    assert down.value.temporary is True  # nobody answered: a later rerun may find it up
    assert down.value.exit_code == 10  # down: "retry later", as StackError
    assert not isinstance(down.value, PublishError)  # the caller says what it means


def test_a_manifest_whose_claimed_digest_is_wrong_is_refused(registry: tuple[str, State]) -> None:
    host, state = registry
    client = client_for(host, state)
    client.put_manifest(REPO, "1.0", manifest(1))
    state.faults = Faults(wrong_digest_header=True)

    with pytest.raises(WireError) as info:
        client.get_manifest(REPO, "1.0")

    assert "claims sha256:000" in info.value.message


# --- manifests written while another writer links the same blobs ------------------------------


def image_with_blobs(client: RegistryClient, tmp_path: Path, *, upload: bool) -> Manifest:
    path, digest = blob_file(tmp_path, 1000)
    if upload:
        client.upload_blob(REPO, digest, path)
    media = "application/vnd.oci.image.manifest.v1+json"
    config = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest, "size": 1000}
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": 1000}
    body = json.dumps({"schemaVersion": 2, "mediaType": media, "config": config, "layers": [layer]}).encode()
    return Manifest(digest=sha256_digest(body), media_type=media, body=body)


def test_a_manifest_refused_for_a_blob_that_is_present_is_written_on_a_retry(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    # distribution rewrites a repository's blob link in place; a manifest PUT that reads it
    # while a concurrent publish links the same blob answers DIGEST_INVALID + MANIFEST_BLOB_UNKNOWN
    host, state = registry
    client = client_for(host, state)
    image = image_with_blobs(client, tmp_path, upload=True)
    state.faults = Faults(blob_unknown_on_put=2)

    client.put_manifest(REPO, image.digest, image)

    assert client.get_manifest(REPO, image.digest) == image
    assert client.stats["retries"] == 2


def test_a_manifest_naming_a_blob_that_is_really_missing_is_an_error_that_names_it(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    client = client_for(host, state)
    image = image_with_blobs(client, tmp_path, upload=False)
    state.faults = Faults(blob_unknown_on_put=50)

    with pytest.raises(WireError) as info:
        client.put_manifest(REPO, image.digest, image)

    assert f"does not hold {json.loads(image.body)['config']['digest']}" in info.value.message
    assert info.value.temporary is False
    assert sum(r.startswith("PUT /v2/ns/image/manifests/") for r in state.requests) == 1  # not retried


def test_a_manifest_refused_for_present_blobs_on_every_attempt_fails_with_the_registrys_answer(
    registry: tuple[str, State], tmp_path: Path
) -> None:
    host, state = registry
    client = client_for(host, state)
    image = image_with_blobs(client, tmp_path, upload=True)
    state.faults = Faults(blob_unknown_on_put=50)

    with pytest.raises(WireError) as info:
        client.put_manifest(REPO, image.digest, image)

    assert "MANIFEST_BLOB_UNKNOWN" in info.value.message
    assert sum(r.startswith("PUT /v2/ns/image/manifests/") for r in state.requests) == FAST.attempts
