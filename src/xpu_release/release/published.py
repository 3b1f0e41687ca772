"""A release as its users see it: what the public endpoint serves at its version tag, and the
SBOM attached to that digest, read as any client finds it (the referrers API, else the
referrers tag schema: ``evidence/referrers.py``). Nothing local is trusted here: a scheduled CI
runner has no release records, and a record may say what an endpoint no longer serves.

Each answer that cannot be had is an error that names the endpoint and says what to do: an
endpoint that does not answer (exit 10; once it has not answered at all, it is not asked again
in this run), one that refuses our credentials (8), an SBOM missing, damaged or not CycloneDX
(7). The caller (``watch``) reports it for that release and goes on with the others.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import RegistryAuthError, ReleaseError, StackError, TLSVerifyFailed, VerifyFailed, WireError
from ..evidence.referrers import fetch_attachment, list_referrers
from ..evidence.scan import Package, packages_of
from ..manifest.platforms import Platform
from ..manifest.registries import Registries
from ..oci.credentials import CredentialStore
from ..oci.endpoint import Endpoint
from ..oci.model import ImageIndex
from ..oci.registry import RegistryClient, RetryPolicy


class Reader:
    """The read-only questions of one ``watch``: one client per endpoint, few retries."""

    def __init__(self, registries: Registries, credentials: CredentialStore,
                 retry: RetryPolicy | None = None) -> None:  # fmt: skip
        self.registries = registries
        self.credentials = credentials
        self.retry = retry or RetryPolicy(attempts=2, max_delay=1.0, timeout=30.0)
        self._clients: dict[str, RegistryClient] = {}
        self._silent: dict[str, str] = {}  # endpoint → what it said when it did not answer at all
        self._served: dict[tuple[str, str, str], str | None] = {}  # asked once per run: bases, lines

    def forget(self) -> None:
        """Ask every tag again (``watch --release``, after it published a patch)."""
        self._served.clear()

    def public(self) -> Endpoint:
        """Where users pull releases: the registries file's first public endpoint."""
        found = [e for e in self.registries.publish_endpoints() if e.role == "public"]
        if not found:
            from ..errors import ConfigError

            msg = f"{self.registries.source}: no public registry to read published releases from"
            raise ConfigError(msg)
        return found[0]

    def endpoint(self, alias: str) -> Endpoint:
        return self.registries.endpoint(alias)

    def _client(self, ep: Endpoint) -> RegistryClient:
        if ep.name not in self._clients:
            self._clients[ep.name] = RegistryClient(ep, self.credentials.for_host(ep.host), self.retry)
        return self._clients[ep.name]

    def _ask(self, ep: Endpoint, what: str, question: Any) -> Any:
        """``question(client)``, its failures as errors a user can act on."""
        if ep.name in self._silent:
            said = self._silent[ep.name]
            msg = f"{ep.name} ({ep.host}) does not answer: {said} (not asked again in this run)"
            raise StackError(msg)
        try:
            return question(self._client(ep))
        except (RegistryAuthError, TLSVerifyFailed):
            raise
        except WireError as exc:
            said = exc.message.splitlines()[0][:200]
            if exc.status is None and exc.temporary:
                self._silent[ep.name] = said
            if exc.temporary:
                msg = f"{ep.name} ({ep.host}) does not answer while reading {what}: {said}"
                raise StackError(msg) from None
            msg = f"{ep.name} ({ep.host}) did not give {what}: {said}"
            raise VerifyFailed(msg) from None

    def served(self, ep: Endpoint, image: str, tag: str, what: str = "") -> str | None:
        """The digest ``image:tag`` serves at ``ep`` (None: the tag is not there); asked once a
        run (240 releases on one base ask it once)."""
        key = (ep.name, image, tag)
        if key not in self._served:
            self._served[key] = self._ask(
                ep, what or f"{image}:{tag}", lambda c: c.head_manifest(ep.repository(image), tag)
            )
        return self._served[key]

    def base_digest(self, alias: str, repository: str, tag: str) -> str | None:
        """The digest a base image's tag serves now at the registry ``alias`` names."""
        return self.served(self.endpoint(alias), repository, tag, f"the base {repository}:{tag}")

    def base_image(self, alias: str, repository: str, tag: str, platform: Platform) -> str | None:
        """The digest of ``platform``'s image a base tag serves now: the tag's own, or its entry
        in the index the tag serves (None: neither)."""
        ep = self.endpoint(alias)
        served = self._ask(ep, f"the base {repository}:{tag}",
                           lambda c: c.get_manifest(ep.repository(repository), tag))  # fmt: skip
        if served is None or not isinstance(served.view, ImageIndex):
            return served.digest if served is not None else None
        return next((d.digest for d in served.view.manifests if platform.matches(d.platform)), None)

    def images(
        self, ep: Endpoint, image: str, digest: str, platforms: tuple[Platform, ...]
    ) -> tuple[str, ...]:
        """The digest of each ``platforms``' image the index ``image@digest`` names (a platformed
        release: each image carries its own SBOM); VerifyFailed naming a platform it lacks."""
        served = self._ask(ep, f"the index {image}@{digest[:19]}",
                           lambda c: c.get_manifest(ep.repository(image), digest))  # fmt: skip
        where = f"{ep.name}: {ep.prefix}/{image}@{digest[:19]}…"
        if served is None or not isinstance(served.view, ImageIndex):
            msg = f"{where} is not an image index; the release is built for {', '.join(map(str, platforms))}"
            raise VerifyFailed(msg)
        out = []
        for platform in platforms:
            entry = next((d for d in served.view.manifests if platform.matches(d.platform)), None)
            if entry is None:
                msg = f"{where}: the index names no {platform} image; rerun its release"
                raise VerifyFailed(msg)
            out.append(entry.digest)
        return tuple(out)

    def sbom(self, ep: Endpoint, image: str, digest: str) -> bytes:
        """The CycloneDX SBOM attached to ``digest``, its bytes checked against their digest."""
        repo = ep.repository(image)
        where = f"{ep.name}: {ep.prefix}/{image}@{digest[:19]}…"

        def read(client: RegistryClient) -> bytes:
            listed = list_referrers(client, repo, digest).ours("sbom")
            if not listed:
                msg = (
                    f"{where} has no SBOM attached (its referrers list none); attach it again: "
                    "rerun its release (it finishes what an endpoint lacks)"
                )
                raise VerifyFailed(msg)
            return fetch_attachment(client, repo, listed[0], "sbom").payload

        try:
            payload: bytes = self._ask(ep, f"the SBOM of {image}@{digest[:19]}", read)
        except ReleaseError as exc:
            if isinstance(exc, StackError | RegistryAuthError | TLSVerifyFailed | VerifyFailed):
                raise
            msg = f"{where}: its SBOM cannot be read ({exc.message.splitlines()[0][:200]})"
            raise VerifyFailed(msg) from None
        return payload


