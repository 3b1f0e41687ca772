"""What a person sees: data on stdout, every message on stderr (so that ``xpu-release notes … >
file`` and pipes carry only data), ``-q`` for errors only, ``-v`` for the details of a failure,
and colour on a terminal unless ``NO_COLOR`` is set (https://no-color.org)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, Any

import click


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
    if os.environ.get("NO_COLOR") or stream is None:
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


def error_prefix() -> str:
    return paint("error:", "red", bold=True)


STATUS_COLOURS = {"done": "green", "skipped": "cyan", "planned": "cyan", "failed": "red", "FAILED": "red"}


def status(word: str, width: int = 8, stream: IO[Any] | None = None) -> str:
    """A stage's status, padded, in its colour on a terminal."""
    padded = f"{word:<{width}}"
    colour = STATUS_COLOURS.get(word)
    return paint(padded, colour, stream=stream or sys.stdout) if colour else padded
