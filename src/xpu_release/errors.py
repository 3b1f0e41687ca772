"""One error hierarchy; each class carries the exit code ``cli.py`` maps it to.

Only ``cli.py`` prints these. Messages say what failed, where, and what to do, and never
contain a secret: anything that could (a registry response, a log) is redacted first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class ReleaseError(Exception):
    """Base of every error a user can cause or meet; never shown with a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def render(self) -> str:
        return self.message


class StaleError(ReleaseError):
    """A generated file differs from what its source renders to (``render --check``)."""

    exit_code = 1


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One located problem in an input file: ``file:line:col: key.path: message``."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ManifestError(ReleaseError):
    """One or more manifests are invalid; every problem is reported, not just the first."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem] | str) -> None:
        if isinstance(problems, str):
            self.problems: tuple[Problem, ...] = ()
            super().__init__(problems)
        else:
            self.problems = tuple(problems)
            lines = [str(p) for p in self.problems]
            count = len(lines)
            lines.append(f"{count} problem{'s' if count != 1 else ''} found")
            super().__init__("\n".join(lines))


class ConfigError(ReleaseError):
    """The registries file, the repository layout or an option is wrong."""

    exit_code = 3


class LockError(ReleaseError):
    """Pins cannot be resolved into a lock, or the committed lock is stale."""

    exit_code = 4


class BuildFailed(ReleaseError):
    """The engine reported an error while building; ``details`` keeps the full log."""

    exit_code = 5


class SmokeTestFailed(ReleaseError):
    """A check inside the built image failed; the image must not be published."""

    exit_code = 6


class PublishError(ReleaseError):
    """A push, copy or verification failed for at least one endpoint."""

    exit_code = 7


class WireError(ReleaseError):
    """A registry did not answer as the protocol says (go-containerregistry's ``transport.Error``):
    no connection, a status we cannot use, a broken upload, a digest that does not match. Says
    which HTTP ``status`` (if any) and whether trying again later may help (``temporary``: a
    connection that failed, 429, 5xx); a definitive answer (4xx, a wrong digest) is not. The
    transport raises it; each caller decides what it means to the user (publish and verify: 7;
    the base image's registry in ``lock``: 10; ``status`` and the preflight: a row or check)."""

    exit_code = 7

    def __init__(
        self, message: str, *, status: int | None = None, temporary: bool = False, details: str = ""
    ) -> None:
        super().__init__(message, details=details)
        self.status = status
        self.temporary = temporary


class RegistryAuthError(WireError):
    """A registry refused our credentials (401/403) or we have none for it."""

    exit_code = 8


class TLSVerifyFailed(WireError):
    """An endpoint's TLS certificate does not verify against its ``ca_file`` (or the system's
    CAs): the same exit code in a dry run's preflight as in the real run's publish."""


class VerifyFailed(ReleaseError):
    """An endpoint does not serve the release as recorded: a blob missing or damaged, another
    digest at a tag, a document missing or signed by another key."""

    exit_code = 7


class TagConflict(PublishError):
    """An immutable version tag already points at a different digest."""

    exit_code = 9


class StackError(ReleaseError):
    """The Docker engine (or a registry the command needs) is not reachable."""

    exit_code = 10


class NotFoundError(ReleaseError):
    """A named image, version, manifest or record does not exist."""

    exit_code = 11


class DamagedFileError(ReleaseError):
    """A file this tool wrote earlier (a release record) is not what it wrote: truncated,
    edited by hand, or of another format. Nothing is guessed from it."""

    exit_code = 12


class OutputError(ReleaseError):
    """What the command produces cannot be written: stdout or stderr closed or full, an output
    file or folder that cannot be made. Nothing it reports was wrong; its report is lost."""

    exit_code = 13


class VulnerabilityGateFailed(ReleaseError):
    """The vulnerability gate found what stops a release: a finding at or above the manifest's
    threshold with no valid exception, or an exception that is stale. Nothing is published."""

    exit_code = 14


class PreflightFailed(ReleaseError):
    """A dry run's checks found what would stop the real run; it exits as that run would."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
