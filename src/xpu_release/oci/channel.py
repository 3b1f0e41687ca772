"""The channel: the one place a registry client is made for an endpoint (go-containerregistry's
``makeFetcher``). It hands the client the credentials of the endpoint's own host alone, so a
secret goes only to the host it belongs to, and one of the named policies:

- ``STANDARD``: a release's own work (publish, the release's own verify, the base's manifest
  for a lock): retried with capped backoff, ``Retry-After`` honoured, 401/403/404 never retried;
- ``QUICK``: a read-only check that must answer at once (``release --dry-run``'s preflight,
  ``doctor``): one attempt, 10 s;
- ``COPY``: a registry the user names on the command line (``mirror``): three attempts;
- ``ASKING``: a command that only asks (``status``, the catalog) gives up sooner than one that
  publishes: a region that is down is a row of its answer, not a wait;
- ``VERIFYING``: what ``verify`` and ``promote``'s staging side read: three attempts;
- ``WATCHING``: what ``watch`` reads of every published release: two attempts, short waits.

Over the policies, the command's one deadline for answers (``deadline``): the CLI opens it for
the command's run (``deadline.command``), and every client made meanwhile shares it.
"""

from __future__ import annotations

from ..progress import Sink
from . import deadline
from .credentials import CredentialStore
from .endpoint import Endpoint
from .registry import RegistryClient
from .transport import RetryPolicy

STANDARD = RetryPolicy()
QUICK = RetryPolicy(attempts=1, timeout=10.0)
COPY = RetryPolicy(attempts=3)
ASKING = RetryPolicy(attempts=2)
VERIFYING = RetryPolicy(attempts=3)
WATCHING = RetryPolicy(attempts=2, max_delay=1.0, timeout=30.0)


def client_for(
    ep: Endpoint, credentials: CredentialStore, policy: RetryPolicy = STANDARD, on_retry: Sink | None = None
) -> RegistryClient:
    """A client of ``ep`` with the credentials ``credentials`` holds for its host."""
    return RegistryClient(ep, credentials.for_host(ep.host), policy, on_retry, deadline.current())
