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

``ENVIRONMENT`` names every variable the command line reads, the setting it fills and what it
means: the one source of the settings reference (``docs/reference/settings.md``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .guard.writing import open_folder
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
DEADLINE_ENV = "XPU_RELEASE_DEADLINE"  # the command's deadline for answers (oci/deadline.py)
ZSTD_ENV = "XPU_RELEASE_PULLERS_ACCEPT_ZSTD"  # 1: every engine that pulls the image reads zstd
# What docker-py reads to find and reach the engine: handed to it as they are.
DOCKER_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")

COLOUR_ENV = "NO_COLOR"  # read by the CLI's output (cli/output.py), https://no-color.org
COMPLETE_ENV = "_XPU_RELEASE_COMPLETE"  # Click's shell completion


@dataclass(frozen=True, kw_only=True)
class Variable:
    """One environment variable the command line reads: the ``Settings`` field it fills (empty:
    read elsewhere in the CLI), the option that overrides it, and what it means."""

    name: str
    meaning: str
    setting: str = ""
    option: str = ""
    secret: bool = False  # registered for redaction when read; never printed


ENVIRONMENT: tuple[Variable, ...] = (
    Variable(name=ROOT_ENV, setting="root", option="--root",
             meaning="The repository root. Default: found upwards from the working folder, as git does."),
    Variable(name=REGISTRIES_ENV, setting="registries", option="--registries",
             meaning="A registries file that overrides `registries.yaml` field by field (e.g. the local "
             "stack's endpoints, which `ci/local-stack.sh env` sets)."),
    Variable(name=CACHE_ENV, setting="cache",
             meaning="The cache folder (compressed layers, fetched artifacts and wheels, digest maps). "
             "Default: `$XDG_CACHE_HOME/xpu-release`, else `~/.cache/xpu-release`."),
    Variable(name=CACHE_MAX_ENV, setting="cache_max",
             meaning="A size (`20G`, `500M`): every publish and release brings the cache under it when "
             "it ends. A bad value is exit 3 before anything is sent."),
    Variable(name=ADVISORIES_ENV, setting="advisories", option="--advisories",
             meaning="OSV advisories for the vulnerability gate: directories of JSON records or osv.dev "
             "export archives, separated by `:`."),
    Variable(name=BUILDER_ENV, setting="builder",
             meaning="Who builds, as the provenance names it. Default: `urn:xpu-release:host:<hostname>`."),
    Variable(name=KEEP_ENV, setting="keep_containers",
             meaning="`1`: keep the throwaway build and test containers, for debugging."),
    Variable(name=USER_ENV, setting="username", option="--username",
             meaning="The registry user for the release's public and VPC endpoints."),
    Variable(name=PASSWORD_ENV, setting="password", secret=True,
             meaning="The registry password for that user (or `--password-stdin`; never in argv)."),
    Variable(name=KEY_ENV, setting="signing_key", option="--signing-key",
             meaning="A PEM private key (Ed25519 or ECDSA P-256, PKCS#8) that signs the provenance "
             "and the VEX."),
    Variable(name=KEY_PASSWORD_ENV, setting="signing_key_password", secret=True,
             meaning="The password of an encrypted signing key."),
    Variable(name=ARTIFACT_TOKEN_ENV, setting="artifact_token", secret=True,
             meaning="A token for fetching artifacts; used on the host only, never in a build "
             "argument, a layer or a log."),
    Variable(name=COMPRESSION_ENV, setting="compression", option="--compression",
             meaning="The layer codec, `LIBRARY[:LEVEL]` (isal, zlib-ng, zlib, zstd). Default: `isal:2`."),
    Variable(name=ZSTD_ENV, setting="pullers_accept_zstd", option="--pullers-accept-zstd",
             meaning="`1`: every engine that pulls the image reads zstd layers (Docker 23 or later)."),
    Variable(name=DEADLINE_ENV, option="--deadline",
             meaning="Seconds a command waits, in a row, for registries that give no answer before it "
             "stops (each wait is told after 10 s). Default: 50."),
    Variable(name="DOCKER_CONFIG", setting="docker_config",
             meaning="The docker config folder whose `auths`, `credHelpers` and `credsStore` give "
             "registry credentials. Default: `~/.docker`."),
    *(Variable(name=name, setting="docker",
               meaning="Where and how to reach the Docker engine, handed to docker-py as it is.")
      for name in DOCKER_ENV),
    Variable(name="GITHUB_ACTIONS", setting="ci",
             meaning="`true`: the stage report writes GitHub Actions' log groups."),
    Variable(name="GITLAB_CI", setting="ci", meaning="`true`: the stage report writes GitLab's collapsible "
             "sections."),
    Variable(name="HOME", setting="cache",
             meaning="The home folder the default cache and docker config are under (else the password "
             "database's)."),
    Variable(name="XDG_CACHE_HOME", setting="cache", meaning="Where the default cache folder is made."),
    Variable(name=COLOUR_ENV, meaning="Set: no colour on a terminal either (https://no-color.org)."),
    Variable(name=COMPLETE_ENV, meaning="Shell completion, as Click reads it: "
             '`eval "$(_XPU_RELEASE_COMPLETE=bash_source xpu-release)"`.'),
)  # fmt: skip


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


def cache_folder(*names: str) -> Path:
    """``<cache>/<names...>``, made where missing, each step a folder inside the cache: a link
    on the way (``oci-blobs`` → ``/etc``) is refused (``LinkRefused``, exit 13) before anything
    is written under it. The cache folder itself is the user's, followed if a link."""
    cache = cache_dir()
    folder = cache.joinpath(*names)
    os.close(open_folder(folder, within=cache))
    return folder
