"""Answering a registry's 401: its challenge read, and where our login may go.

A login goes to the endpoint's own origin, and to a token realm only when the realm is on the
registry's own host or on a host the registries file names for it (``token_hosts``): a realm
elsewhere is refused (exit 8) before anything is sent, as is any login over plain HTTP beyond
loopback. Without a login, an anonymous token is asked of any https realm (it carries nothing
of ours). A token received is registered as a secret at once (``secrets``).

The challenge is read by a scan that moves forward only: a header is outside text, and a
pattern that tries again at every position (``(\\w+)="([^"]*)"`` with ``findall``) took 18 s on a
64 KB header of one letter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import RegistryAuthError, WireError
from ..guard.shown import shown
from ..secrets import register
from .endpoint import Endpoint, Origin, is_loopback

_PARAM = re.compile(r'[\s,]*([A-Za-z0-9_.-]+)[ \t]*=[ \t]*(?:"([^"\\]*(?:\\.[^"\\]*)*)"|([^\s,"]*))')


@dataclass(frozen=True)
class Challenge:
    """A ``WWW-Authenticate`` header: its scheme (lower case) and parameters."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, header: str) -> Challenge:
        scheme, _, rest = header.strip().partition(" ")
        params: dict[str, str] = {}
        pos = 0
        while (m := _PARAM.match(rest, pos)) is not None and m.end() > pos:
            value = m[2] if m[2] is not None else m[3]
            params.setdefault(m[1].lower(), re.sub(r"\\(.)", r"\1", value))
            pos = m.end()
        return cls(scheme.lower(), params)


def check_login_goes(endpoint: Endpoint, challenge: Challenge) -> None:
    """Refuse (exit 8) to answer ``challenge`` with our login where it must not go: over plain
    HTTP beyond loopback; to a realm that is not https (unless the registry is itself an
    insecure loopback one, and the realm too); to a realm on another host than the registry's
    or those the registries file names for it (``token_hosts``)."""
    loopback = is_loopback(endpoint.host)
    if endpoint.scheme == "http" and not loopback:
        msg = (
            f"{endpoint.name} ({endpoint.host}) asks for credentials over plain HTTP; "
            "they are sent over HTTPS only (insecure registries: loopback only)"
        )
        raise RegistryAuthError(msg)
    if challenge.scheme != "bearer":
        return
    realm = challenge.params.get("realm", "")
    origin = Origin.of(realm)
    local = endpoint.scheme == "http" and loopback and origin is not None and is_loopback(origin.host)
    if origin is None or (origin.scheme != "https" and not local):
        msg = (
            f"{endpoint.name} ({endpoint.host}) names the token realm {shown(realm, 120)!r}; "
            "credentials go to an https realm only"
        )
        raise RegistryAuthError(msg)
    allowed = {o.host for h in (endpoint.host, *endpoint.token_hosts) if (o := Origin.of(f"https://{h}/"))}
    if origin.host not in allowed:
        msg = (
            f"{endpoint.name} ({endpoint.host}) names the token realm {shown(realm, 120)!r}, on "
            f"another host; our login goes only to the registry's own host or to a host its entry in "
            f"the registries file names under token_hosts (add {origin.host!r} there if you trust it)"
        )
        raise RegistryAuthError(msg)


def anonymous_realm(endpoint: Endpoint, challenge: Challenge) -> str:
    """The realm to ask an anonymous token of: any http(s) URL (it is sent nothing of ours)."""
    realm = challenge.params.get("realm", "")
    if Origin.of(realm) is None:
        msg = f"{endpoint.name} ({endpoint.host}) names the token realm {shown(realm, 120)!r}: no URL"
        raise WireError(msg)
    return realm


def no_login(endpoint: Endpoint) -> RegistryAuthError:
    return RegistryAuthError(f"{endpoint.name} ({endpoint.host}) wants credentials and we have none")


def token_of(data: Any, what: str) -> str:
    """The token in a token service's answer (``token`` or ``access_token``), registered as a
    secret before anything can show it."""
    token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
    if not isinstance(token, str) or not token:
        msg = f"{what} answered without a token"
        raise WireError(msg)
    register(token)
    return token
