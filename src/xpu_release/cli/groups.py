"""Options that travel together, handed to a command as one frozen value each (a context
object, not a parameter an option): the login, how a release is pushed, what a release runs
first, how ``watch`` reads. A command's signature then says what it needs in a few words, and
the rules of a group (a login reads one line of stdin; a codec named twice is the option's)
live in the group, once."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..oci.credentials import CredentialStore
from ..settings import USER_ENV, Settings

if TYPE_CHECKING:
    from ..evidence.scan import GatePolicy
    from ..evidence.signing import Signer
    from ..manifest import Repo
    from ..manifest.registries import Registries
    from ..oci.codec import Codec

F = TypeVar("F", bound=Callable[..., Any])
Option = Callable[[Any], Any]  # a click.option or click.argument decorator


def grouped(name: str, make: Callable[..., Any], *options: Option) -> Callable[[F], F]:
    """``options`` (in the order of ``--help``), handed to the command as one argument ``name``:
    ``make(**their values)``."""

    def probe() -> None: ...

    for option in reversed(options):
        option(probe)
    keys = [param.name for param in getattr(probe, "__click_params__", ())]

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs[name] = make(**{key: kwargs.pop(key) for key in keys})
            return f(*args, **kwargs)

        for option in reversed(options):
            command = option(command)
        return command  # type: ignore[return-value]

    return decorate


# --- the login ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Login:
    """``--username`` and ``--password-stdin`` as given (none: the environment's credentials)."""

    username: str | None = None
    password_stdin: bool = False

    def store(self, settings: Settings, registries: Registries, *more: Registries) -> CredentialStore:
        """The credential store of a command: a login or the environment's credentials go only to
        the public and VPC endpoints of the registries in use (and of ``more``: ``promote``'s
        staging registries)."""
        from ..errors import ConfigError
        from ..guard.limits import MAX_PASSWORD_BYTES
        from ..oci.credentials import Credentials

        hosts = frozenset(ep.host for regs in (registries, *more) for ep in regs.publish_endpoints())
        if not self.password_stdin:
            return CredentialStore.from_settings(settings, release_hosts=hosts)
        user = self.username or settings.username
        if not user:
            msg = f"--password-stdin needs --username (or {USER_ENV})"
            raise ConfigError(msg)
        # One line, read no further than a password can be long: a file given by mistake (an
        # image tarball, no line end in 400 MB) is refused, never read whole into memory.
        line = sys.stdin.readline(MAX_PASSWORD_BYTES + 1)
        password = line.rstrip("\r\n")
        if len(password) > MAX_PASSWORD_BYTES:
            msg = (f"--password-stdin: standard input holds no line of at most {MAX_PASSWORD_BYTES} "
                   "characters (a password or token); give it the password alone")  # fmt: skip
            raise ConfigError(msg)
        if not password:
            msg = "--password-stdin: no password on standard input"
            raise ConfigError(msg)
        login = Credentials(username=user, password=password)  # registered as a secret as it is made
        return CredentialStore.from_settings(settings, release_hosts=hosts, explicit=login)


with_login = grouped(
    "login",
    Login,
    click.option(
        "--username", envvar=USER_ENV, show_envvar=True, help="Registry user (with --password-stdin)."
    ),
    click.option("--password-stdin", is_flag=True, help="Read the registry password from stdin."),
)


# --- how a release is pushed -----------------------------------------------------------------


@dataclass(frozen=True)
class Push:
    """How a command pushes: whether a version tag that holds other content may be replaced, the
    key that signs the provenance, the layers' compression; ``publish`` adds chunked uploads and
    the engine's push."""

    allow_overwrite: bool = False
    signing_key: str | None = None
    compression: str | None = None
    accept_zstd: bool = False
    chunk_size: int | None = None
    engine_push: bool = False

    def codec(self, settings: Settings) -> Codec:
        """The codec the option names, else the setting, else the default (ConfigError if refused)."""
        from ..oci.codec import DEFAULT, parse_codec
        from ..settings import COMPRESSION_ENV

        accept = self.accept_zstd or settings.pullers_accept_zstd
        if self.compression is not None:
            return parse_codec(
                self.compression, accept_zstd=accept, where=f"--compression {self.compression}"
            )
        if settings.compression is not None:
            text = settings.compression
            return parse_codec(text, accept_zstd=accept, where=f"${COMPRESSION_ENV}={text}")
        return DEFAULT

    def signer(self, settings: Settings) -> Signer | None:
        """The signing key named by ``--signing-key`` or the settings (None: unsigned)."""
        from ..evidence.signing import load_signer

        return load_signer(self.signing_key or settings.signing_key, settings.signing_key_password)


signing_key_option = click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    help="Sign the provenance with this PEM private key (Ed25519 or ECDSA P-256; also "
    "$XPU_RELEASE_SIGNING_KEY; an encrypted key's password from $XPU_RELEASE_SIGNING_KEY_PASSWORD).",
)
_overwrite = click.option(
    "--allow-overwrite", is_flag=True, help="Replace a version tag that holds other content."
)
_compression = (
    click.option(
        "--compression",
        metavar="LIBRARY[:LEVEL]",
        help="How new layers are compressed: isal (the default, level 2), zlib-ng, zlib (gzip, "
        "levels 0-9; isal 0-3) or zstd (1-19); also $XPU_RELEASE_COMPRESSION. An eStargz image's "
        "own layers (image.yaml `layers: estargz`) are always isal level 2: their TOC's offsets are "
        "part of the image.",
    ),
    click.option(
        "--pullers-accept-zstd",
        "accept_zstd",
        is_flag=True,
        help="Every engine that pulls the image reads zstd layers (Docker 23 or later); zstd is "
        "refused without it (also $XPU_RELEASE_PULLERS_ACCEPT_ZSTD=1).",
    ),
)
push_options = grouped("push", Push, _overwrite, *_compression, signing_key_option)
publish_push_options = grouped(
    "push",
    Push,
    _overwrite,
    click.option("--chunk-size", type=click.IntRange(min=1 << 20), help="Chunked blob uploads of this size."),
    click.option(
        "--engine-push",
        is_flag=True,
        help="Make the first push with `docker push` (for comparison; blobs then depend on the engine).",
    ),
    *_compression,
    signing_key_option,
)


