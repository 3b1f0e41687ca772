"""The 25.03 manifest carries every fact of tests/data/seed/FACTS.md."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from xpu_release.manifest import ImageSpec, Repo
from xpu_release.manifest.registries import load_registries

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> ImageSpec:
    return Repo(ROOT).load("training-xpu-pytorch", "25.03")


@pytest.mark.parametrize(
    ("component", "version"),
    [
        ("ppu-sdk", "1.4.3_hotfix"),
        ("accl-p", "v1.4.3-8"),
        ("eic", "1.3.7.1-v2503"),
        ("vllm", "0.7.3"),
        ("ray", "2.43.0"),
        ("flashinfer", "0.2.1.post1"),
        ("accelerate", "1.5.2"),
        ("transformers", "4.49.0+ali"),
    ],
)
def test_every_component_is_pinned_at_the_seed_version(spec: ImageSpec, component: str, version: str) -> None:
    c = spec.component(component)
    assert c is not None
    assert c.version == version
    # flashinfer is newly supported (支持flashinfer 0.2.1.post1); the others are upgrades
    assert component in (spec.release.added if component == "flashinfer" else spec.release.upgraded)


def test_identity_and_requirements(spec: ImageSpec) -> None:
    assert spec.ref == "training-xpu-pytorch:25.03"
    assert spec.scenario == ("training", "inference")
    assert spec.framework == "pytorch"
    assert spec.accelerator_name == "PPU"
    assert spec.sdk_requirement == ("PPU SDK", "1.4.3-hotfix")
    assert spec.driver_requirement == ">= 1.1.0"
    assert spec.base.tag == "1.4.3_hotfix"
    ray = spec.component("ray")
    assert ray is not None
    assert ray.display_version == "2.43"
    assert spec.release.bug_fixes == ()


def test_switches_tool_and_quick_start(spec: ImageSpec) -> None:
    assert ("CHECKPOINT_OPTIMIZATION", "true") in [e for f in spec.features for e in f.env]
    assert "ljperf" in spec.tools
    commands = [q.command for q in spec.quick_start]
    assert "ljperf --action train --model_name deepspeed/llama3-8b" in commands
    assert "docker run --rm -it --ipc=host --net=host --privileged {image}" in commands
    advice = " ".join(a.en for a in spec.usage_advice)
    assert "stage3_prefetch_bucket_size" in advice
    assert "do not reinstall" in advice


@pytest.mark.parametrize(
    "fragment",
    [
        "NVTE_FLASH_ATTN=1",
        "NVTE_FUSED_ATTN=0",
        "--max-model-len",
        "80k",
        "INT8",
        "--max-num-batched-tokens",
        "2048",
        "Autotune",
        "fused_moe",
        "Marlin",
        "gptq_acext",
        "act_order=True",
        "GPTQ-Int8",
        "vllm-flash-attn",
        "A8W8",
        "FP8",
        "VLLM_WORKER_MULTIPROC_METHOD=spawn",
        "mp_distributed_executor",
    ],
)
def test_known_issues_carry_every_fact(spec: ImageSpec, fragment: str) -> None:
    text = " ".join(k.text.en + " " + k.text.zh for k in spec.known_issues)
    assert fragment in text


def test_upstream_issue_references(spec: ImageSpec) -> None:
    refs = {r for k in spec.known_issues for r in k.refs}
    assert refs == {"vllm-project/vllm#13370", "vllm-project/vllm#6152", "vllm-project/vllm#6145"}


def test_registries_match_the_assets_section() -> None:
    regs = load_registries(ROOT)
    public = regs.endpoint("public")
    assert public.ref("training-xpu-pytorch", "25.03") == (
        "egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun/training-xpu-pytorch:25.03"
    )
    pattern, regions = regs.vpc_pattern() or ("", ())
    assert pattern == "acs-registry-vpc.{region}.cr.aliyuncs.com/egslingjun"
    assert {"cn-beijing", "cn-wulanchabu"} <= set(regions)


def test_facts_not_in_the_seed_are_marked_assumed() -> None:
    text = (ROOT / "manifests" / "training-xpu-pytorch" / "25.03.yaml").read_text()
    for line in text.splitlines():
        if any(k in line for k in ("repository:", "url:", "sha256:", "index_url", "dest:", "package:")):
            assert "# assumed:" in line, line


def test_the_seed_is_inside_the_repository_as_it_was_copied() -> None:
    # A clone in any folder has it: no test reaches outside the repository for data.
    from ..conftest import SEED

    assert SEED.resolve().is_relative_to(ROOT)
    listed = re.findall(r"\| `([^`]+)` \| `([0-9a-f]{64})` \|", (SEED / "README.md").read_text())
    assert len(listed) == 2
    for name, sha256 in listed:
        assert hashlib.sha256((SEED / name).read_bytes()).hexdigest() == sha256, name
