"""Checks every image gets, one per fact of its manifest (testinfra, docker backend)."""

from __future__ import annotations

import json
from typing import Any

import docker
import pytest


def _python_json(host: Any, spec: dict[str, Any], script: str) -> Any:
    result = host.run(f"{spec['python']} - <<'PY'\n{script}\nPY")
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_image_runs_as_the_platform_it_is_built_for(host: Any, spec: dict[str, Any]) -> None:
    # An image of another platform runs here under emulation (binfmt_misc): `uname -m` names
    # the machine its binaries are for, so a linux/arm64 image that is really x86-64 fails.
    machine = host.run("uname -m").stdout.strip()
    assert machine == spec["machine"], f"the image runs as {machine}; it is built for {spec['platform']}"


def test_pin_is_installed_at_exactly_its_version(
    host: Any, spec: dict[str, Any], pin: dict[str, str]
) -> None:
    found = _python_json(
        host,
        spec,
        "import importlib.metadata as m, json\n"
        f"try:\n    print(json.dumps(m.version({pin['package']!r})))\n"
        "except m.PackageNotFoundError:\n    print('null')",
    )
    assert found == pin["version"], f"{pin['package']}: manifest pins {pin['version']}, image has {found}"


def test_pip_check_is_clean(host: Any, spec: dict[str, Any]) -> None:
    if spec["pip_path"] is None:
        pytest.skip("the image's own interpreter has no pip (an SDK image): nothing to check with")
    result = host.pip.check(pip_path=spec["pip_path"])
    assert result.rc == 0, result.stdout + result.stderr


# --- what the base provides: used, never replaced ---------------------------------------------

_RECORD_CHECK = """
import base64, hashlib, importlib.metadata as m, json
d = m.distribution({name!r})
bad, checked = [], 0
for f in d.files or ():
    if f.hash is None:
        continue
    h = hashlib.new(f.hash.mode)
    with open(f.locate(), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    checked += 1
    if base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode() != f.hash.value:
        bad.append(str(f))
out = {{"version": d.version, "where": str(d.locate_file("")), "checked": checked, "bad": bad[:10]}}
print(json.dumps({{**out, "record": d.files is not None}}))
"""


_TINY_WHEEL = """
import json, re, tempfile, zipfile
name = re.sub(r"[-_.]+", "_", {name!r})
info = name + "-0.0.1.dist-info"
path = tempfile.mkdtemp(prefix="xpu-smoke-") + "/" + name + "-0.0.1-py3-none-any.whl"
with zipfile.ZipFile(path, "w") as z:
    z.writestr(info + "/METADATA", "Metadata-Version: 2.1\\nName: " + {name!r} + "\\nVersion: 0.0.1\\n")
    z.writestr(info + "/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    z.writestr(info + "/RECORD", "")
print(json.dumps(path))
"""


def test_a_distribution_the_base_provides_is_unchanged(
    host: Any, spec: dict[str, Any], provided: dict[str, str]
) -> None:
    # Its version is the one the lock found in the base, and every file its RECORD lists still
    # hashes to what the RECORD says: no layer replaced or patched it.
    got = _python_json(host, spec, _RECORD_CHECK.format(name=provided["name"]))
    assert got["version"] == provided["version"]
    assert got["bad"] == [], f"{provided['name']}: files differ from its RECORD: {got['bad']}"
    assert got["checked"] > 0 or not got["record"], f"{provided['name']}: its RECORD lists no hashes"
    assert not got["where"].startswith("/opt/venv/")


def test_a_distribution_no_layer_may_replace_imports_from_the_base(
    host: Any, spec: dict[str, Any], sacred: dict[str, str]
) -> None:
    got = _python_json(
        host,
        spec,
        "import importlib, importlib.metadata as m, json\n"
        f"d = m.distribution({sacred['name']!r})\n"
        "tops = (d.read_text('top_level.txt') or '').split() or "
        "sorted({str(f).split('/')[0] for f in d.files if '/' in str(f) and '.dist-info' not in str(f)})\n"
        "mod = importlib.import_module(tops[0])\n"
        "print(json.dumps({'file': mod.__file__, 'where': str(d.locate_file(''))}))",
    )
    assert got["file"].startswith(got["where"].rstrip("/") + "/"), got
    assert not got["file"].startswith("/opt/venv/"), got


def test_a_pip_install_of_another_version_is_refused_and_changes_nothing(
    host: Any, spec: dict[str, Any], sacred: dict[str, str]
) -> None:
    if spec["pip_path"] is None:
        pytest.skip("the image's own interpreter has no pip (an SDK image): nothing can reinstall it")
    # A tiny wheel of the same name at another version, made in the container (no network).
    wheel = _python_json(host, spec, _TINY_WHEEL.format(name=sacred["name"]))
    result = host.run(f"{spec['pip_path']} install --no-index --disable-pip-version-check {wheel}")
    host.run("rm -rf %s", wheel.rsplit("/", 1)[0])  # leaves nothing for the leftovers check
    after = _python_json(
        host, spec, f"import importlib.metadata as m, json; print(json.dumps(m.version({sacred['name']!r})))"
    )
    assert result.rc != 0, result.stdout
    assert "conflict" in (result.stdout + result.stderr).lower(), result.stdout + result.stderr
    assert after == sacred["version"]


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
