"""The base image, pinned by digest: what its tag points at now, and getting it into the engine.

The lock records the digest the base tag pointed at when it was made; every build uses that
digest, never the tag, so a moved tag can neither change a build nor be reused unnoticed.
"""

from __future__ import annotations

from .credentials import CredentialStore
from .endpoints import Registries
from .engine import Engine, LineSink
from .errors import NotFoundError, ReleaseError
from .lock import Lock
from .manifest import ImageSpec
from .registry import RegistryClient


def current_digest(spec: ImageSpec, registries: Registries, credentials: CredentialStore) -> str | None:
    """The digest the base's tag points at in its registry now (None: the tag is gone)."""
    hub = registries.endpoint(spec.base.registry)
    client = RegistryClient(hub, credentials.for_host(hub.host))
    return client.head_manifest(hub.repository(spec.base.repository), spec.base.tag)


def pinned_ref(spec: ImageSpec, registries: Registries, lock: Lock) -> str:
    """``host/namespace/repository@sha256:…``: the base as every build names it (a lock always
    pins one: ``Lock.parse`` refuses a lock without it)."""
    hub = registries.endpoint(spec.base.registry)
    return f"{hub.prefix}/{spec.base.repository}@{lock.base_digest}"


def ensure(engine: Engine, ref: str, on_line: LineSink) -> int:
    """Pull the pinned base if the engine lacks it; return how many layers it has."""
    info = engine.image(ref)
    if info is None:
        on_line(f"pulling base image {ref}")
        try:
            engine.pull(ref)
        except ReleaseError as exc:
            msg = (
                f"the pinned base {ref} cannot be pulled ({exc.message.splitlines()[0]}). If its "
                "tag moved and the old digest is gone, re-lock to take the new base"
            )
            raise NotFoundError(msg) from None
    attrs = engine.inspect_raw(ref)
    return len((attrs.get("RootFS") or {}).get("Layers") or ())
