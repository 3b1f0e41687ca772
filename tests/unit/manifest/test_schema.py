"""The published JSON Schema (for editors) agrees with `validate`: every manifest `validate`
accepts, child manifests included, validates against it, and its patterns are JavaScript regexes."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from ..helpers import check_jsonschema, run, write_manifest

XPU = "training-xpu-pytorch"
CPU = "training-cpu-pytorch"


def validator(repo: Path) -> Draft202012Validator:
    return _validator((repo / "schema" / "manifest.schema.json").read_text())


@functools.cache
def _validator(text: str) -> Draft202012Validator:
    """The schema's validator, once it passes the metaschema: checked once per text (the
    metaschema check is most of these tests' time)."""
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(repo: Path, manifest: Path) -> list[str]:
    data = yaml.safe_load(manifest.read_text())
    return [e.message for e in validator(repo).iter_errors(data)]


def test_the_schema_passes_check_jsonschema_metaschema_with_javascript_regexes(repo: Path) -> None:
    # check-jsonschema checks every `pattern` with an ECMAScript regex engine, as editors use.
    result = check_jsonschema("--check-metaschema", str(repo / "schema" / "manifest.schema.json"))

    assert result.exit_code == 0, result.output
    assert "ok -- validation done" in result.output


def test_every_committed_manifest_validates_against_the_schema(repo: Path) -> None:
    manifests = sorted((repo / "manifests").rglob("*.yaml"))

    assert manifests
    for path in manifests:
        assert schema_errors(repo, path) == [], path


def test_a_child_written_by_new_version_validates_against_the_schema(repo: Path) -> None:
    result = run(repo, "new-version", f"{CPU}:25.04", "--from", "25.03", "--set", "accelerate=1.6.0")
    assert result.exit_code == 0, result.output

    child = repo / "manifests" / CPU / "25.04.yaml"
    assert "kind" not in child.read_text()  # inherited, as validate allows
    assert schema_errors(repo, child) == []
    assert run(repo, "validate").exit_code == 0


def test_a_child_that_overrides_prose_and_drops_a_component_validates(repo: Path) -> None:
    child = write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n'
        "components:\n  vllm:\n    version: 0.8.0\n  eic: null\n"
        "known_issues: []\nrelease:\n  bug_fixes: []\n",
    )

    assert run(repo, "validate").exit_code == 0
    assert schema_errors(repo, child) == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("components:\n  vllm:\n    versoin: 0.8.0\n", "unknown key"),
        ('components:\n  vllm:\n    name: "vLLM\\u2028RUN touch /pwned"\n', "line separator"),
        ("floating_tags: [-latest]\n", "tag grammar"),
    ],
)
def test_the_schema_refuses_what_validate_refuses_in_a_child(repo: Path, text: str, why: str) -> None:
    child = write_manifest(repo, XPU, "25.04", f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n{text}')

    assert run(repo, "validate").exit_code != 0, why
    assert schema_errors(repo, child) != [], why


def test_a_release_without_extends_must_be_complete_in_the_schema(repo: Path) -> None:
    root = write_manifest(repo, XPU, "26.01", f'image: {XPU}\nversion: "26.01"\n')

    assert run(repo, "validate").exit_code != 0
    assert any("required" in e for e in schema_errors(repo, root))
