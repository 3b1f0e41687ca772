"""The base image, pinned by digest: what its tag points at now, and getting it into the engine.

The lock records the digest the base tag pointed at when it was made; every build uses that
digest, never the tag, so a moved tag can neither change a build nor be reused unnoticed.
"""

from __future__ import annotations

from ..errors import (
    LockError,
    NotFoundError,
    RegistryAuthError,
    ReleaseError,
    StackError,
    TLSVerifyFailed,
    WireError,
)
from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from ..manifest.registries import Registries
from ..oci.channel import client_for
from ..oci.credentials import CredentialStore
from ..oci.model import ImageIndex
from ..oci.registry import Manifest
from .engine import Engine, LineSink
from .lock import Lock


def current_digest(spec: ImageSpec, registries: Registries, credentials: CredentialStore) -> str | None:
    """The digest the base's tag points at in its registry now (None: the tag is gone): of the
    index, for a platformed release; else of the image, linux/amd64's when the tag serves an
    index (a lock of linux/amd64 alone pins that image, as it always did)."""
    return tag_digest(spec, _served(spec, registries, credentials))


def tag_digest(spec: ImageSpec, served: Manifest | None) -> str | None:
    """What a lock of ``spec`` pins of the manifest its base tag serves (``current_digest``)."""
    if served is None or spec.platformed or not isinstance(served.view, ImageIndex):
        return served.digest if served is not None else None
    return platform_digests(spec, served, spec.platforms)[spec.platforms[0]]


def base_index(
    spec: ImageSpec, registries: Registries, credentials: CredentialStore
) -> tuple[str, dict[Platform, str]] | None:
    """The index the base's tag serves now and, for each platform ``spec`` is built for, the
    digest of that platform's image in it (None: the tag is gone). A LockError when the tag
    serves one image, or an index without one of the platforms: naming both."""
    served = _served(spec, registries, credentials)
    if served is None:
        return None
    return served.digest, platform_digests(spec, served, spec.platforms)


def platform_digests(
    spec: ImageSpec, served: Manifest, platforms: tuple[Platform, ...]
) -> dict[Platform, str]:
    """Each platform's image in the index ``served`` (the base's tag), by digest."""
    where = f"the base {spec.base.repository}:{spec.base.tag} ({served.digest[:19]})"
    if not isinstance(served.view, ImageIndex):
        msg = (f"{where} is one image, not an index of platforms: it cannot give {spec.ref} its "
               f"{', '.join(p.name for p in platforms)} images; build the base for each platform and "
               "push it as an index (ci/local-stack.sh does for the local stack)")  # fmt: skip
        raise LockError(msg)
    out: dict[Platform, str] = {}
    for p in platforms:
        entries = [d.digest for d in served.view.manifests if p.matches(d.platform)]
        if not entries:
            msg = f"{where} has no {p} image; {spec.ref} is built for {p} (platforms in {spec.manifest_path})"
            raise LockError(msg)
        out[p] = entries[0]
    return out


def _served(spec: ImageSpec, registries: Registries, credentials: CredentialStore) -> Manifest | None:
    hub = registries.endpoint(spec.base.registry)
    client = client_for(hub, credentials)
    try:
        return client.get_manifest(hub.repository(spec.base.repository), spec.base.tag)
    except (RegistryAuthError, TLSVerifyFailed):
        raise
    except WireError as exc:  # no answer at all: the registry, not the release, is the matter
        msg = f"the base image's registry does not answer: {exc.message.splitlines()[0]}"
        raise StackError(msg) from None


def pull_auth(spec: ImageSpec, registries: Registries, credentials: CredentialStore) -> dict[str, str] | None:
    """The engine's credentials for the base's registry (a family release's public endpoint
    may need them): the command's own (``credentials``, handed down: its login goes only to the
    release's hosts, the docker config's to theirs); None for an open registry."""
    creds = credentials.for_host(registries.endpoint(spec.base.registry).host)
    return creds.docker_auth() if creds else None


def pinned_ref(spec: ImageSpec, registries: Registries, lock: Lock) -> str:
    """``host/namespace/repository@sha256:…``: the base as every build names it (a lock always
    pins one: ``Lock.parse`` refuses a lock without it)."""
    hub = registries.endpoint(spec.base.registry)
    return f"{hub.prefix}/{spec.base.repository}@{lock.base_digest}"


# What the base interpreter has installed: every distribution, by name and version.
_DISTRIBUTIONS = """
import importlib.metadata as m, json
seen = {}
for d in m.distributions():
    name = d.metadata["Name"]
    if name and name.lower() not in seen:
        seen[name.lower()] = (name, d.version)
print(json.dumps(sorted(seen.values())))
"""


def provided(engine: Engine, ref: str, python: str) -> tuple[tuple[str, str], ...]:
    """The Python distributions the pinned base provides, asked of its own interpreter in a
    throwaway container with no network: facts of the lock."""
    import json

    out = engine.output(ref, [python, "-c", _DISTRIBUTIONS], purpose="lock")
    try:
        pairs = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        msg = f"the base {ref} did not list its Python distributions with {python}: {out[-300:]!r}"
        raise ReleaseError(msg) from None
    return tuple((str(n), str(v)) for n, v in pairs)


def ensure(
    engine: Engine,
    ref: str,
    on_line: LineSink,
    auth: dict[str, str] | None = None,
    release: str | None = None,
) -> int:
    """Pull the pinned base if the engine lacks it; return how many layers it has. ``release``:
    the release of ours the base is (a family's SDK), named in the message when it is missing."""
    info = engine.image(ref)
    if info is None:
        on_line(f"pulling base image {ref}")
        try:
            engine.pull(ref, auth)
        except ReleaseError as exc:
            why = exc.message.splitlines()[0]
            if release:
                msg = (
                    f"the base release {release} is not published at {ref}; publish it first: "
                    f"xpu-release release {release} (or release with --with-bases). The engine said: "
                    f"{why[:160]}"
                )
            else:
                msg = (
                    f"the pinned base {ref} cannot be pulled ({why}). If its tag moved and the "
                    "old digest is gone, re-lock to take the new base"
                )
            raise NotFoundError(msg) from None
    attrs = engine.inspect_raw(ref)
    return len((attrs.get("RootFS") or {}).get("Layers") or ())
