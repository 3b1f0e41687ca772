"""pytorch-cpu-sdk carries PyTorch in the base interpreter's own environment, as an SDK image
does: the system python imports it from there, and it computes."""

from __future__ import annotations

from typing import Any


def test_the_system_python_imports_torch_from_its_own_site_packages(host: Any, spec: dict[str, Any]) -> None:
    result = host.run(
        f"{spec['python']} -c %s",
        "import torch, site; print(torch.__file__); print(site.getsitepackages()[0])",
    )
    assert result.rc == 0, result.stderr
    torch_file, site_dir = result.stdout.split()
    assert torch_file.startswith(site_dir + "/torch/")
    assert not host.file("/opt/venv").exists  # no venv: the packages are the interpreter's own


def test_torch_computes(host: Any, spec: dict[str, Any]) -> None:
    result = host.run(
        f"{spec['python']} -c %s", "import torch; print(int((torch.ones(3, 3) @ torch.ones(3, 3)).sum()))"
    )
    assert result.rc == 0, result.stderr
    assert result.stdout.strip() == "27"
