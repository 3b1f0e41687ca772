"""The Jinja2 environment every generated file is rendered with (Dockerfiles, release notes)."""

from __future__ import annotations

import functools
from pathlib import Path
from types import CodeType
from typing import Any

import jinja2
import jinja2.bccache

from ..errors import ConfigError


class _CompiledOnce(jinja2.BytecodeCache):
    """Each template's compiled code, kept for this process by the template's name, whatever
    folder it was read from: another copy of the same templates (a second checkout, a test's copy
    of the repository) compiles nothing again. Jinja compares the source's checksum before it
    runs kept code, so a template whose text differs is compiled anew, never run stale."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return super().get_cache_key(name)  # the folder left out: the checksum decides

    def get_bucket(
        self, environment: jinja2.Environment, name: str, filename: str | None, source: str
    ) -> jinja2.bccache.Bucket:
        bucket = super().get_bucket(environment, name, filename, source)
        code = bucket.code
        if code is not None and filename is not None and code.co_filename != filename:
            bucket.code = _refiled(code, filename)  # kept code named for its own file (tracebacks)
        return bucket

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        kept = self._code.get(bucket.key)
        if kept is not None:
            bucket.bytecode_from_string(kept)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


def _refiled(code: CodeType, filename: str) -> CodeType:
    """``code`` and the code inside it (the template's blocks and macros), named ``filename``."""
    inner = tuple(_refiled(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=inner)


_COMPILED = _CompiledOnce()  # every environment below has the same options: their code is alike


@functools.cache
def _environment(templates: Path) -> jinja2.Environment:
    """One environment per templates folder and process: each template is compiled once (Jinja
    still checks a template file's mtime on use, so an edited one is compiled again)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        bytecode_cache=_COMPILED,
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
    # Split on "\n" only: str.splitlines() also breaks at U+2028, NEL, VT, FF and more, and
    # re-joining with "\n" would turn such a character inside a value into a new instruction.
    lines: list[str] = []
    for line in text.split("\n"):
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"
