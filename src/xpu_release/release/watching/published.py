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

from dataclasses import dataclass
from typing import Any

from ...errors import (
    RegistryAuthError,
    ReleaseError,
    StackError,
    TLSVerifyFailed,
    VerifyFailed,
    WireError,
    is_down,
)
from ...evidence.matching import pypi_name
from ...evidence.referrers import fetch_attachment, list_referrers
from ...evidence.scan import Package, components_of, packages_in
from ...evidence.vex import Purl
from ...guard.limits import MAX_SBOMS
from ...guard.reading import parse_json
from ...guard.shown import shown
from ...manifest.platforms import Platform, platformed
from ...manifest.registries import Registries
from ...oci.channel import WATCHING, client_for
from ...oci.credentials import CredentialStore
from ...oci.endpoint import Endpoint
from ...oci.model import ImageIndex
from ...oci.registry import RegistryClient, RetryPolicy
from ..model.withdrawn import withdrawals


@dataclass(frozen=True)
class ServedSboms:
    """The SBOMs a published release carries: ``images``, the digests they are attached to (the
    release's own; of an index, each declared platform's image), and every SBOM ``payloads``."""

    images: tuple[str, ...]
    payloads: tuple[bytes, ...]

    @property
    def size(self) -> int:
        return sum(map(len, self.payloads))


class Reader:
    """The read-only questions of one ``watch``: one client per endpoint, few retries."""

    def __init__(self, registries: Registries, credentials: CredentialStore,
                 retry: RetryPolicy | None = None) -> None:  # fmt: skip
        self.registries = registries
        self.credentials = credentials
        self.retry = retry or WATCHING
        self._clients: dict[str, RegistryClient] = {}
        self._silent: dict[str, str] = {}  # endpoint → what it said when it did not answer at all
        self._served: dict[tuple[str, str, str], str | None] = {}  # asked once per run: bases, lines
        self._tags: dict[tuple[str, str], tuple[str, ...]] = {}  # an image's tags, asked once per run

    def forget(self) -> None:
        """Ask every tag again (``watch --release``, after it published a patch)."""
        self._served.clear()
        self._tags.clear()

    def public(self) -> Endpoint:
        """Where users pull releases: the registries file's first public endpoint."""
        found = [e for e in self.registries.publish_endpoints() if e.role == "public"]
        if not found:
            from ...errors import ConfigError

            msg = f"{self.registries.source}: no public registry to read published releases from"
            raise ConfigError(msg)
        return found[0]

    def endpoint(self, alias: str) -> Endpoint:
        return self.registries.endpoint(alias)

    def _client(self, ep: Endpoint) -> RegistryClient:
        if ep.name not in self._clients:
            self._clients[ep.name] = client_for(ep, self.credentials, self.retry)
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
            said = exc.message.splitlines()[0]  # ours, its outside parts already bounded: whole
            if is_down(exc):
                self._silent[ep.name] = said
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

    def tags(self, ep: Endpoint, image: str) -> tuple[str, ...]:
        """Every tag ``image`` has at ``ep``, asked once a run: the patches a scheduled job
        published whose manifests are not in this checkout yet are found here."""
        key = (ep.name, image)
        if key not in self._tags:
            listed = self._ask(ep, f"the tags of {image}", lambda c: c.tags(ep.repository(image)))
            self._tags[key] = tuple(listed)
        return self._tags[key]

    def withdrawn(self, ep: Endpoint, image: str, digest: str) -> bool:
        """Whether a withdrawal of ``digest`` is in force at ``ep`` (failing closed: a notice that
        cannot be read is an error, not "no")."""
        repo = ep.repository(image)
        return bool(self._ask(ep, f"the notices of {image}@{digest[:19]}",
                              lambda c: withdrawals(c, repo, digest)))  # fmt: skip

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
        entry = platform.entry(served.view.manifests)
        return entry.digest if entry is not None else None

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
            entry = platform.entry(served.view.manifests)
            if entry is None:
                msg = f"{where}: the index names no {platform} image; rerun its release"
                raise VerifyFailed(msg)
            out.append(entry.digest)
        return tuple(out)

    def release_sboms(
        self, ep: Endpoint, image: str, digest: str, platforms: tuple[Platform, ...]
    ) -> ServedSboms:
        """Every SBOM of the release served at ``image@digest``: of a platformed release (an
        index), each declared platform's image's own (their packages differ), else the image's."""
        images = self.images(ep, image, digest, platforms) if platformed(platforms) else (digest,)
        return ServedSboms(images=images, payloads=tuple(p for d in images for p in self.sboms(ep, image, d)))

    def sboms(self, ep: Endpoint, image: str, digest: str) -> tuple[bytes, ...]:
        """Every CycloneDX SBOM of ours attached to ``digest`` (one, unless a rerun or a hand
        attached another), each checked against its digest, the same bytes once. Several are
        scanned as one, whatever order the registry lists them in (the referrers API and the
        tag schema list them in opposite orders); more than ``MAX_SBOMS`` is refused."""
        repo = ep.repository(image)
        where = f"{ep.name}: {ep.prefix}/{image}@{digest[:19]}…"

        def read(client: RegistryClient) -> tuple[bytes, ...]:
            listed = list({d.digest: d for d in list_referrers(client, repo, digest).ours("sbom")}.values())
            if not listed:
                msg = (
                    f"{where} has no SBOM attached (its referrers list none); attach it again: "
                    "rerun its release (it finishes what an endpoint lacks)"
                )
                raise VerifyFailed(msg)
            if len(listed) > MAX_SBOMS:
                msg = (
                    f"{where} has {len(listed)} SBOMs attached; watch reads at most {MAX_SBOMS}: "
                    "remove the stray ones (each is a referrer manifest of that digest)"
                )
                raise VerifyFailed(msg)
            payloads = (fetch_attachment(client, repo, d, "sbom").payload for d in listed)
            return tuple(dict.fromkeys(payloads))

        try:
            found: tuple[bytes, ...] = self._ask(ep, f"the SBOM of {image}@{digest[:19]}", read)
        except ReleaseError as exc:
            if isinstance(exc, StackError | RegistryAuthError | TLSVerifyFailed | VerifyFailed):
                raise
            msg = f"{where}: its SBOM cannot be read ({exc.message.splitlines()[0]})"
            raise VerifyFailed(msg) from None
        return found


