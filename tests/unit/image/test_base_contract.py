"""The SDK base contract, without an engine: images build on images (a family release as the
base), what the base provides is a fact of the lock and a constraint of the image, and a change
to a base reaches every release built on it, parents first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from xpu_release.image.lock import Layer, Lock, Locked
from xpu_release.manifest import Repo

from ..helpers import MINIMAL, run, write_manifest

SDK = "pytorch-cpu-sdk"
CPU = "training-cpu-pytorch"


def on_family(text: str) -> str:
    """MINIMAL with its base replaced by ``text`` (YAML of the base mapping's lines)."""
    old = 'base: {registry: hub, repository: debian/bookworm-python, tag: "12", python: /usr/bin/python3}\n'
    assert old in MINIMAL
    return MINIMAL.replace(old, "base:\n" + text)


# --- a family release as the base ------------------------------------------------------------


def test_training_cpu_builds_on_the_sdk_release_and_names_what_it_provides(repo: Path) -> None:
    spec = Repo(repo).load(CPU, "25.03")

    assert spec.base.release_ref == f"{SDK}:2.13.0"
    assert (spec.base.registry, spec.base.repository, spec.base.tag) == ("public", SDK, "2.13.0")
    assert spec.base_provides == {"torch"}
    assert spec.component("torch") is not None
    assert spec.component("torch").kind == "base"  # type: ignore[union-attr]
    assert "torch" not in {c.id for c in spec.of_kind("pip")}


def test_the_sdk_installs_into_the_base_interpreter(repo: Path) -> None:
    assert Repo(repo).load(SDK, "2.13.0").pip_install == "system"


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("  image: pytorch-cpu-sdk\n  python: /usr/bin/python3\n", "needs its version too"),
        (
            "  image: pytorch-cpu-sdk\n  version: '2.13.0'\n  repository: x/y\n  python: /usr/bin/python3\n",
            "give either image + version or registry + repository + tag, not repository too",
        ),
        ("  registry: hub\n  repository: x/y\n  python: /usr/bin/python3\n", "missing required key 'tag'"),
        (
            "  image: pytorch-cpu-sdk\n  version: '9.9'\n  python: /usr/bin/python3\n",
            "the base release pytorch-cpu-sdk:9.9 has no manifest (manifests/pytorch-cpu-sdk/9.9.yaml)",
        ),
    ],
)
def test_a_base_is_one_of_two_forms_and_names_what_exists(repo: Path, base: str, message: str) -> None:
    write_manifest(repo, "demo", "1.0", on_family(base))

    result = run(repo, "validate", "demo:1.0")

    assert result.exit_code == 2
    assert "manifests/demo/1.0.yaml:" in result.stderr
    assert message in result.stderr


def test_bases_that_form_a_cycle_are_refused_where_they_are_written(repo: Path) -> None:
    write_manifest(
        repo, "demo", "1.0", on_family("  image: other\n  version: '1.0'\n  python: /usr/bin/python3\n")
    )
    other = on_family("  image: demo\n  version: '1.0'\n  python: /usr/bin/python3\n").replace(
        "demo", "other", 1
    )
    write_manifest(
        repo, "other", "1.0", other.replace("title: {en: demo 1.0, zh: demo 1.0}", "title: {en: o, zh: o}")
    )

    result = run(repo, "validate", "demo:1.0")

    assert result.exit_code == 2
    assert "manifests/demo/1.0.yaml:" in result.stderr
    assert "the bases form a cycle: demo:1.0 → other:1.0 → demo:1.0" in result.stderr


def test_a_layer_may_not_pin_what_the_base_provides(repo: Path) -> None:
    path = repo / "manifests" / CPU / "25.03.yaml"
    text = path.read_text().replace(
        "  torch:\n    kind: base\n    name: PyTorch\n    version: 2.13.0+cpu",
        "  torch:\n    kind: pip\n    name: PyTorch\n    version: 2.14.0",
    )
    path.write_text(text.replace("  component: torch\n", ""))

    result = run(repo, "validate", f"{CPU}:25.03")

    assert result.exit_code == 2
    assert "installs torch, which the base provides (base.provides)" in result.stderr


# --- parents first ------------------------------------------------------------------------------


def test_the_build_order_puts_a_base_release_before_what_builds_on_it(repo: Path) -> None:
    result = run(repo, "order", f"{CPU}:25.03", "training-xpu-pytorch:25.03", f"{SDK}:2.13.0", "--json")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (f'[["{SDK}:2.13.0", "training-xpu-pytorch:25.03"], ["{CPU}:25.03"]]')


def test_a_change_to_the_sdk_marks_every_release_built_on_it_parents_first(repo: Path) -> None:
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    sdk = repo / "manifests" / SDK / "2.13.0.yaml"
    sdk.write_text(
        sdk.read_text().replace('PYTHONUNBUFFERED: "1"', 'PYTHONUNBUFFERED: "1"\n  OMP_NUM_THREADS: "2"')
    )

    result = run(repo, "changed", "--since", "HEAD")
    waves = run(repo, "changed", "--since", "HEAD", "--json", "--waves")

    assert result.stdout.splitlines() == [f"{SDK}:2.13.0", f"{CPU}:25.03"]
    assert waves.stdout.strip() == f'[["{SDK}:2.13.0"], ["{CPU}:25.03"]]'


# --- what the base provides: a fact of the lock, a constraint of the image -------------------


def test_a_lock_records_what_the_base_provides_and_reads_it_back() -> None:
    lock = Lock(
        pins_sha256="p" * 64,
        base=f"{SDK}:2.13.0@sha256:" + "a" * 64,
        provided=(("torch", "2.13.0+cpu"), ("filelock", "3.16.1")),
        layers=(
            Layer(
                component="ray",
                pin="ray==2.43.0",
                packages=(Locked(name="ray", version="2.43.0", sha256="b" * 64, url="https://x/ray.whl"),),
            ),
        ),
    )

    again = Lock.parse(lock.render(Repo(Path(__file__).resolve().parents[3]).load(CPU, "25.03")), "x.lock")

    assert again.provided == lock.provided
    assert lock.constraints() == "filelock==3.16.1\nray==2.43.0\ntorch==2.13.0+cpu\n"


def test_every_image_carries_its_constraints_and_the_venv_sees_the_base(repo: Path) -> None:
    cpu = (repo / "images" / CPU / "25.03" / "Dockerfile").read_text()
    sdk = (repo / "images" / SDK / "2.13.0" / "Dockerfile").read_text()

    assert "-m venv --system-site-packages /opt/venv" in cpu
    assert "PIP_CONSTRAINT=/etc/xpu-release/pip-constraints.txt" in cpu
    assert (
        "ARG BASE_IMAGE=egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun/pytorch-cpu-sdk:2.13.0"
        in cpu
    )
    assert "/opt/venv" not in sdk  # the SDK's packages are its interpreter's own
    # Installed by the base interpreter itself under --root: its own site-packages, its scripts in
    # its bin, RECORD paths that hold in the image (--target would put scripts in site-packages).
    assert "/usr/bin/python3 -m pip install" in sdk
    assert "--root /out" in sdk
    assert "--target" not in sdk
    assert "ENV PIP_CONSTRAINT=/etc/xpu-release/pip-constraints.txt" in sdk