# --- what a release runs first ---------------------------------------------------------------


@dataclass(frozen=True)
class Chain:
    """NAME:VERSION, and whether every release of ours it builds on is released first."""

    ref: str
    with_bases: bool = False

    def refs(self, repo: Repo) -> list[str]:
        """What to release, in order: its bases first (parents first) with ``--with-bases``."""
        from ..manifest.loader import release_chain

        return release_chain(repo, self.ref) if self.with_bases else [self.ref]


# --- the checks a release passes  --------------------------------------------------------------


advisories_option = click.option(
    "--advisories",
    "advisories",
    multiple=True,
    type=click.Path(exists=True),
    help="OSV records: a directory of JSON files or osv.dev export archives (PyPI/all.zip, "
    "Debian/all.zip); repeatable; else $XPU_RELEASE_ADVISORIES (paths separated by ':').",
)


@dataclass(frozen=True)
class Checks:
    """The advisories the vulnerability gate reads, and a skipped gate or evaluation with its
    reason (written into the release record)."""

    advisories: tuple[str, ...] = ()
    no_scan: str | None = None
    no_evaluate: str | None = None

    def gate(self, settings: Settings, today: str | None = None) -> GatePolicy:
        """The scan's policy from the options, else the settings (``today``: ``--today``, a
        what-if day the review dates are held against)."""
        from datetime import date

        from ..errors import ConfigError
        from ..evidence.scan import GatePolicy

        try:
            day = date.fromisoformat(today) if today else None
        except ValueError:
            msg = f"--today {today!r} is not a date; write it like 2026-12-31"
            raise ConfigError(msg) from None
        skip = self.no_scan
        if skip is not None and not skip.strip():
            msg = "--no-scan needs a reason (it is written into the release record)"
            raise ConfigError(msg)
        paths = self.advisories or settings.advisories
        missing = [p for p in paths if not Path(p).exists()]
        if missing and skip is None:  # checked here, so that a dry run fails as the real run would
            msg = f"advisories: {missing[0]} does not exist (--advisories or XPU_RELEASE_ADVISORIES)"
            raise ConfigError(msg)
        return GatePolicy(advisories=paths, skip_reason=skip, today=day)

    def skip_evaluation(self) -> str | None:
        """``--no-evaluate``'s reason (ConfigError when it is blank)."""
        from ..errors import ConfigError

        if self.no_evaluate is not None and not self.no_evaluate.strip():
            msg = "--no-evaluate needs a reason (it is written into the release record)"
            raise ConfigError(msg)
        return self.no_evaluate


checks_options = grouped(
    "checks",
    Checks,
    advisories_option,
    click.option(
        "--no-scan",
        "no_scan",
        metavar="REASON",
        help="Skip the vulnerability gate; the reason is written into the release record.",
    ),
    click.option(
        "--no-evaluate",
        "no_evaluate",
        metavar="REASON",
        help="Skip the performance evaluation; the reason is written into the release record.",
    ),
)
