"""The endpoints of one release, each with one registry client for the whole run: build
avoidance, publish (its tag rules, its early copies) and verification share it, so each endpoint
authenticates once per run and scope, and a run's report counts every retry. A command builds
one pool and hands it down; the read-only questions of ``serving`` and ``verify`` ask through it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import NotFoundError, RegistryAuthError, ReleaseError, VerifyFailed, endpoints_failed, is_down
from ...manifest import ImageSpec
from ...manifest.registries import Registries
from ...oci.channel import STANDARD, client_for
from ...oci.credentials import CredentialStore
from ...oci.endpoint import Endpoint
from ...oci.registry import Manifest, RegistryClient, RetryPolicy
from ...progress import Meter, Sink, meter
from .plan import Plan, make_plan


class EndpointPool:
    """The endpoints of one release, each with one client for the whole run."""

    def __init__(
        self,
        spec: ImageSpec,
        registries: Registries,
        credentials: CredentialStore,
        retry: RetryPolicy | None = None,
        on_line: Sink = lambda _: None,
    ) -> None:
        self.plan: Plan = make_plan(spec, registries)
        self.registries = registries
        self.credentials = credentials
        self.retry = retry or STANDARD
        self.on_line = on_line
        self._clients: dict[str, RegistryClient] = {}
        self._made: list[RegistryClient] = []  # every client, fresh ones too: their bytes sent

    @property
    def spec(self) -> ImageSpec:
        return self.plan.spec

    def client(self, ep: Endpoint, *, fresh: bool = False) -> RegistryClient:
        """The endpoint's client; a ``fresh`` one for work shared across threads, which starts
        with the tokens the endpoint's client has earned (no second authentication)."""
        if fresh or ep.name not in self._clients:
            made = client_for(ep, self.credentials, self.retry, self.on_line)
            shared = self._clients.get(ep.name)
            if shared is not None:
                made.t.adopt(shared.t)
            self._made.append(made)
            if fresh:
                return made
            self._clients[ep.name] = made
        return self._clients[ep.name]

    def repo(self, ep: Endpoint) -> str:
        return ep.repository(self.spec.image)

    @contextlib.contextmanager
    def metering(self, every: float = 0.25) -> Iterator[None]:
        """While the block runs, the bytes sent to each endpoint go to the display as meters
        (read from the clients' counters by a thread of its own, ``every`` seconds)."""
        stop = threading.Event()

        def tick() -> None:
            shown: dict[str, int] = {}
            while True:
                sent: dict[str, int] = {}
                for c in list(self._made):
                    sent[c.endpoint.name] = sent.get(c.endpoint.name, 0) + c.stats["sent_bytes"]
                for name, n in sent.items():
                    if n != shown.get(name, 0):
                        meter(Meter(f"sending to {name}", n))
                        shown[name] = n
                if stop.wait(every):
                    return

        ticker = threading.Thread(target=tick, name="send-meters", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()


def version_served(pool: EndpointPool) -> list[tuple[Endpoint, Manifest]]:
    """What the endpoints serve at the release's version tag, asked all at once: each endpoint
    that serves it, in the plan's order. One that refuses our credentials is exit 8; when not one
    answers, exit 10 (7 if one answered against the protocol); one that does not answer while
    another does is left out (it says nothing)."""
    targets = pool.plan.targets

    def ask(ep: Endpoint) -> Manifest | ReleaseError | None:
        try:
            return pool.client(ep).get_manifest(pool.repo(ep), pool.spec.version)
        except RegistryAuthError:
            raise
        except ReleaseError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(32, len(targets))) as ex:
        answers = list(ex.map(ask, [t.endpoint for t in targets]))
    errors = [
        (t.endpoint.name, a) for t, a in zip(targets, answers, strict=True) if isinstance(a, ReleaseError)
    ]
    if errors and len(errors) == len(targets):
        names = ", ".join(name for name, _ in errors)
        said = next((e for _, e in errors if not is_down(e)), errors[0][1]).message
        msg = f"no endpoint gave the release's manifest ({names}): {said}"
        raise endpoints_failed(msg, [e for _, e in errors], len(targets))
    return [(t.endpoint, a) for t, a in zip(targets, answers, strict=True) if isinstance(a, Manifest)]


@dataclass(frozen=True)
class ServedRelease:
    """Which image is a release: its ``digest``, and where it was read (the first endpoint that
    serves it, with its manifest; None when the record named it)."""

    digest: str
    source: tuple[Endpoint, Manifest] | None = None


def served_release(pool: EndpointPool, recorded: str | None = None, *, nothing: str) -> ServedRelease:
    """Which image is the release: the one digest every endpoint that answers serves at the
    version tag, with the first endpoint that serves it and its manifest. Endpoints that disagree
    are exit 7 (a release half done: finish it first), and so is a record (``recorded``) naming
    another image than the endpoints serve. With a record, a release whose version tag is served
    nowhere is the record's digest (what the endpoints hold by digest, if anything); without one,
    it is exit 11 saying ``nothing``."""
    served = version_served(pool)
    digests = {image.digest for _, image in served}
    if len(digests) > 1:
        said = ", ".join(f"{ep.name} {image.digest}" for ep, image in served)
        msg = f"the endpoints serve different images at {pool.spec.ref} ({said}); finish its release first"
        raise VerifyFailed(msg)
    if recorded and digests and recorded not in digests:
        msg = (f"{pool.spec.ref}: its release record names {recorded}, but the endpoints serve "
               f"{served[0][1].digest} at its version tag: nothing was changed (pass --record naming the "
               "record of the release they serve)")  # fmt: skip
        raise VerifyFailed(msg)
    if served:
        return ServedRelease(served[0][1].digest, served[0])
    if recorded:
        return ServedRelease(recorded)
    raise NotFoundError(nothing)