def check_sbom(payload: bytes, where: str) -> tuple[Package, ...]:
    """The packages a published SBOM names, refusing what is not a CycloneDX SBOM (damaged,
    another format) with what is wrong, never a guess: the scan reads only what passed here."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict) or data.get("bomFormat") != "CycloneDX":
        msg = f"{where}: the attached SBOM is not a CycloneDX JSON document; it cannot be scanned"
        raise VerifyFailed(msg)
    components = data.get("components", [])
    bad = _first_bad_component(components)
    if bad:
        msg = f"{where}: the attached SBOM is damaged ({bad}); it cannot be scanned"
        raise VerifyFailed(msg)
    try:
        return packages_of(payload)
    except ValueError as exc:  # a package URL that does not parse
        msg = f"{where}: the attached SBOM is damaged ({str(exc)[:120]}); it cannot be scanned"
        raise VerifyFailed(msg) from None


def _first_bad_component(components: Any) -> str | None:
    if not isinstance(components, list):
        return "components is not a list"
    for i, c in enumerate(components):
        if not isinstance(c, dict) or not isinstance(c.get("purl", ""), str):
            return f"components[{i}] is not a component with a package URL"
        props = c.get("properties", [])
        if not isinstance(props, list) or not all(isinstance(p, dict) for p in props):
            return f"components[{i}].properties is not a list of properties"
    return None


def merged_sbom(payloads: list[bytes]) -> bytes:
    """One CycloneDX SBOM of every component the checked SBOMs name (each platform's image of a
    platformed release: their packages differ), each package once, in the order met."""
    if len(payloads) == 1:
        return payloads[0]
    components: dict[str, Any] = {}
    for payload in payloads:
        for c in json.loads(payload).get("components", []):
            components.setdefault(c.get("purl") or json.dumps(c, sort_keys=True), c)
    first = json.loads(payloads[0])
    return json.dumps({**first, "components": list(components.values())}).encode()
