"""No value can add a Dockerfile instruction through a character that *some* line splitter
treats as a line break (Python's str.splitlines(), Docker's parser, YAML), or through any other
control or format character: every constrained string refuses them, in every field that reaches
a template, and rendering never re-splits text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from xpu_release.image.templating import render_template

from ..helpers import run, write_manifest
from ..image.test_render import FULL

# Each character Python's str.splitlines() breaks at, the two Docker and YAML break at, and
# control and format characters that can hide an instruction from a reader.
BREAKERS = {
    "LF": "\n",
    "CR": "\r",
    "VT": "\x0b",
    "FF": "\x0c",
    "FS": "\x1c",
    "GS": "\x1d",
    "RS": "\x1e",
    "NEL": "\x85",
    "LS": "\u2028",
    "PS": "\u2029",
    "ESC": "\x1b",
    "DEL": "\x7f",
    "TAB": "\t",
    "RLO": "\u202e",
    "ZWSP": "\u200b",
}


# Every manifest field that a Dockerfile template reads.
FIELDS: dict[str, tuple[str | int, ...]] = {
    "component name": ("components", "blob", "name"),
    "component version": ("components", "packaging", "version"),
    "pip package": ("components", "packaging", "package"),
    "artifact url": ("components", "blob", "url"),
    "artifact dest": ("components", "blob", "dest"),
    "env value": ("env", "DEMO_MODE"),
    "os package": ("os_packages", 0),
    "base repository": ("base", "repository"),
    "base tag": ("base", "tag"),
    "base python": ("base", "python"),
}


def _payload(ch: str) -> str:
    return f"x{ch}RUN touch /pwned #"


def _manifest(field: str, ch: str) -> str:
    data = yaml.safe_load(FULL)
    data["components"]["blob"]["name"] = "Blob"
    data["components"]["packaging"]["package"] = "packaging"
    path = FIELDS[field]
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = _payload(ch)
    # JSON is YAML: every character travels as a \\uXXXX escape in a double-quoted string.
    return json.dumps(data)


@pytest.mark.parametrize("ch", BREAKERS.values(), ids=BREAKERS.keys())
@pytest.mark.parametrize("field", FIELDS)
def test_no_field_accepts_a_line_break_or_control_character(repo: Path, field: str, ch: str) -> None:
    write_manifest(repo, "demo", "1.0", _manifest(field, ch))

    result = run(repo, "render", "demo:1.0", "--stdout")

    assert result.exit_code == 2, (field, result.stdout)
    assert "RUN touch" not in result.stdout
    assert not (repo / "images" / "demo").exists()


@pytest.mark.parametrize("ch", BREAKERS.values(), ids=BREAKERS.keys())
def test_an_env_name_refuses_a_line_break(repo: Path, ch: str) -> None:
    data = yaml.safe_load(FULL)
    data["env"] = {f"DEMO{ch}RUN_touch": "1"}
    write_manifest(repo, "demo", "1.0", json.dumps(data))

    result = run(repo, "render", "demo:1.0", "--stdout")

    assert result.exit_code == 2
    assert "RUN_touch" not in result.stdout


def test_the_error_names_the_character_and_the_place(repo: Path) -> None:
    write_manifest(repo, "demo", "1.0", _manifest("component name", "\u2028"))

    result = run(repo, "validate", "demo:1.0")

    assert result.exit_code == 2
    assert "components.blob.name" in result.stderr
    assert "U+2028 (LINE SEPARATOR)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("ch", ["\u2028", "\x85", "\x0c"], ids=["LS", "NEL", "FF"])
def test_the_registries_file_refuses_a_line_break_in_a_host(repo: Path, ch: str) -> None:
    text = (repo / "registries.yaml").read_text(encoding="utf-8")
    bad = text.replace("host: base-images.registry.invalid", f'host: "x{json.dumps(ch)[1:-1]}RUN id"')
    (repo / "registries.yaml").write_text(bad, encoding="utf-8")

    result = run(repo, "render", "training-cpu-pytorch:25.03", "--stdout")

    assert result.exit_code in (2, 3)
    assert "RUN id" not in result.stdout


def test_rendering_never_splits_at_a_unicode_line_separator(repo: Path) -> None:
    (repo / "templates" / "Probe.j2").write_text("FROM scratch\nLABEL a={{ value }}\n")

    text = render_template(repo, "Probe.j2", value="x\u2028RUN id")

    # The character stays inside its line: no new line, so no new instruction.
    assert text.split("\n") == ["FROM scratch", "LABEL a=x\u2028RUN id", ""]


# The SDK shape: pip installs into the base interpreter (`pip.install: system`, where the
# Dockerfile runs `<base.python> -m pip … --root /out`), and a base that is another family's
# release (`base.image` + `base.version`, which become the default BASE_IMAGE).
SDK_BASE = {"image": "pytorch-cpu-sdk", "version": "2.13.0", "python": "/usr/bin/python3", "component": "sdk"}
SDK_FIELDS = {
    "system-mode base python": "python",
    "family base image": "image",
    "family base version": "version",
}


def _render_sdk_shape(repo: Path, **base: str) -> Any:
    data = yaml.safe_load(FULL)
    data["pip"] = {**(data.get("pip") or {}), "install": "system"}
    data["base"] = {**SDK_BASE, **base}
    write_manifest(repo, "demo", "1.0", json.dumps(data))
    return run(repo, "render", "demo:1.0", "--stdout")


@pytest.mark.parametrize("ch", BREAKERS.values(), ids=BREAKERS.keys())
@pytest.mark.parametrize("field", SDK_FIELDS)
def test_the_sdk_shapes_refuse_a_line_break_or_control_character(repo: Path, field: str, ch: str) -> None:
    result = _render_sdk_shape(repo, **{SDK_FIELDS[field]: _payload(ch)})

    assert result.exit_code == 2, (field, result.stdout)
    assert "RUN touch" not in result.stdout
    assert not (repo / "images" / "demo").exists()


def test_the_sdk_shape_renders_when_its_values_are_plain_tokens(repo: Path) -> None:
    # The control for the test above: the same manifest with plain values renders.
    result = _render_sdk_shape(repo)

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "/usr/bin/python3 -m pip install" in result.stdout
