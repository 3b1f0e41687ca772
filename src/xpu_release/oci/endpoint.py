"""Where one registry is: its host, the namespace images go under, how to reach it (TLS with a
CA file, or plain HTTP on loopback). The registries file (``manifest/registries.py``) makes these;
everything that talks to a registry takes one."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

from ..guard.reading import ascii_int

Role = Literal["public", "vpc", "base"]


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """One place an image is pushed to or pulled from."""

    registry: str  # logical name: public, vpc, hub
    role: Role
    region: str | None
    host: str
    namespace: str
    insecure: bool = False
    ca_file: str | None = None
    # Hosts besides ``host`` whose token service may be sent our login (the registries file's
    # ``token_hosts``): a realm elsewhere is refused (``auth``).
    token_hosts: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.region}" if self.region else self.registry

    @property
    def prefix(self) -> str:
        """``host/namespace``: what image names are put under (also the base's registry in builds)."""
        return f"{self.host}/{self.namespace}"

    def repository(self, image: str) -> str:
        return f"{self.namespace}/{image}"

    def ref(self, image: str, tag: str) -> str:
        return f"{self.prefix}/{image}:{tag}"

    @property
    def scheme(self) -> str:
        return "http" if self.insecure else "https"


def is_loopback(host: str) -> bool:
    """``host[:port]`` names this machine: localhost, 127.0.0.0/8 or ::1."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Origin:
    """Where a URL goes: scheme, host (lower case) and port (the scheme's own when none is
    written). Credentials belong to one origin."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin | None:
        """The origin of ``url``; None when it is no http(s) URL we could send a request to."""
        try:
            parsed = parse_url(url)
        except (LocationParseError, ValueError):
            return None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            return None
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if not 0 < port <= 65535:
            return None
        return cls(parsed.scheme, parsed.host.lower(), port)


def host_problem(host: str) -> str | None:
    """Why ``host[:port]`` is no registry host (a port past 65535, a space, a path), or None."""
    _, colon, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
    if colon and not 0 < (ascii_int(port, most=5) or 0) <= 65535:
        return "has a port that is not a number from 1 to 65535"
    bad = any(c in host for c in "/?#@\\%") or not host.isascii() or not host.isprintable() or " " in host
    if bad or Origin.of(f"https://{host}/") is None:
        return "is not a host name or address (with an optional :port)"
    return None
