"""Release notes: generated from the manifest, in the seed's structure, carrying every fact."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import run, write_manifest

XPU = "training-xpu-pytorch:25.03"

# Every fact of tests/data/seed/FACTS.md, as it must appear in both languages' notes.
FACTS_BOTH = [
    "1.4.3_hotfix", "1.4.3-hotfix", "v1.4.3-8", "1.3.7.1-v2503", "0.7.3", "2.43", "0.2.1.post1", "1.5.2",
    "4.49.0+ali", ">= 1.1.0", "pytorch",
    "egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun/training-xpu-pytorch:25.03",
    "acs-registry-vpc.{region-id}.cr.aliyuncs.com/egslingjun/{image:tag}", "cn-beijing", "cn-wulanchabu",
    "docker login egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com",
    "docker run --rm -it --ipc=host --net=host --privileged "
    "egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun/training-xpu-pytorch:25.03",
    "ljperf --action train --model_name deepspeed/llama3-8b", "CHECKPOINT_OPTIMIZATION=true",
    "stage3_prefetch_bucket_size", "ACCL-N", "ACCL-P", "ACCL-R", "pccl", "rccl", "NCCL", "20%",
    "AC2+ACCL+CompilerOpt+CkptOpt", "Base+ACCL", "CNP",
    "NVTE_FLASH_ATTN=1", "NVTE_FUSED_ATTN=0", "fma", "--max-model-len", "80k", "SGLang", "INT8",
    "--max-num-batched-tokens", "2048", "13370", "Autotune", "fused_moe", "Marlin", "gptq_acext", "awq_acext",
    "act_order=True", "GPTQ-Int8", "vllm-flash-attn", "xformers", "flashinfer", "A8W8", "FP8",
    "mp_distributed_executor", "VLLM_WORKER_MULTIPROC_METHOD=spawn", "6152", "6145",
    "Main Features", "Contents", "Assets", "Driver Requirements", "Key Features and Enhancements",
    "Quick Start", "Known Issues",
]  # fmt: skip
FACTS_ZH = ["训练/推理", "基础镜像升级PPU SDK至1.4.3_hotfix", "vLLM升级至0.7.3", "ray升级至2.43", "（暂无）",
            "鉴权密钥", "VPC", "请勿重装", "编译优化", "重计算显存优化"]  # fmt: skip
FACTS_EN = ["training/inference", "Base image upgraded PPU SDK to 1.4.3_hotfix", "vLLM upgraded to 0.7.3",
            "ray upgraded to 2.43", "(none)", "authentication key", "do not reinstall",
            "compiler optimisation", "Recompute"]  # fmt: skip


@pytest.mark.parametrize(("lang", "extra"), [("zh", FACTS_ZH), ("en", FACTS_EN)])
def test_the_25_03_notes_carry_every_fact(repo: Path, lang: str, extra: list[str]) -> None:
    result = run(repo, "notes", XPU, "--lang", lang)

    assert result.exit_code == 0, result.stderr
    missing = [f for f in [*FACTS_BOTH, *extra] if f not in result.stdout]
    assert missing == []


def test_the_notes_follow_the_seed_order(repo: Path) -> None:
    text = run(repo, "notes", XPU, "--lang", "zh").stdout
    headings = [line for line in text.splitlines() if line.startswith("## ")]

    assert headings == [
        "## Main Features and Bug Fix Lists", "## Contents", "## Assets", "## Driver Requirements",
        "## Key Features and Enhancements", "## Quick Start", "## Known Issues",
    ]  # fmt: skip


def test_a_bump_lists_what_changed_against_its_parent(repo: Path) -> None:
    text = (
        'image: training-xpu-pytorch\nversion: "25.04"\nextends: "25.03"\n'
        "components: {vllm: {version: 0.8.0}}\n"
        "release: {bug_fixes: [{en: Fixed X., zh: 修复X。}]}\n"
    )
    write_manifest(repo, "training-xpu-pytorch", "25.04", text)

    en = run(repo, "notes", "training-xpu-pytorch:25.04", "--lang", "en").stdout
    zh = run(repo, "notes", "training-xpu-pytorch:25.04", "--lang", "zh").stdout

    features = en.split("### Main Features")[1].split("###")[0]
    assert features.strip() == "- vLLM 0.7.3 → 0.8.0, with the features and bug fixes of those versions."
    assert "- vLLM 0.7.3 → 0.8.0，合入对应版本功能和Bug fix。" in zh
    assert "- Fixed X." in en
    assert "- 修复X。" in zh
    assert "training-xpu-pytorch:25.04" in en


def _published(path: Path, **extra: object) -> Path:
    """A record of XPU published at one endpoint (``extra``: more of its fields)."""
    import json

    path.write_text(json.dumps({
        "ref": XPU, "manifest": "m", "manifest_sha256": "m", "inputs_sha256": "i",
        "tested_image_id": "sha256:" + "c" * 64, "digest": "sha256:" + "d" * 64, "published_at": "t",
        "complete": True, "floating_moved": [],
        "endpoints": [{"endpoint": "vpc/cn-beijing", "host": "h", "version_ref": "h/x:25.03",
                       "floating_refs": [], "status": "verified", "digest": "sha256:" + "d" * 64}],
        **extra,
    }))  # fmt: skip
    return path


def test_notes_show_the_digests_of_a_release_record(repo: Path, tmp_path: Path) -> None:
    record = _published(tmp_path / "record.json")

    result = run(repo, "notes", XPU, "--lang", "en", "--record", str(record))

    assert "| vpc/cn-beijing | `h/x:25.03` | `sha256:" + "d" * 64 + "` |" in result.stdout
    assert "sha256:" + "c" * 64 in result.stdout


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_document_a_release_can_carry_is_named_in_the_notes(
    repo: Path, tmp_path: Path, lang: str
) -> None:
    """Every kind of attachment (the SBOM, the provenance, the gate's VEX) has a name in every
    language: a release that attaches a new kind never fails at its notes."""
    from xpu_release.evidence.attachment import ALL_KINDS

    attached = {kind: f"sha256:{n}" + "e" * 63 for n, kind in enumerate(ALL_KINDS)}
    record = _published(tmp_path / "record.json", attachments=attached)

    result = run(repo, "notes", XPU, "--lang", lang, "--record", str(record))

    assert result.exit_code == 0, result.stderr
    for digest in attached.values():
        assert f"`h/x@{digest}`" in result.stdout


def test_an_unknown_language_is_a_usage_error(repo: Path) -> None:
    result = run(repo, "notes", XPU, "--lang", "fr")

    assert result.exit_code == 2
    assert "'fr' is not one of 'zh', 'en'" in result.output


def test_with_per_region_endpoints_the_notes_list_each_region(repo: Path, tmp_path: Path) -> None:
    override = tmp_path / "local.yaml"
    override.write_text(
        "registries:\n  public: {host: '127.0.0.1:15001'}\n"
        "  vpc: {regions: [cn-beijing], hosts: {cn-beijing: '127.0.0.1:15002'}, insecure: true}\n"
    )

    text = run(repo, "--registries", str(override), "notes", XPU, "--lang", "en").stdout

    assert "- Public image: `127.0.0.1:15001/egslingjun/training-xpu-pytorch:25.03`" in text
    assert "- VPC image (cn-beijing): `127.0.0.1:15002/egslingjun/training-xpu-pytorch:25.03`" in text
    assert "acs-registry-vpc" not in text


def _record_with_scan(path: Path, ref: str, findings: list[dict[str, object]], status: str = "passed"
                      ) -> Path:  # fmt: skip
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "ref": ref, "manifest": "m", "manifest_sha256": "m", "inputs_sha256": "i",
        "tested_image_id": "sha256:" + "c" * 64, "digest": "sha256:" + "d" * 64, "published_at": "t",
        "complete": True, "floating_moved": [], "endpoints": [],
        "scan": {"status": status, "reason": "threshold high; 3 advisories", "findings": findings},
    }))  # fmt: skip
    return path


OPEN = {"id": "CVE-2099-0003", "aliases": [], "package": "six", "installed": "1.16.0", "severity": "high",
        "fixed": ["1.17.0"], "vex": "not_affected",
        "justification": "vulnerable_code_not_in_execute_path"}  # fmt: skip
GONE = {"id": "CVE-2099-0001", "aliases": [], "package": "bash", "installed": "5.2.15-2", "severity": "high",
        "fixed": [], "vex": None, "justification": ""}  # fmt: skip


@pytest.mark.parametrize(("lang", "heading", "fixed_since"),
                         [("en", "## Security", "Vulnerabilities fixed since training-xpu-pytorch 25.03"),
                          ("zh", "## 安全", "自training-xpu-pytorch 25.03以来修复的漏洞")])  # fmt: skip
def test_the_notes_security_section_lists_fixed_and_open_vulnerabilities(
    repo: Path, tmp_path: Path, lang: str, heading: str, fixed_since: str
) -> None:
    write_manifest(repo, "training-xpu-pytorch", "25.04",
                   'image: training-xpu-pytorch\nversion: "25.04"\nextends: "25.03"\n')  # fmt: skip
    _record_with_scan(repo / "out" / "releases" / "training-xpu-pytorch" / "25.03.json", XPU, [GONE, OPEN])
    record = _record_with_scan(tmp_path / "r.json", "training-xpu-pytorch:25.04", [OPEN])

    text = run(repo, "notes", "training-xpu-pytorch:25.04", "--lang", lang, "--record", str(record)).stdout

    section = text[text.index(heading) :]
    assert fixed_since in section
    assert "- `CVE-2099-0001` bash 5.2.15-2 (high)" in section
    assert "- `CVE-2099-0003` six 1.16.0 (high; fixed in 1.17.0)" in section
    assert "VEX `not_affected`, vulnerable_code_not_in_execute_path" in section
    assert section.index("CVE-2099-0001") < section.index("CVE-2099-0003")


def test_with_nothing_found_the_notes_say_none_and_unscanned_says_why(repo: Path, tmp_path: Path) -> None:
    clean = _record_with_scan(tmp_path / "clean.json", XPU, [])
    skipped = _record_with_scan(tmp_path / "skipped.json", XPU, [], status="skipped")

    clean_text = run(repo, "notes", XPU, "--lang", "en", "--record", str(clean)).stdout
    skipped_text = run(repo, "notes", XPU, "--lang", "en", "--record", str(skipped)).stdout

    assert "Known vulnerabilities in this release:\n\n- (none)" in clean_text
    assert "Not scanned: threshold high; 3 advisories" in skipped_text


def test_diff_shows_the_vulnerabilities_fixed_and_found_between_two_scanned_releases(repo: Path) -> None:
    import json

    write_manifest(repo, "training-xpu-pytorch", "25.04",
                   'image: training-xpu-pytorch\nversion: "25.04"\nextends: "25.03"\n')  # fmt: skip
    releases = repo / "out" / "releases" / "training-xpu-pytorch"
    _record_with_scan(releases / "25.03.json", XPU, [GONE, OPEN])
    new = {**OPEN, "id": "CVE-2099-0007", "package": "ray", "installed": "2.43"}
    _record_with_scan(releases / "25.04.json", "training-xpu-pytorch:25.04", [OPEN, new])

    text = run(repo, "diff", XPU, "training-xpu-pytorch:25.04").stdout
    listed = json.loads(run(repo, "diff", XPU, "training-xpu-pytorch:25.04", "--json").stdout)

    assert "security     - bash CVE-2099-0001 (5.2.15-2, fixed)" in text
    assert "security     + ray CVE-2099-0007 (2.43, high)" in text
    assert [c["id"] for c in listed if c["section"] == "security"] == ["CVE-2099-0001", "CVE-2099-0007"]
