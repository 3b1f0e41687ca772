"""Preflight: what a real release needs from the world, checked before it starts.

``release --dry-run`` runs these after validate, render and lock, and fails when the real run
would fail, with the exit code the real run would have; ``doctor`` runs them for every image.
Each check reads only: no pull, no push, no build, nothing written to a registry or the engine.

- the Docker engine answers;
- the base image's tag still points at the digest the lock pins (the build uses the digest);
- every file the build fetches (locked wheels, artifacts) is in the cache or its URL answers,
  and an artifact has a known sha256;
- every publish endpoint answers and accepts our credentials for the release's repository.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlparse

from ...errors import (
    BuildFailed,
    LockError,
    PreflightFailed,
    RegistryAuthError,
    ReleaseError,
    StackError,
    TLSVerifyFailed,
    WireError,
)
from ...image.baseimage import tag_digest
from ...image.engine import Engine
from ...image.lock import Lock, Locks
from ...manifest import ImageSpec
from ...manifest.registries import Registries
from ...oci.channel import QUICK, client_for
from ...oci.credentials import CredentialStore
from ...oci.endpoint import Endpoint
from ...secrets import redact
from ...settings import cache_dir, current

# One quick try per check: a preflight reports, the real run retries.


@dataclass(frozen=True, kw_only=True)
class Check:
    what: str  # "engine", "base image", "endpoint public", "artifact accl-p", …
    ok: bool
    detail: str
    exit_code: int = 0  # what the real run would exit with when this fails

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.what}: {self.detail}"


def _run(what: str, probe: Callable[[], str]) -> Check:
    try:
        return Check(what=what, ok=True, detail=probe())
    except ReleaseError as exc:
        return Check(what=what, ok=False, detail=exc.message.splitlines()[0], exit_code=exc.exit_code)


def engine_check(connect: Callable[[], Engine] = Engine.connect) -> Check:
    def probe() -> str:
        connect()
        return "answers"

    return _run("engine", probe)


def base_check(
    spec: ImageSpec, lock: Lock | Locks, registries: Registries, credentials: CredentialStore
) -> Check:
    """The build pulls the base by the digest the lock pins (each platform's image, for a
    platformed lock): that digest must still be served. A tag that has moved since is
    reported, not failed: the release builds from the pin."""
    pins = [one.base_digest for _, one in lock.by_platform] if isinstance(lock, Locks) else [lock.base_digest]

    def probe() -> str:
        hub = registries.endpoint(spec.base.registry)
        repo = hub.repository(spec.base.repository)
        client = client_for(hub, credentials, QUICK)
        try:
            gone = [d for d in pins if client.head_manifest(repo, d) is None]
            now = tag_digest(spec, client.get_manifest(repo, spec.base.tag))
        except RegistryAuthError:
            raise
        except WireError as exc:
            raise StackError(redact(exc.message)) from None
        if gone:
            msg = (
                f"{hub.host}/{repo}@{gone[0]} is gone, and the build uses it: "
                f"run `xpu-release lock {spec.ref}` to pin what {spec.base.tag} is now"
            )
            raise LockError(msg)
        where = f"{hub.host}/{repo}:{spec.base.tag}"
        if now != lock.base_digest:
            return (
                f"the lock pins {lock.base_digest[:19]}…, which is served; {where} has moved to "
                f"{now or 'nothing'} since (`xpu-release lock {spec.ref}` takes it)"
            )
        return f"{where} is still {lock.base_digest[:19]}…"

    return _run("base image", probe)


def _reachable(url: str, token: str | None) -> None:
    """The URL answers a HEAD, or else a GET of its first byte (servers that take no HEAD answer
    501 or 405, and an object store's URL signed for GET alone 403); for a file:// URL, the file
    exists. BuildFailed otherwise, with what the GET was answered."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        from pathlib import Path
        from urllib.parse import unquote

        if not Path(unquote(parsed.path)).is_file():
            msg = f"{url}: no such file"
            raise BuildFailed(msg)
        return
    import requests

    from ...oci.connection import outside_session

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with outside_session() as session:
            resp = session.head(url, headers=headers, timeout=QUICK.timeout, allow_redirects=True)
            if resp.status_code >= 400:  # HEAD refused (501, 405; 403 from a URL signed for GET): GET a byte
                one_byte = {**headers, "Range": "bytes=0-0"}
                with session.get(url, headers=one_byte, timeout=QUICK.timeout, stream=True) as resp:
                    pass  # the status is all we read; closing drops the rest of an unranged answer
    except requests.RequestException as exc:
        msg = f"{parsed.netloc or url} does not answer ({type(exc).__name__})"
        raise BuildFailed(msg) from None
    if resp.status_code in (401, 403):
        msg = f"{url} refused us ({resp.status_code}); set XPU_RELEASE_ARTIFACT_TOKEN"
        raise BuildFailed(msg)
    if resp.status_code >= 400:
        msg = f"{url} answered {resp.status_code}"
        raise BuildFailed(msg)


def _cached(sha256: str, filename: str) -> bool:
    return (cache_dir() / "blobs" / sha256 / filename).is_file()


def fetch_checks(spec: ImageSpec, lock: Lock) -> list[Check]:
    """The files the build fetches on the host: cached, or their URL answers."""
    return [wheels_check(lock), *artifact_checks(spec)]


def wheels_check(lock: Lock) -> Check:
    wheels = [p for layer in lock.layers for p in layer.packages]
    missing = [p for p in wheels if not _cached(p.sha256, p.filename)]

    def wheels_probe() -> str:
        if not missing:
            return f"all {len(wheels)} locked wheels are in the cache"
        # One URL per host stands for the others: a preflight must stay quick.
        hosts: dict[str, str] = {}
        for p in missing:
            hosts.setdefault(urlparse(p.url).netloc, p.url)
        for url in hosts.values():
            _reachable(url, None)
        return f"{len(wheels) - len(missing)} cached, {len(missing)} to fetch from {', '.join(sorted(hosts))}"

    return _run("wheels", wheels_probe)


def artifact_checks(spec: ImageSpec) -> list[Check]:
    checks = []
    token = current().artifact_token  # XPU_RELEASE_ARTIFACT_TOKEN, as the settings read it
    for c in spec.of_kind("artifact"):

        def artifact_probe(c: object = c) -> str:
            from ...manifest.model import Component

            assert isinstance(c, Component)
            assert c.url is not None
            if c.sha256 is None:
                msg = f"{c.id} has no sha256 in {spec.manifest_path}; build refuses an unchecked artifact"
                raise BuildFailed(msg)
            if _cached(c.sha256, f"{c.id}.{c.format}"):
                return f"{c.version} is in the cache"
            _reachable(c.url, token)
            return f"{c.version}: {c.url} answers"

        checks.append(_run(f"artifact {c.id}", artifact_probe))
    return checks


def endpoint_check(spec: ImageSpec, ep: Endpoint, credentials: CredentialStore) -> Check:
    def probe() -> str:
        client = client_for(ep, credentials, QUICK)
        repo = ep.repository(spec.image)
        try:
            client.ping()
            # The pull scope of the release's repository: a registry that checks credentials
            # per repository says here whether ours are good (a push is refused the same way).
            client.head_manifest(repo, spec.version)
        except (RegistryAuthError, TLSVerifyFailed):
            raise  # the real run's publish stops with the same code (8, 7)
        except WireError as exc:
            raise StackError(redact(exc.message)) from None
        creds = credentials.for_host(ep.host)
        who = f"as {creds.username}" if creds else "anonymously"
        return f"{ep.host}/{repo} answers {who}"

    return _run(f"endpoint {ep.name}", probe)


def preflight(
    spec: ImageSpec,
    lock: Lock,
    registries: Registries,
    credentials: CredentialStore,
    *,
    connect: Callable[[], Engine] = Engine.connect,
) -> tuple[Check, ...]:
    return (
        engine_check(connect),
        base_check(spec, lock, registries, credentials),
        *fetch_checks(spec, lock),
        *(endpoint_check(spec, ep, credentials) for ep in registries.publish_endpoints()),
    )


def verdict(checks: Iterable[Check], *, context: str = "the real run would stop here") -> ReleaseError | None:
    """The error the real run would stop with (the first failing check's kind), listing every
    failure; None if every check passed."""
    failed = [c for c in checks if not c.ok]
    if not failed:
        return None
    listing = "\n".join(f"  {c.what}: {c.detail}" for c in failed)
    many = "s" if len(failed) != 1 else ""
    msg = f"preflight: {len(failed)} check{many} failed; {context}:\n{listing}"
    return PreflightFailed(msg, failed[0].exit_code or 1)
