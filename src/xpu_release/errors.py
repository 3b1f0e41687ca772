"""One error hierarchy; each class carries the exit code ``cli.py`` maps it to.

Only ``cli.py`` prints these. Messages say what failed, where, and what to do, and never
contain a secret: anything that could (a registry response, a log) is redacted first.

``EXIT_CODES`` is the table of every exit status a user can meet, with what it means and an
example: the one source of the documented codes. The reference page (``docs/reference/
exit-codes.md``) is generated from it, and the tests that assert exit codes read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


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
    message: str
    line: int = 0  # 0: the file as a whole
    column: int = 0
    path: str = ""  # the key's path ("": none)

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
    the base image's registry in ``lock``: 10; ``status`` and the preflight: a row or check).
    ``unanswered``: the registry is down: no answer came at all (no connection, no status line in
    time) or only "try later" (429, 5xx), through every retry, as opposed to an answer that was
    wrong or too slow; ``is_down`` says which, once for every command (10 against 7)."""

    exit_code = 7

    def __init__(
        self, message: str, *, status: int | None = None, temporary: bool = False, details: str = "",
        unanswered: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(message, details=details)
        self.status = status
        self.temporary = temporary
        self.unanswered = unanswered
        if unanswered and type(self).exit_code == 7:
            self.exit_code = 10  # a registry that is down: StackError's code, wherever it is raised


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


def is_down(exc: BaseException) -> bool:
    """Whether ``exc`` says a registry (or the engine) is down: exit 10, "retry later". A
    registry that answered against the protocol (not HTTP, HTML for a tag list, a redirect loop,
    a body that trickles, a list that never ends) is not down: that is exit 7."""
    return isinstance(exc, StackError) or (isinstance(exc, WireError) and exc.unanswered)


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


class NeedsPatch(ReleaseError):
    """``watch``: a published release needs a patch (a fixable advisory, a base that moved) or
    has an open finding past its SLA. Nothing is wrong with the command; something is due."""

    exit_code = 15


class ReleaseWithdrawn(ReleaseError):
    """A command refuses a withdrawn release (``promote``): reinstate it first, or promote
    another."""

    exit_code = 16


class PerformanceRegression(ReleaseError):
    """The evaluation gate found a regression beyond the manifest's threshold over its whole
    confidence interval, not accepted by the manifest. Nothing is published; ``evaluation`` keeps
    what was measured (the record's entry), for the failure summary (``release --json``)."""

    exit_code = 17

    def __init__(self, message: str, *, evaluation: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.evaluation = evaluation


class EvaluationFailed(ReleaseError):
    """The evaluation could not be made: the workload printed nothing or no figures, exited
    non-zero, ran past the stage's time budget, or the budget allowed too few rounds; this image
    cannot run its plain workload, the engine would not run it, or two arms' figures are too far
    apart for a ratio. Nothing is published (a release may skip the stage with
    ``--no-evaluate REASON``)."""

    exit_code = 18


class PreflightFailed(ReleaseError):
    """A dry run's checks found what would stop the real run; it exits as that run would."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --- the documented exit codes -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ExitCode:
    """One exit status as a user meets it: what it means, and an example of what ends in it."""

    code: int
    meaning: str
    example: str


INTERNAL_ERROR = 70  # only ever a bug of ours: no user input may end in it
INTERRUPTED = 130  # Ctrl-C; other signals end in 128 + their number

EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(code=0, meaning="success", example="`validate`: 3 manifests valid"),
    ExitCode(
        code=1,
        meaning="a generated file is stale (`render --check`, `docs --check`)",
        example="`render --all --check`: 1 generated file(s) are stale: "
        "images/training-cpu-pytorch/25.03/Dockerfile; run: xpu-release render --all",
    ),
    ExitCode(
        code=2,
        meaning="an invalid manifest, image definition or VEX file (every problem listed with "
        "file:line:col); also a command-line usage error (Click's)",
        example="manifests/training-cpu-pytorch/25.03.yaml:39:14: components.ray.version: '2.43.0 ' "
        "is not a valid version",
    ),
    ExitCode(
        code=3,
        meaning="bad configuration or option: the registries file, the repository's layout, an "
        "option's or a setting's value",
        example="registries override /nonexistent does not exist",
    ),
    ExitCode(
        code=4,
        meaning="the lock: pins that do not resolve, a committed lock that is missing or stale, "
        "a base tag that moved since it was pinned",
        example="images/training-cpu-pytorch/25.04/requirements.lock does not exist; run "
        "`xpu-release lock training-cpu-pytorch:25.04` and commit it",
    ),
    ExitCode(
        code=5,
        meaning="the build failed, or two builds differ (`repro`)",
        example="`repro`: xpu-fixture:1.0 is not reproducible: sha256:7d0c… ≠ sha256:a31f…",
    ),
    ExitCode(
        code=6,
        meaning="a smoke test failed in the built image (or it has not passed them): nothing is published",
        example="1 smoke check(s) failed for xpu-fixture:1.0; it must not be published",
    ),
    ExitCode(
        code=7,
        meaning="publish, verify or mirror failed at an endpoint: a push or copy failed, a registry "
        "answered against the protocol or its TLS certificate did not verify, an endpoint does not "
        "serve the release as recorded",
        example="`verify --deep`: an endpoint's blob does not hash to its digest, or an eStargz "
        "layer's TOC does not hold (the endpoint and the blob named)",
    ),
    ExitCode(
        code=8,
        meaning="a registry refused our credentials, or we have none for it",
        example="public (127.0.0.1:15001) refused our credentials (401)",
    ),
    ExitCode(
        code=9,
        meaning="an immutable version tag already holds other content: nothing was pushed",
        example="training-cpu-pytorch:25.03 is already published with other content; version tags "
        "are immutable",
    ),
    ExitCode(
        code=10,
        meaning="the Docker engine, or a registry the command needs, does not answer: no connection, no "
        "answer within the command's deadline, or only 'try later' (429, 5xx) through every retry; "
        "retry later",
        example="no Docker engine answers at the default socket; start one with: ci/local-stack.sh up",
    ),
    ExitCode(
        code=11,
        meaning="not found: an image, version, manifest or record; a base release not yet published",
        example="no image 'nope' under manifests (known: pytorch-cpu-sdk, training-cpu-pytorch, "
        "training-xpu-pytorch)",
    ),
    ExitCode(
        code=12,
        meaning="a damaged file: a release record that is not what xpu-release wrote (a directory, "
        "a FIFO, edited by hand, of another shape), checked against its schema on every read; a "
        "layout to mirror from whose blob is missing, not its digest's bytes, or an eStargz layer "
        "whose TOC does not hold",
        example="out/releases/training-cpu-pytorch/25.03.json: the release record has no 'ref', …",
    ),
    ExitCode(
        code=13,
        meaning="the output cannot be written: stdout or stderr closed or full, an output file or "
        "folder that cannot be made",
        example="/dev/full: cannot write the notes (No space left on device)",
    ),
    ExitCode(
        code=14,
        meaning="the vulnerability gate stops the release: nothing is published",
        example="the vulnerability gate stops training-cpu-pytorch:25.03: nothing is published",
    ),
    ExitCode(
        code=15,
        meaning="`watch`: a published release needs a patch (a fixable advisory, a moved base) or is out "
        "of its SLA; `watch --release`: one still does after the patches it could make. A release "
        "that could not be checked ends in its own error's code instead",
        example="training-cpu-pytorch:25.03  needs a patch: CVE-2026-0001 (high) in accelerate 1.5.2: "
        "fixed in 1.6.0",
    ),
    ExitCode(
        code=16,
        meaning="the release is withdrawn and the command refuses it (`promote`): nothing was copied",
        example="training-cpu-pytorch:25.04 is withdrawn 2026-12-05T10:00:00Z by ci: ray crashes; "
        "nothing was promoted (`xpu-release reinstate` undoes the withdrawal)",
    ),
    ExitCode(
        code=17,
        meaning="the evaluation gate stops the release: a regression beyond the manifest's threshold "
        "over its whole confidence interval, not accepted: nothing is published",
        example="the evaluation gate stops training-cpu-pytorch:25.04: plain against 25.03: "
        "0.52x [0.49, 0.55] (threshold 10 %)",
    ),
    ExitCode(
        code=18,
        meaning="the evaluation could not be made: the workload printed nothing or no figures, exited "
        "non-zero, ran past the stage's time budget, cannot run its plain workload in this image, or the "
        "engine would not run it; or two images' figures are too far apart to compare: nothing is published",
        example="training-cpu-pytorch:25.04 plain: the workload printed nothing on stdout; it must print "
        "its figures as one JSON line",
    ),
    ExitCode(
        code=INTERNAL_ERROR,
        meaning="an internal error: only ever a bug of ours, never the user's mistake (`--debug` "
        "shows the traceback); please report it",
        example="internal error: KeyError: 'x' (rerun with --debug for a traceback)",
    ),
    ExitCode(
        code=129,
        meaning="hung up (SIGHUP): the throwaway containers are removed first",
        example="the terminal of an interactive run closed",
    ),
    ExitCode(
        code=INTERRUPTED,
        meaning="interrupted (Ctrl-C): the throwaway containers are removed first",
        example="Ctrl-C during a build",
    ),
    ExitCode(
        code=143,
        meaning="terminated (SIGTERM): the throwaway containers are removed first",
        example="a CI job cancelled",
    ),
)


def endpoints_failed(text: str, errors: list[ReleaseError], endpoints: int) -> ReleaseError:
    """The error of a question asked at ``endpoints`` endpoints, ``errors`` of which failed: 8 when
    every endpoint refused our credentials (a rerun cannot help), 10 when every endpoint is down
    (``is_down``: retry later), else 7 (rerun to finish)."""
    if len(errors) >= endpoints and all(isinstance(e, RegistryAuthError) for e in errors):
        return RegistryAuthError(text)
    if len(errors) >= endpoints and all(is_down(e) for e in errors):
        return StackError(text)
    return PublishError(text)
