"""Where our login goes (docs/using/registries.md): to the endpoint's own origin, and to a token
realm only on the registry's host or a host the registries file names under ``token_hosts``.
Every URL a registry names (a redirect, an upload's ``Location``, a mount's, a chunk's, a token
realm) on another origin is sent no ``Authorization``, basic or bearer, whichever request
follows it; the answers still work where they should (a blob served by a storage host)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from xpu_release.errors import RegistryAuthError
from xpu_release.oci.credentials import Credentials
from xpu_release.oci.endpoint import Endpoint
from xpu_release.oci.registry import RegistryClient, RetryPolicy

from ..adversary.evil_registry import Handler, evil_registry
from ..fake_registry import digest_of

USER, PASSWORD = "ci", "a-password-of-ours"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
TOKEN = "token-issued-by-the-realm"
MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": digest_of(b"{}"), "size": 2}, "layers": []}).encode()  # fmt: skip


@dataclass
class Seen:
    """What one server was sent: (method, path, Authorization) per request."""

    requests: list[tuple[str, str, str]] = field(default_factory=list)

    def record(self, h: Handler) -> str:
        got = h.headers.get("Authorization") or ""
        self.requests.append((h.command, h.path, got))
        return got

    @property
    def authorizations(self) -> list[str]:
        return [a for _, _, a in self.requests if a]


def client(host: str, *, login: bool = True, token_hosts: tuple[str, ...] = ()) -> RegistryClient:
    ep = Endpoint(registry="public", role="public", region=None, host=host, namespace="ns", insecure=True,
                  token_hosts=token_hosts)  # fmt: skip
    creds = Credentials(username=USER, password=PASSWORD) if login else None
    return RegistryClient(ep, creds, RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0, timeout=5.0))


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, Seen]]:
    """Another origin (127.0.0.2): storage that serves and accepts whatever it is sent."""
    seen = Seen()

    def answer(h: Handler) -> None:
        seen.record(h)
        if h.command == "GET":
            h.send(200, MANIFEST, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        elif h.command == "PATCH":
            h.send(202, headers={"Location": f"http://{h.headers['Host']}/upload/1?part=2"})
        else:
            h.send(201 if h.command == "PUT" else 204)

    with evil_registry(answer, "127.0.0.2") as (host, _):
        yield host, seen


def registry(scheme: str, other: str, seen: Seen) -> Callable[[Handler], None]:
    """A registry asking for a login (``scheme``: basic, or bearer with its own realm), which
    names ``other`` for everything it does not serve itself."""

    def answer(h: Handler) -> None:
        got = seen.record(h)
        if h.path.startswith("/token"):
            ok = got == BASIC
            h.send(200 if ok else 401, json.dumps({"token": TOKEN}).encode() if ok else b"")
        elif got not in (BASIC, f"Bearer {TOKEN}"):
            bearer = f'Bearer realm="http://{h.headers["Host"]}/token"'
            h.send(401, headers={"WWW-Authenticate": bearer if scheme == "bearer" else 'Basic realm="r"'})
        elif h.command == "GET" and "/manifests/" in h.path:
            h.send(302, headers={"Location": f"http://{other}/storage/manifest"})
        elif h.command == "POST" and "mount=" in h.path:
            h.send(202, headers={"Location": f"http://{other}/upload/mounted"})
        elif h.command == "POST":
            h.send(202, headers={"Location": f"http://{other}/upload/1"})
        else:
            h.send(404)

    return answer


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_no_url_a_registry_names_on_another_origin_gets_our_login(
    scheme: str, elsewhere: tuple[str, Seen], tmp_path: Path
) -> None:
    other, at_other = elsewhere
    at_registry = Seen()
    blob = tmp_path / "blob"
    blob.write_bytes(b"layer bytes" * 100)
    with evil_registry(registry(scheme, other, at_registry)) as (host, _):
        c = client(host)

        fetched = c.get_manifest("ns/x", "1.0")  # redirected to the storage host
        c.upload_blob("ns/x", digest_of(blob.read_bytes()), blob)  # POST here, PUT there
        c.upload_blob("ns/x", digest_of(blob.read_bytes()), blob, chunk_size=400)  # PATCHes there
        mounted = c.mount_blob("ns/x", digest_of(b"x"), "ns/y")  # 202: its upload cancelled there

    assert fetched is not None
    assert fetched.body == MANIFEST
    assert mounted is False
    methods = {m for m, _, _ in at_other.requests}
    assert methods == {"GET", "PUT", "PATCH", "DELETE"}, at_other.requests
    assert at_other.authorizations == [], at_other.requests  # the storage host got nothing of ours
    expected = BASIC if scheme == "basic" else f"Bearer {TOKEN}"
    assert expected in at_registry.authorizations  # and the registry itself did


def test_a_token_realm_on_another_host_is_refused_before_it_is_sent_our_login(
    elsewhere: tuple[str, Seen],
) -> None:
    other, at_other = elsewhere

    def asks_elsewhere(h: Handler) -> None:
        h.send(401, headers={"WWW-Authenticate": f'Bearer realm="http://{other}/token",service="s"'})

    with evil_registry(asks_elsewhere) as (host, _), pytest.raises(RegistryAuthError) as refused:
        client(host).ping()

    assert at_other.requests == []
    assert "token_hosts" in refused.value.message
    assert "127.0.0.2" in refused.value.message
    assert PASSWORD not in refused.value.message


def _realm_elsewhere(other: str, seen: Seen) -> Callable[[Handler], None]:
    def answer(h: Handler) -> None:
        got = seen.record(h)
        if got == f"Bearer {TOKEN}":
            h.send(200)
        else:
            h.send(401, headers={"WWW-Authenticate": f'Bearer realm="http://{other}/token",service="s"'})

    return answer


@pytest.mark.parametrize("login", [True, False], ids=["named under token_hosts", "anonymous"])
def test_a_token_realm_named_under_token_hosts_gets_the_login_and_an_anonymous_one_nothing(
    login: bool,
) -> None:
    at_realm, at_registry = Seen(), Seen()

    def realm(h: Handler) -> None:
        at_realm.record(h)
        h.send(200, json.dumps({"token": TOKEN}).encode())

    with (
        evil_registry(realm, "127.0.0.2") as (other, _),
        evil_registry(_realm_elsewhere(other, at_registry)) as (host, _),
    ):
        client(host, login=login, token_hosts=("127.0.0.2",)).ping()

    assert at_realm.authorizations == ([BASIC] if login else [])
    assert at_registry.authorizations == [f"Bearer {TOKEN}"]  # the token, to the registry only
