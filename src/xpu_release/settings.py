"""Settings: every path and option a command takes from its environment, read once.

The CLI builds one ``Settings`` from the process environment, which it alone reads and hands
to ``Settings.from_env`` as a mapping; this module only reads that mapping (even the home folder
comes from its ``HOME``, else from the password database, never from the process). Tests and
benchmarks build their own ``Settings`` instead of changing the process environment.
Secrets read here (registry password, signing-key password,
artifact token) are registered for redaction the moment they are read, and never printed.

What stages reach deep inside (the cache folder, a content-addressed store every stage shares
like a working directory; the artifact token; the engine's address; keep-containers) is held
process-wide: ``use`` makes a ``Settings`` the current one, once per command, and ``current`` and
``cache_dir`` give it to those stages. Everything else is passed down as an argument.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .secrets import register

CiKind = Literal["github", "gitlab", ""]
ROOT_ENV = "XPU_RELEASE_ROOT"
REGISTRIES_ENV = "XPU_RELEASE_REGISTRIES"
CACHE_ENV = "XPU_RELEASE_CACHE"
CACHE_MAX_ENV = "XPU_RELEASE_CACHE_MAX"
ADVISORIES_ENV = "XPU_RELEASE_ADVISORIES"  # OSV directories or archives, separated by ':'
BUILDER_ENV = "XPU_RELEASE_BUILDER_ID"
KEEP_ENV = "XPU_RELEASE_KEEP_CONTAINERS"
USER_ENV = "XPU_RELEASE_USERNAME"
PASSWORD_ENV = "XPU_RELEASE_PASSWORD"
KEY_ENV = "XPU_RELEASE_SIGNING_KEY"
KEY_PASSWORD_ENV = "XPU_RELEASE_SIGNING_KEY_PASSWORD"
ARTIFACT_TOKEN_ENV = "XPU_RELEASE_ARTIFACT_TOKEN"
COMPRESSION_ENV = "XPU_RELEASE_COMPRESSION"  # the layer codec, LIBRARY[:LEVEL] (oci/codec.py)
ZSTD_ENV = "XPU_RELEASE_PULLERS_ACCEPT_ZSTD"  # 1: every engine that pulls the image reads zstd
# What docker-py reads to find and reach the engine: handed to it as they are.
DOCKER_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


def _home(env: Mapping[str, str]) -> Path:
    """The user's home: ``HOME`` from the mapping given, else the password database's entry."""
    import os
    import pwd

    return Path(env.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)


@dataclass(frozen=True, kw_only=True)
class Settings:
    root: str | None = None  # the repository root (else found upwards from the working folder)
    registries: str | None = None  # a registries file that overrides registries.yaml
    cache: Path = field(default_factory=lambda: _home({}) / ".cache" / "xpu-release")
    cache_max: str | None = None  # the size a release brings the cache under when it ends (20G)
    advisories: tuple[str, ...] = ()  # OSV advisories for the vulnerability gate (paths)
    builder: str = ""  # who builds: the provenance's builder id ("" → this host's name)
    keep_containers: bool = False  # keep throwaway containers, for debugging
    ci: CiKind = ""  # the CI whose log groups the stage report writes
    docker_config: Path = field(default_factory=lambda: _home({}) / ".docker")
    docker: tuple[tuple[str, str], ...] = ()  # DOCKER_HOST and its kin, as set
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    signing_key: str | None = None
    signing_key_password: str | None = field(default=None, repr=False)
    artifact_token: str | None = field(default=None, repr=False)
    compression: str | None = None  # the layer codec as the environment names it
    pullers_accept_zstd: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        def get(name: str) -> str | None:
            return env.get(name) or None

        xdg = get("XDG_CACHE_HOME")
        home = _home(env)
        cache = Path(get(CACHE_ENV) or (Path(xdg) if xdg else home / ".cache") / "xpu-release")
        ci: CiKind = "github" if env.get("GITHUB_ACTIONS") == "true" else ""
        if not ci and env.get("GITLAB_CI") == "true":
            ci = "gitlab"
        docker_config = get("DOCKER_CONFIG")
        return cls(
            root=get(ROOT_ENV),
            registries=get(REGISTRIES_ENV),
            cache=cache,
            cache_max=get(CACHE_MAX_ENV),
            advisories=tuple(p for p in (get(ADVISORIES_ENV) or "").split(":") if p),
            builder=get(BUILDER_ENV) or "",
            keep_containers=env.get(KEEP_ENV) == "1",
            ci=ci,
            docker_config=Path(docker_config) if docker_config else home / ".docker",
            docker=tuple((k, env[k]) for k in DOCKER_ENV if env.get(k)),
            username=get(USER_ENV),
            password=register(get(PASSWORD_ENV)),
            signing_key=get(KEY_ENV),
            signing_key_password=register(get(KEY_PASSWORD_ENV)),
            artifact_token=register(get(ARTIFACT_TOKEN_ENV)),
            compression=get(COMPRESSION_ENV),
            pullers_accept_zstd=env.get(ZSTD_ENV) == "1",
        )

    @property
    def docker_host(self) -> str | None:
        return dict(self.docker).get("DOCKER_HOST")

    @property
    def builder_id(self) -> str:
        """Who builds, as the provenance names it: the setting, else this host."""
        return self.builder or f"urn:xpu-release:host:{socket.gethostname()}"


_current: list[Settings] = [Settings()]


def use(settings: Settings) -> Settings:
    """Make ``settings`` the current ones (the CLI, once per command; a test or a benchmark)."""
    _current[0] = settings
    return settings


def current() -> Settings:
    return _current[0]


def cache_dir() -> Path:
    """The current cache folder, made if missing."""
    path = _current[0].cache
    path.mkdir(parents=True, exist_ok=True)
    return path
