from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from xpu_release.cli import cli
from xpu_release.errors import EXIT_CODES, INTERNAL_ERROR


def user_exit_codes() -> frozenset[int]:
    """Every documented code a run may end in whatever the input: the table without 70."""
    return frozenset(c.code for c in EXIT_CODES) - {INTERNAL_ERROR}


def run(root: Path, *args: str, input: str | None = None) -> Result:
    """Invoke the CLI against ``root`` the way a user would, capturing stdout and stderr."""
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input, catch_exceptions=False)


def check_jsonschema(*args: str) -> Result:
    """check-jsonschema with ``args``, its Click command run in this process as ``python -m
    check_jsonschema`` runs it: the same check and exit code, without starting an interpreter
    that imports jsonschema again (about a second of CPU a call)."""
    from check_jsonschema import main

    return CliRunner().invoke(main, list(args))


def write_manifest(root: Path, image: str, version: str, text: str) -> Path:
    path = root / "manifests" / image / f"{version}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


MINIMAL = """\
image: demo
version: "1.0"
title: {en: demo 1.0, zh: demo 1.0}
scenario: [training]
framework: pytorch
accelerator: {name: CPU, kind: cpu}
base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}
components:
  six:
    kind: pip
    version: 1.16.0
"""


def on_a_terminal(argv: list[str], env: dict[str, str] | None = None) -> str:
    """What a person sees: a process's stderr and stdout on a pseudo-terminal."""
    import os
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the program on a terminal
        os.environ.update(env or {})
        os.execv(argv[0], argv)
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")