def read_sboms(payloads: tuple[bytes, ...], where: str) -> tuple[Package, ...]:
    """The packages the published SBOMs name, read as one (``scan.packages_in``), refusing what
    is not a CycloneDX SBOM (damaged, too deeply nested, another format) with what is wrong,
    never a guess: the scan reads only what passed here. Each is parsed once."""
    documents = []
    for n, payload in enumerate(payloads):
        which = f"{where}: the attached SBOM"
        if len(payloads) > 1:
            which += f" (the {_nth(n)} of {len(payloads)})"
        try:
            data = parse_json(payload, what=which, error=VerifyFailed)
        except VerifyFailed as exc:
            msg = f"{exc.message}; it cannot be scanned"
            raise VerifyFailed(msg) from None
        if not isinstance(data, dict) or data.get("bomFormat") != "CycloneDX":
            msg = f"{which} is not a CycloneDX JSON document (no bomFormat: CycloneDX); it cannot be scanned"
            raise VerifyFailed(msg)
        bad = _first_bad_component(data)
        if bad:
            msg = f"{which} is damaged ({bad}); it cannot be scanned"
            raise VerifyFailed(msg)
        documents.append(data)
    try:
        found = packages_in(*documents)
    except ValueError as exc:  # a package URL that does not parse
        msg = f"{where}: the attached SBOM is damaged ({str(exc)[:120]}); it cannot be scanned"
        raise VerifyFailed(msg) from None
    if not found:  # every image holds packages: an SBOM that names none says nothing of it
        msg = f"{where}: the attached SBOM lists no package a scan can match; it cannot be scanned"
        raise VerifyFailed(msg)
    return found


def _nth(n: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(n, f"{n + 1}th")


def _first_bad_component(data: dict[str, Any]) -> str | None:
    if not isinstance(data.get("components", []), list):
        return "components is not a list"
    for where, c in components_of(data):
        if not isinstance(c, dict) or not isinstance(c.get("purl", ""), str):
            return f"{where} is not a component with a package URL"
        if not isinstance(c.get("components", []), list):
            return f"{where}.components is not a list"
        props = c.get("properties", [])
        if not isinstance(props, list) or not all(isinstance(p, dict) for p in props):
            return f"{where}.properties is not a list of properties"
        unmatched = _unmatched_package(c)
        if unmatched:
            return f"{where} ({shown(c.get('name'), 80)}) {unmatched}"
    return None


PACKAGE_TYPES = ("library", "application", "framework", None)  # a component that is a software package


def _unmatched_package(c: dict[str, Any]) -> str | None:
    """Why a package the SBOM lists cannot be matched against advisories (None: it can, or it is
    no package: an artifact, the base image, the operating system). Skipped, it would leave the
    release "up to date" whatever the advisories say of it."""
    kinds = {p.get("name"): p.get("value") for p in c.get("properties", [])}
    if c.get("type") not in PACKAGE_TYPES or kinds.get("io.xpu-release:kind") == "artifact":
        return None
    text = c.get("purl")
    if not text:
        return "names a package with no package URL"
    try:
        purl = Purl.parse(text)
    except ValueError:
        return "names a package whose package URL does not parse"
    if not purl.version:
        return "names a package whose package URL has no version"
    if purl.type == "deb" and (purl.namespace != "debian" or not purl.qualifier("distro").partition("-")[2]):
        return "names a Debian package of no known release (its package URL needs distro=debian-<N>)"
    version, name = c.get("version", purl.version), c.get("name", purl.name)
    if not isinstance(version, str) or not isinstance(name, str):
        return "has a version or name that is not text"
    if purl.type in ("pypi", "deb") and version and version != purl.version:
        return f"says version {shown(version, 40)!r} where its package URL says {shown(purl.version, 40)!r}"
    if purl.type == "pypi" and pypi_name(name) != pypi_name(purl.name):
        return f"says name {shown(name, 60)!r} where its package URL says {shown(purl.name, 60)!r}"
    return None
