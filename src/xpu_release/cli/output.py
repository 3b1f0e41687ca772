"""What a person sees: data on stdout, every message on stderr (so that ``xpu-release notes … >
file`` and pipes carry only data), ``-q`` for errors only, ``-v`` for the details of a failure,
and colour on a terminal unless ``NO_COLOR`` is set (https://no-color.org)."""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from ..errors import OutputError, ReleaseError
from ..guard.shown import shown, shown_lines
from ..settings import COLOUR_ENV

if TYPE_CHECKING:
    from ..release.model.plan import Plan


@dataclass
class Verbosity:
    quiet: bool = False
    verbose: bool = False


def verbosity() -> Verbosity:
    """The running command's ``-q``/``-v`` (defaults outside a command)."""
    ctx = click.get_current_context(silent=True)
    found = getattr(ctx.find_root().obj, "verbosity", None) if ctx is not None else None
    return found if isinstance(found, Verbosity) else Verbosity()


def colour_on(stream: IO[Any] | None) -> bool:
    if os.environ.get(COLOUR_ENV) or stream is None:
        return False
    try:
        return stream.isatty()
    except (ValueError, OSError):
        return False


def paint(text: str, fg: str, *, stream: IO[Any] | None = None, bold: bool = False) -> str:
    """``text`` in colour when ``stream`` (stderr by default) is a terminal that wants it."""
    return click.style(text, fg=fg, bold=bold) if colour_on(stream or sys.stderr) else text


def info(message: str) -> None:
    """A message about what was done ("wrote …", "3 manifests valid"): stderr, not with -q."""
    if not verbosity().quiet:
        click.echo(message, err=True)


def notice(message: str) -> None:
    if not verbosity().quiet:
        click.echo(f"{paint('notice:', 'yellow')} {message}", err=True)


def warn(message: str) -> None:
    """What a person must not miss although the command goes on (an answer given against no
    advisory): stderr, even with -q."""
    click.echo(f"{paint('warning:', 'yellow', bold=True)} {message}", err=True)


def error_prefix() -> str:
    return paint("error:", "red", bold=True)


STATUS_COLOURS = {"done": "green", "skipped": "cyan", "planned": "cyan", "failed": "red", "FAILED": "red"}


def status(word: str, width: int = 8, stream: IO[Any] | None = None) -> str:
    """A stage's status, padded, in its colour on a terminal."""
    padded = f"{word:<{width}}"
    colour = STATUS_COLOURS.get(word)
    return paint(padded, colour, stream=stream or sys.stdout) if colour else padded


# --- data to stdout or a file -------------------------------------------------------------


def write_output(output: str | None, data: str | bytes, *, what: str) -> bool:
    """Write a command's data to ``output`` (``-`` or None: stdout), by the rule of
    ``guard.writing.write_named``: a file's folder is made when missing; the file appears whole
    (a temporary file renamed over it) and keeps its mode; a FIFO or a device is written to; a
    link is refused (the system's ``/dev/stdout`` aside). Returns True when a file was written
    (the caller says so on stderr)."""
    if output is None or output == "-":
        if isinstance(data, bytes):
            click.echo(data.decode(), nl=False)
        else:
            click.echo(data, nl=False)
        return False
    from ..guard.named import write_named

    write_named(Path(output), data.encode() if isinstance(data, str) else data, what=what)
    return True


def aligned(rows: Sequence[tuple[str, ...]], width: int = 100) -> list[str]:
    """Rows as a table: each column but the last as wide as its widest cell, so no cell pushes
    the next out of its column. The last cell is kept whole when it is a digest; another (an
    error, said whole on stderr) is cut so the row fits ``width``. Every cell is outside text
    as ``shown`` writes it: no control character reaches the terminal."""
    rows = [tuple(shown(c, max(len(c), 1)) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)] if rows else []
    out = []
    for r in rows:
        head = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  "
        last = r[-1]
        if len(head) + len(last) > width and not last.startswith("sha256:"):
            last = last[: max(10, width - len(head) - 1)] + "…"  # an escape may be cut: it is shown
        out.append((head + last).rstrip())
    return out


