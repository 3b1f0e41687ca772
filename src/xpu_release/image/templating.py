"""The Jinja2 environment every generated file is rendered with (Dockerfiles, release notes)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path

from ..errors import ConfigError
from ..files import kind_of
from ..guard.reading import read_file
from ..guard.shown import shown

MAX_TEMPLATE_BYTES = 1 << 20  # templates/ holds a few KB each


class _GuardedLoader(jinja2.BaseLoader):
    """``templates/`` read as the repository's other files are: through the guarded layer. A
    template that is not a regular file (a FIFO, a device), larger than ``MAX_TEMPLATE_BYTES``
    (a sparse file of gigabytes) or not UTF-8 is a ConfigError naming it (exit 3), never a
    hang, a gigabyte in memory or a traceback."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        pieces = split_template_path(template)  # no "..": TemplateNotFound
        path = self.folder.joinpath(*pieces)
        what = f"templates/{template}"
        if not path.is_symlink() and kind_of(path) == "missing":
            raise jinja2.TemplateNotFound(template)
        # Never through a link (a partial linked to ~/.netrc would print it in a diff): the
        # template and each folder between it and templates/ must be what they are named.
        linked = [
            p for p in (self.folder.joinpath(*pieces[: n + 1]) for n in range(len(pieces))) if p.is_symlink()
        ]
        if linked:
            name = linked[0].relative_to(self.folder).as_posix()
            msg = f"templates/{name} is a symbolic link; templates are files of the repository"
            raise ConfigError(msg)
        data = read_file(path, what=what, limit=MAX_TEMPLATE_BYTES, error=ConfigError)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{what}: not UTF-8 text (byte {exc.start}); templates are UTF-8"
            raise ConfigError(msg) from None
        mtime = path.stat().st_mtime_ns

        def uptodate() -> bool:
            try:
                return path.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return text, str(path), uptodate


@functools.cache
def _environment(templates: Path) -> jinja2.Environment:
    """One environment per templates folder and process: each template is compiled once, and
    again when its file changes."""
    return jinja2.Environment(
        loader=_GuardedLoader(templates),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Dockerfiles and Markdown, not HTML; values are validated instead
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_template(root: Path, name: str, **context: Any) -> str:
    """Render ``templates/<name>`` strictly (an undefined value is an error, never empty) and
    tidy the result: trailing spaces dropped, runs of blank lines collapsed to one."""
    env = _environment(root.resolve() / "templates")
    try:
        text = env.get_template(name).render(**context)
    except jinja2.TemplateError as exc:
        msg = f"templates/{name}: {exc}"
        raise ConfigError(msg) from None
    except (RecursionError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError) as exc:
        # A template is outside data (a pull request writes it): an include of itself, a
        # division by zero, an operation on the wrong type are its mistakes, said as such.
        msg = f"templates/{name}: rendering failed ({type(exc).__name__}: {shown(str(exc), 200)})"
        raise ConfigError(msg) from None
    # Split on "\n" only: str.splitlines() also breaks at U+2028, NEL, VT, FF and more, and
    # re-joining with "\n" would turn such a character inside a value into a new instruction.
    lines: list[str] = []
    for line in text.split("\n"):
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"
