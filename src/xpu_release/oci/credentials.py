"""Registry credentials: the docker config (``auths``, ``credHelpers``/``credsStore``), the
environment, or ``--password-stdin``. Never argv; every password is registered for redaction."""

from __future__ import annotations

import base64
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RegistryAuthError
from ..guard.limits import MAX_DOCKER_CONFIG_BYTES
from ..guard.reading import Refused, parse_json, read_json
from ..secrets import basic_credentials, register
from ..settings import Settings


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """A login. Its password and the forms it travels in (``base64(user:password)``) are
    registered for redaction when it is made, wherever it came from."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        register(self.password)
        basic_credentials(self.username, self.password)

    @property
    def basic(self) -> str:
        """The ``Authorization`` header's value for basic authentication (UTF-8, as docker)."""
        return f"Basic {basic_credentials(self.username, self.password)}"

    def docker_auth(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


def _docker_config(folder: Path | None) -> dict[str, object]:
    """The docker config (bounded, never a FIFO opened); one that cannot be read holds nothing."""
    path = (folder or Path.home() / ".docker") / "config.json"
    try:
        data = read_json(path, what=str(path), limit=MAX_DOCKER_CONFIG_BYTES, error=Refused)
    except Refused:
        return {}
    return data if isinstance(data, dict) else {}


def _helper(name: str, host: str) -> Credentials | None:
    try:
        proc = subprocess.run(
            [f"docker-credential-{name}", "get"],
            input=host,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"credential helper docker-credential-{name} failed for {host}: {type(exc).__name__}"
        raise RegistryAuthError(msg) from None
    if proc.returncode != 0:
        return None
    try:
        data = parse_json(proc.stdout, what="the helper's answer", error=Refused)
        username, secret = str(data["Username"]), str(data["Secret"])
    except (ValueError, KeyError, TypeError):
        # Never echo the helper's output: it may hold the secret.
        msg = f"credential helper docker-credential-{name} answered for {host} with no Username/Secret JSON"
        raise RegistryAuthError(msg) from None
    return Credentials(username=username, password=secret)


@dataclass
class CredentialStore:
    """Where credentials for a registry host come from, in order: an explicit login
    (``--password-stdin``), the environment, then the docker config.

    A login and the environment name no host, so they belong to the hosts of this release only
    (``release_hosts``: its public and VPC endpoints); every other host, a base-image hub
    included, gets only what the docker config holds for that very host."""

    explicit: Credentials | None = None
    release_hosts: frozenset[str] = frozenset()
    # The environment's login (XPU_RELEASE_USERNAME and _PASSWORD, as the settings read them).
    environment: Credentials | None = None
    docker_config: Path | None = None  # DOCKER_CONFIG's folder (None: ~/.docker)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, release_hosts: frozenset[str] = frozenset(),
        explicit: Credentials | None = None,
    ) -> CredentialStore:  # fmt: skip
        env_login = None
        if settings.username and settings.password:
            env_login = Credentials(username=settings.username, password=settings.password)
        return cls(explicit=explicit, release_hosts=release_hosts, environment=env_login,
                   docker_config=settings.docker_config)  # fmt: skip

    def for_host(self, host: str) -> Credentials | None:
        if host in self.release_hosts:
            if self.explicit:
                return self.explicit
            if self.environment:
                return self.environment
        config = _docker_config(self.docker_config)
        helpers = config.get("credHelpers") or {}
        if isinstance(helpers, dict) and host in helpers:
            return _helper(str(helpers[host]), host)
        auths = config.get("auths") or {}
        entry = auths.get(host) if isinstance(auths, dict) else None
        if isinstance(entry, dict) and entry.get("auth"):
            register(str(entry["auth"]))  # as it is stored, which a server may be sent and echo
            try:
                raw = base64.b64decode(str(entry["auth"]), validate=True).decode()
            except ValueError:  # binascii.Error and UnicodeDecodeError: never echo it (a secret)
                msg = f"the docker config's auth for {host} is not base64 of user:password; log in again"
                raise RegistryAuthError(msg) from None
            user, _, password = raw.partition(":")
            return Credentials(username=user, password=password)
        store = config.get("credsStore")
        if isinstance(store, str) and store:
            return _helper(store, host)
        return None
