"""Checks every image gets, one per fact of its manifest (testinfra, docker backend)."""

from __future__ import annotations

from typing import Any

import docker

from xpu_release.manifest.model import canonical_name


def test_pin_is_installed_at_exactly_its_version(
    host: Any, spec: dict[str, Any], pin: dict[str, str]
) -> None:
    installed = {
        canonical_name(k): v["version"] for k, v in host.pip.get_packages(pip_path=spec["pip_path"]).items()
    }
    found = installed.get(canonical_name(pin["package"]))
    assert found == pin["version"], f"{pin['package']}: manifest pins {pin['version']}, image has {found}"


def test_pip_check_is_clean(host: Any, spec: dict[str, Any]) -> None:
    result = host.pip.check(pip_path=spec["pip_path"])
    assert result.rc == 0, result.stdout + result.stderr


def test_module_imports(host: Any, spec: dict[str, Any], module: str) -> None:
    result = host.run(f"{spec['python']} -c %s", f"import {module}")
    assert result.rc == 0, result.stderr


def test_environment_variable_is_set(host: Any, env_var: tuple[str, str]) -> None:
    name, value = env_var
    assert host.environment().get(name) == value


def test_required_file_exists(host: Any, path: str) -> None:
    assert host.file(path).exists


def test_tool_is_on_path(host: Any, tool: str) -> None:
    assert host.exists(tool), f"{tool} is not on PATH"


def test_artifact_is_unpacked(host: Any, artifact: dict[str, str]) -> None:
    dest = host.file(artifact["dest"])
    assert dest.is_directory
    assert dest.listdir(), f"{artifact['dest']} is empty"


def test_label_matches_the_manifest(spec: dict[str, Any], label: tuple[str, str]) -> None:
    key, expected = label
    labels = docker.from_env(version="auto").api.inspect_image(spec["image_id"])["Config"]["Labels"] or {}
    assert labels.get(key) == expected


def test_no_wheels_or_caches_are_left_in_the_image(host: Any) -> None:
    # /usr/share/python-wheels belongs to the base's python3-venv (ensurepip), not to our layers.
    leftovers = host.run(
        "find / -xdev -path /usr/share/python-wheels -prune -o \\( -name '*.whl' -o -path '*/pip/http*' "
        "-o -path '/var/lib/apt/lists/?*' -o -path '/tmp/wheels*' -o -path '/tmp/artifact*' \\) -print"
    )
    assert leftovers.stdout.strip() == ""
