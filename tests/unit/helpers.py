from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from xpu_release.cli import cli


def run(root: Path, *args: str, input: str | None = None) -> Result:
    """Invoke the CLI against ``root`` the way a user would, capturing stdout and stderr."""
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input, catch_exceptions=False)


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
