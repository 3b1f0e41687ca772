"""The endpoints of one release, each with one registry client for the whole run: publish, its
tag rules and its early copies share it (so a run's report counts every retry), and the
read-only questions of ``serving`` ask through it."""

from __future__ import annotations

from ..manifest import ImageSpec
from ..manifest.registries import Registries
from ..oci.credentials import CredentialStore
from ..oci.endpoint import Endpoint
from ..oci.registry import RegistryClient, RetryPolicy
from ..progress import Sink
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
        self.spec = spec
        self.plan: Plan = make_plan(spec, registries)
        self.credentials = credentials
        self.retry = retry or RetryPolicy()
        self.on_line = on_line
        self._clients: dict[str, RegistryClient] = {}

    def client(self, ep: Endpoint, *, fresh: bool = False) -> RegistryClient:
        """The endpoint's client; a ``fresh`` one for work shared across threads."""
        if fresh or ep.name not in self._clients:
            made = RegistryClient(ep, self.credentials.for_host(ep.host), self.retry, self.on_line)
            if fresh:
                return made
            self._clients[ep.name] = made
        return self._clients[ep.name]

    def repo(self, ep: Endpoint) -> str:
        return ep.repository(self.spec.image)