def print_plan(plan: Plan, heading: str) -> None:
    """The refs of a plan, per endpoint, then the floating tags that move last."""
    from ..release.model.plan import floating_tags

    click.echo(heading)
    for t in plan.targets:
        click.echo(f"  {t.endpoint.name:<22} {t.version_ref}")
    tags, moves = floating_tags(plan.spec), plan.moves or ()
    stay = [tag for tag in tags if tag not in moves]
    if stay:  # only a later version keeps a tag (the newest of an image is the newest of its line)
        click.echo(f"  {', '.join(stay)} stay where they are: {plan.spec.image}:{plan.newer} is newer")
    for t in plan.targets:
        for tag, ref in zip(tags, t.floating_refs, strict=True):
            if tag in moves:
                click.echo(f"  then move {ref} (after every endpoint verifies)")


LINE_LIMIT = 400  # characters of one error line: echoed input is cut, never a 100 KB line


_CONNECTION_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.ETIMEDOUT}
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF, errno.EROFS}


def as_user_error(exc: BaseException) -> ReleaseError | None:
    """The one rule, applied here and nowhere else: a path the user gave or the repository holds
    that cannot be used, output that cannot be written, a missing external program and a
    malformed setting are the user's situation, each with its exit code (3 configuration, 11 not
    found, 13 output). Anything else escaping a command is a bug of ours (exit 70)."""
    from ..errors import ConfigError, NotFoundError, StackError
    from ..files import describe

    # Docker's APIError and requests' errors are OSErrors with no file name: told apart first, or
    # an engine that refused a request (outside a container's start) was exit 70.
    docker = sys.modules.get("docker.errors")
    if docker is not None and isinstance(exc, docker.DockerException):
        # A malformed DOCKER_HOST, an engine that speaks something else or refuses: the engine.
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StackError(f"the Docker engine cannot be used ({shown(said, 200)}); check DOCKER_HOST")
    # An engine or registry that went away mid-answer: requests', urllib3's (docker-py reads its
    # streams from urllib3 directly) and http.client's errors, and a connection reset, refused,
    # broken or timed out with no file named.
    requests, urllib3 = sys.modules.get("requests.exceptions"), sys.modules.get("urllib3.exceptions")
    # (A broken pipe is our output's reader gone, handled where output is written, not here.)
    dropped = (
        isinstance(exc, http.client.HTTPException | TimeoutError | ConnectionError)
        and not isinstance(exc, BrokenPipeError)
    ) or (isinstance(exc, OSError) and exc.filename is None and exc.errno in _CONNECTION_ERRNOS)
    if (
        dropped
        or (requests is not None and isinstance(exc, requests.RequestException))
        or (urllib3 is not None and isinstance(exc, urllib3.HTTPError))
    ):
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StackError(f"a service did not answer as HTTP should ({shown(said, 200)}); retry later")
    if isinstance(exc, OSError):
        why = describe(exc)
        if exc.filename is None:
            if exc.errno in _OUTPUT_ERRNOS:
                return OutputError(f"cannot write the output ({why})")
            return None
        where = shown(exc.filename, 200)
        if exc.errno in _OUTPUT_ERRNOS:
            return OutputError(f"{where}: cannot write ({why})")
        if isinstance(exc, FileNotFoundError) and "/" not in str(exc.filename):
            return ConfigError(f"{where}: the program is not on PATH; install it")
        if exc.errno == errno.ENOENT:
            return NotFoundError(f"{where}: {why}")
        return ConfigError(f"{where}: {why}")
    return None


def _say_error(exc: ReleaseError) -> None:
    # stderr itself may not be writable: the exit code is then all that is left.
    with contextlib.suppress(OSError):
        click.echo(f"{error_prefix()} {shown_lines(exc.render(), LINE_LIMIT)}", err=True)
        if verbosity().verbose and exc.details:
            click.echo(exc.details, err=True)
