"""Where one registry is: its host, the namespace images go under, how to reach it (TLS with a
CA file, or plain HTTP on loopback). The registries file (``manifest/registries.py``) makes these;
everything that talks to a registry takes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
