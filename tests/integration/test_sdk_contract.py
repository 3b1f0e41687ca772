"""The SDK base contract on the local stack: training-cpu-pytorch builds on the pytorch-cpu-sdk
release and uses its PyTorch byte for byte; nothing can replace it, at lock time or in a
container of the image. (A change to the SDK reaches what builds on it, parents first:
test_second_month.py.)"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from xpu_release.image.engine import Engine

from .conftest import SDK, Cli

pytestmark = pytest.mark.integration

CPU = "training-cpu-pytorch:25.03"
TORCH = "/usr/local/lib/python3.11/dist-packages/torch/"


def _tiny_wheel(folder: Path, name: str, version: str, requires: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: {requires}\n",
        )
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_the_lock_records_the_sdks_torch_and_installs_it_nowhere(fixture_cli: Cli) -> None:
    lock = (fixture_cli.root / "images" / "training-cpu-pytorch" / "25.03" / "requirements.lock").read_text()

    provided = [line for line in lock.splitlines() if line.startswith("# provided: ")]
    locked = [line.split("==")[0] for line in lock.splitlines() if line and not line.startswith("#")]
    assert "# provided: torch==2.13.0+cpu" in provided
    assert "torch" not in locked
    assert {"transformers", "accelerate", "ray"} <= set(locked)
    assert lock.splitlines()[3].startswith(f"# base: {SDK}@sha256:")


def test_a_pin_that_needs_another_torch_fails_lock_naming_both(fixture_cli: Cli, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _tiny_wheel(wheels, "needs-newer-torch", "1.0", "torch>=2.14")
    folder = fixture_cli.root / "manifests" / "needs-torch"
    folder.mkdir()
    (folder / "1.0.yaml").write_text(
        'image: needs-torch\nversion: "1.0"\ntitle: {en: t, zh: t}\nscenario: [training]\n'
        "framework: pytorch\naccelerator: {name: CPU, kind: cpu}\n"
        f"base: {{image: pytorch-cpu-sdk, version: '2.13.0', python: /usr/bin/python3, provides: [torch]}}\n"
        f"pip: {{find_links: ['{wheels}']}}\n"
        "components:\n  needs-newer-torch: {kind: pip, version: '1.0'}\n"
    )
    try:
        result = fixture_cli.run("lock", "needs-torch:1.0", timeout=900)
    finally:
        shutil.rmtree(folder)

    assert result.returncode == 4, result.stderr
    assert "against what its base provides (torch==2.13.0+cpu" in result.stderr
    assert "needs-newer-torch" in result.stderr
    assert "torch>=2.14" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (fixture_cli.root / "images" / "needs-torch" / "1.0" / "requirements.lock").exists()


@pytest.fixture(scope="module")
def cpu_image(fixture_cli: Cli) -> str:
    fixture_cli.run("build", CPU, check=True, timeout=1800)
    return CPU


def test_the_image_starts_with_the_sdks_layers_and_imports_its_torch(cpu_image: str, engine: Engine) -> None:
    sdk_layers = engine.inspect_raw(SDK)["RootFS"]["Layers"]
    layers = engine.inspect_raw(cpu_image)["RootFS"]["Layers"]

    out = engine.output(
        cpu_image, ["python", "-c", "import torch; print(torch.__file__, torch.__version__)"], purpose="check"
    )

    assert layers[: len(sdk_layers)] == sdk_layers
    assert out.split() == [TORCH + "__init__.py", "2.13.0+cpu"]


def test_a_pip_install_of_another_torch_in_the_image_fails_and_torch_stays(
    cpu_image: str, engine: Engine
) -> None:
    script = (
        "import subprocess, sys, zipfile, importlib.metadata as m\n"
        "info = 'torch-1.0.0.dist-info'\n"
        "with zipfile.ZipFile('/tmp/torch-1.0.0-py3-none-any.whl', 'w') as z:\n"
        "    z.writestr(info + '/METADATA', 'Metadata-Version: 2.1\\nName: torch\\nVersion: 1.0.0\\n')\n"
        "    z.writestr(info + '/WHEEL', 'Wheel-Version: 1.0\\nTag: py3-none-any\\n')\n"
        "    z.writestr(info + '/RECORD', '')\n"
        "p = subprocess.run(['pip', 'install', '--no-index', '/tmp/torch-1.0.0-py3-none-any.whl'],\n"
        "                   capture_output=True, text=True)\n"
        "print(p.returncode, 'conflict' in (p.stdout + p.stderr).lower(), m.version('torch'))\n"
    )

    out = engine.output(cpu_image, ["python", "-c", script], purpose="check")

    returncode, conflict, version = out.split()
    assert returncode != "0"
    assert conflict == "True"
    assert version == "2.13.0+cpu"
