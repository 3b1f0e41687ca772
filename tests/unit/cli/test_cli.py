"""One test per CLI command, through Click's CliRunner, as a user would call them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xpu_release.cli import cli
from xpu_release.cli.output import aligned

from ..helpers import run, write_manifest

XPU = "training-xpu-pytorch"
PUBLIC = "egslingjun-registry.cn-wulanchabu.cr.aliyuncs.com/egslingjun"


def test_list_names_every_release_with_its_parent(repo: Path) -> None:
    write_manifest(repo, XPU, "25.04", f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n')

    result = run(repo, "list")

    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "pytorch-cpu-sdk:2.13.0",
        "training-cpu-pytorch:25.03",
        f"{XPU}:25.03",
        f"{XPU}:25.04  (extends 25.03)",
    ]


def test_schema_is_json_schema_and_the_committed_copy_is_current(repo: Path) -> None:
    result = run(repo, "schema")

    schema = json.loads(result.stdout)
    assert schema["$schema"].endswith("2020-12/schema")
    assert "components" in schema["$defs"]["release"]["properties"]
    assert schema["$defs"]["child"]["required"] == ["image", "version", "extends"]
    assert result.stdout == (repo / "schema" / "manifest.schema.json").read_text()


def test_manifests_reference_the_schema_for_editors() -> None:
    root = Path(__file__).resolve().parents[3]
    for path in (root / "manifests").rglob("*.yaml"):
        assert path.read_text().startswith(
            "# yaml-language-server: $schema=../../schema/manifest.schema.json"
        ), path


def test_plan_lists_every_ref_per_registry_and_region(repo: Path) -> None:
    result = run(repo, "plan", f"{XPU}:25.03", "--json")

    assert result.exit_code == 0
    plan = json.loads(result.stdout)
    refs = {t["endpoint"]: t["version_ref"] for t in plan["targets"]}
    assert refs == {
        "public": f"{PUBLIC}/{XPU}:25.03",
        "vpc/cn-beijing": f"acs-registry-vpc.cn-beijing.cr.aliyuncs.com/egslingjun/{XPU}:25.03",
        "vpc/cn-wulanchabu": f"acs-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/egslingjun/{XPU}:25.03",
    }
    assert plan["targets"][0]["floating_refs"] == [f"{PUBLIC}/{XPU}:latest", f"{PUBLIC}/{XPU}:25.03-latest"]


def test_plan_and_publish_dry_run_keep_floating_tags_when_a_newer_version_exists(repo: Path) -> None:
    write_manifest(repo, XPU, "25.04", f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n')

    older = run(repo, "plan", f"{XPU}:25.03")
    dry = run(repo, "publish", f"{XPU}:25.03", "--dry-run", "--json")
    newer = run(repo, "plan", f"{XPU}:25.04")

    assert f"then move {PUBLIC}/{XPU}:latest" not in older.stdout
    assert f"then move {PUBLIC}/{XPU}:25.03-latest" in older.stdout  # the newest of its line
    assert f"latest stay where they are: {XPU}:25.04 is newer" in older.stdout
    assert json.loads(dry.stdout)["moves_floating"] is False
    assert json.loads(dry.stdout)["moves"] == ["25.03-latest"]
    assert f"then move {PUBLIC}/{XPU}:latest" in newer.stdout
    assert f"then move {PUBLIC}/{XPU}:25.04-latest" in newer.stdout


def test_a_codec_the_pulling_engines_may_not_read_is_refused_before_anything_is_touched(repo: Path) -> None:
    refused = run(repo, "publish", f"{XPU}:25.03", "--dry-run", "--compression", "zstd")
    release = run(repo, "release", f"{XPU}:25.03", "--dry-run", "--compression", "zstd:30")
    unknown = CliRunner().invoke(cli, ["--root", str(repo), "publish", f"{XPU}:25.03", "--dry-run"],
                                 env={"XPU_RELEASE_COMPRESSION": "lz4"})  # fmt: skip
    accepted = run(repo, "publish", f"{XPU}:25.03", "--dry-run", "--compression", "zstd:19",
                   "--pullers-accept-zstd")  # fmt: skip
    chosen = run(repo, "publish", f"{XPU}:25.03", "--dry-run", "--compression", "zlib-ng:1")

    assert refused.exit_code == 3
    assert "--compression zstd: zstd layers cannot be pulled by Docker before 23" in refused.stderr
    assert release.exit_code == 3
    assert "--compression zstd:30: zstd takes a level from 1 to 19, not '30'" in release.stderr
    assert unknown.exit_code == 3
    assert "$XPU_RELEASE_COMPRESSION=lz4: unknown codec 'lz4'" in unknown.stderr
    assert "Traceback" not in refused.output + release.output + unknown.output
    assert (accepted.exit_code, chosen.exit_code) == (0, 0)


def test_plan_follows_a_registries_override(repo: Path, tmp_path: Path) -> None:
    override = tmp_path / "local.yaml"
    override.write_text(
        "registries:\n"
        "  public: {host: 127.0.0.1:15001}\n"
        "  vpc: {regions: [cn-beijing], hosts: {cn-beijing: '127.0.0.1:15002'}, insecure: true}\n"
    )

    result = run(repo, "--registries", str(override), "plan", f"{XPU}:25.03")

    assert result.exit_code == 0
    assert f"127.0.0.1:15001/egslingjun/{XPU}:25.03" in result.stdout
    assert f"127.0.0.1:15002/egslingjun/{XPU}:25.03" in result.stdout
    assert "cn-wulanchabu" not in result.stdout


def test_a_broken_registries_override_is_a_located_error(repo: Path, tmp_path: Path) -> None:
    override = tmp_path / "local.yaml"
    override.write_text("registries:\n  public: {hots: x}\n")

    result = run(repo, "--registries", str(override), "plan", f"{XPU}:25.03")

    assert result.exit_code == 3  # every registries-file mistake is a configuration error
    assert "registries.public.hots: unknown key 'hots'; did you mean 'hosts'?" in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # a typo in a region key
            "registries:\n  public: {host: '127.0.0.1:15001'}\n"
            "  vpc: {hosts: {cn-beijin: '127.0.0.1:15002', cn-wulanchabu: '127.0.0.1:15003'},"
            " insecure: true}\n",
            "local.yaml:3:17: registries.vpc.hosts.cn-beijin: no region 'cn-beijin' in registry 'vpc'",
        ),
        (  # the public registry mapped, the regions forgotten
            "registries:\n  public: {host: '127.0.0.1:15001'}\n",
            "maps no 'vpc' registry, so it would publish to the production acs-registry-vpc.{region}.cr",
        ),
        (  # one region left unmapped
            "registries:\n  public: {host: '127.0.0.1:15001'}\n"
            "  vpc: {hosts: {cn-beijing: '127.0.0.1:15002'}, insecure: true}\n",
            "maps no host for region 'cn-wulanchabu', so it would publish to production "
            "acs-registry-vpc.cn-wulanchabu.cr.aliyuncs.com",
        ),
    ],
    ids=["region-typo", "vpc-forgotten", "region-unmapped"],
)
def test_an_override_that_would_fall_back_to_production_is_refused(
    repo: Path, tmp_path: Path, text: str, expected: str
) -> None:
    override = tmp_path / "local.yaml"
    override.write_text(text)

    result = run(repo, "--registries", str(override), "plan", f"{XPU}:25.03")

    assert result.exit_code == 3
    assert expected in result.stderr
    assert "aliyuncs.com" not in result.stdout


def test_diff_shows_each_changed_pin(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\n'
        "components:\n  vllm: {version: 0.8.0}\n  eic: null\n"
        "env: {NEW_SWITCH: '1'}\n",
    )

    result = run(repo, "diff", f"{XPU}:25.03", f"{XPU}:25.04")

    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "components   ~ vLLM 0.7.3 → 0.8.0",
        "components   - EIC 1.3.7.1-v2503",
        "env          + NEW_SWITCH 1",
        # 25.03's own measurement (only_in: "25.03") is not inherited
        "features     - E2E contribution of the core components",
        # scoped to vllm==0.7.3 in 25.03: 25.04's notes leave it out
        "known_issues - vLLM 0.7.3 needs --max-num-batched-tokens",
    ]


def test_diff_shows_a_downgrade_as_a_downgrade(repo: Path) -> None:
    write_manifest(
        repo,
        XPU,
        "25.04",
        f'image: {XPU}\nversion: "25.04"\nextends: "25.03"\ncomponents:\n  vllm: {{version: 0.7.2}}\n',
    )

    result = run(repo, "diff", f"{XPU}:25.03", f"{XPU}:25.04")
    as_json = json.loads(run(repo, "diff", f"{XPU}:25.03", f"{XPU}:25.04", "--json").stdout)

    assert result.stdout.splitlines() == [
        "components   ↓ vLLM 0.7.3 → 0.7.2 (downgrade)",
        "features     - E2E contribution of the core components",
        "known_issues - vLLM 0.7.3 needs --max-num-batched-tokens",
    ]
    assert as_json[0]["kind"] == "downgraded"


def test_diff_of_identical_releases_says_so(repo: Path) -> None:
    cpu = "training-cpu-pytorch"
    write_manifest(repo, cpu, "25.04", f'image: {cpu}\nversion: "25.04"\nextends: "25.03"\n')

    result = run(repo, "diff", f"{cpu}:25.03", f"{cpu}:25.04", "--json")

    assert json.loads(result.stdout) == []


def test_new_version_writes_a_one_line_bump_and_its_dockerfile(repo: Path) -> None:
    result = run(repo, "new-version", f"{XPU}:25.04", "--from", "25.03", "--set", "vllm=0.8.0")

    assert result.exit_code == 0, result.stderr
    manifest = (repo / "manifests" / XPU / "25.04.yaml").read_text()
    assert 'extends: "25.03"' in manifest
    assert 'vllm:\n    version: "0.8.0"' in manifest
    dockerfile = (repo / "images" / XPU / "25.04" / "Dockerfile").read_text()
    assert "# pip: vllm==0.8.0" in dockerfile
    assert run(repo, "validate").exit_code == 0
    assert run(repo, "render", "--all", "--check").exit_code == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--set", "nope=1.0"], 3, "has no component 'nope'"),
        (["--set", "vllm"], 3, "expected COMPONENT=VERSION"),
        (["--set", "vllm=1 0"], 3, "is not a valid version"),
        (
            ["--set", "vllm=0.8.0", "--from", "24.01"],
            11,
            "no manifest manifests/training-xpu-pytorch/24.01.yaml",
        ),
    ],
)
def test_new_version_refuses_bad_input_and_writes_nothing(
    repo: Path, args: list[str], code: int, message: str
) -> None:
    if "--from" not in args:
        args = [*args, "--from", "25.03"]

    result = run(repo, "new-version", f"{XPU}:25.04", *args)

    assert result.exit_code == code
    assert message in result.stderr
    assert not (repo / "manifests" / XPU / "25.04.yaml").exists()


def test_new_version_never_overwrites(repo: Path) -> None:
    result = run(repo, "new-version", f"{XPU}:25.03", "--from", "25.03")

    assert result.exit_code == 3
    assert "already exists" in result.stderr


def test_cli_finds_the_root_from_a_subfolder(repo: Path) -> None:
    env = {**os.environ, "XPU_RELEASE_ROOT": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "xpu_release", "validate"],
        cwd=repo / "manifests" / XPU,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "3 manifests valid\n"
    assert proc.stdout == ""  # messages on stderr: stdout carries only data


def test_outside_a_repository_the_error_says_what_to_do(tmp_path: Path) -> None:
    env = {**os.environ, "XPU_RELEASE_ROOT": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "xpu_release", "validate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert proc.returncode == 3
    assert "no xpu-release repository at or above" in proc.stderr
    assert "pass --root" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_manifest_commands_do_not_import_docker_or_testinfra(repo: Path) -> None:
    code = (
        "import sys; from xpu_release.cli import cli\n"
        f"cli(['--root', {str(repo)!r}, 'validate'], standalone_mode=False)\n"
        f"cli(['--root', {str(repo)!r}, 'render', '--all', '--check'], standalone_mode=False)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'docker', 'testinfra', 'requests'})\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", [["list"], ["plan", "training-cpu-pytorch:25.03"], ["schema"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(repo: Path, command: list[str]) -> None:
    # `xpu-release list | head -1`: the reader is gone before the first line is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "xpu_release", "--root", str(repo), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "XPU_RELEASE_REGISTRIES"},
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    code = proc.wait(timeout=60)
    err = proc.stderr.read().decode()

    assert code in (0, 1), err
    assert err == ""


def nowhere(tmp_path: Path) -> Path:
    """A registries override whose every endpoint is a closed port on loopback."""
    override = tmp_path / "nowhere.yaml"
    override.write_text(
        "registries:\n"
        "  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {regions: [cn-beijing], hosts: {cn-beijing: '127.0.0.1:1'}, insecure: true}\n"
    )
    return override


def test_status_exits_10_when_no_endpoint_answers(repo: Path, tmp_path: Path) -> None:
    override = nowhere(tmp_path)

    result = run(repo, "--registries", str(override), "status", "training-cpu-pytorch:25.03")

    assert result.exit_code == 10, result.output
    assert "unreachable: public, vpc/cn-beijing" in result.stderr
    assert result.stdout.splitlines()[0].split() == ["endpoint", "state", "tag", "attached", "serves"]
    assert all(len(line) <= 100 for line in result.stdout.splitlines())


def test_a_catalog_reports_an_endpoint_that_does_not_answer_as_an_error_never_as_a_tag(
    repo: Path, tmp_path: Path
) -> None:
    override = nowhere(tmp_path)

    result = run(
        repo, "--registries", str(override), "status", "training-cpu-pytorch:25.03", "--catalog", "--json"
    )

    assert result.exit_code == 10
    catalog = json.loads(result.stdout)
    assert catalog["endpoints"] == {}
    assert set(catalog["errors"]) == {"public", "vpc/cn-beijing"}
    assert all(e["kind"] == "unreachable" for e in catalog["errors"].values())
    assert "(unreachable)" not in result.stdout


def test_status_json_rows_are_typed_and_name_their_tag(repo: Path, tmp_path: Path) -> None:
    override = nowhere(tmp_path)

    result = run(repo, "--registries", str(override), "status", "training-cpu-pytorch:25.03", "--json")

    rows = json.loads(result.stdout)["endpoints"]
    assert {(r["endpoint"], r["tag"]) for r in rows} == {
        ("public", "25.03"), ("public", "latest"), ("vpc/cn-beijing", "25.03"), ("vpc/cn-beijing", "latest"),
        ("public", "25.03-latest"), ("vpc/cn-beijing", "25.03-latest"),
    }  # fmt: skip
    assert all(r["matches"] is False and r["error_kind"] == "unreachable" for r in rows)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"ref": "training-cpu-pytorch:25.03", ', "is not JSON (line 1"),
        ("[]", "is not a release record"),
        ('{"ref": "training-cpu-pytorch:25.03"}', "has no 'manifest', "),
        (b"\xff\xfe{}", "is not UTF-8 text"),
    ],
)
def test_a_damaged_release_record_is_a_clear_error_with_its_own_exit_code(
    repo: Path, tmp_path: Path, content: str | bytes, why: str
) -> None:
    record = tmp_path / "record.json"
    if isinstance(content, bytes):
        record.write_bytes(content)
    else:
        record.write_text(content)

    result = run(repo, "notes", "training-cpu-pytorch:25.03", "--record", str(record))

    assert result.exit_code == 12
    assert f"{record}: the release record {why}" in result.stderr
    assert "Traceback" not in result.output


def test_a_status_table_keeps_its_columns_whatever_a_cell_holds() -> None:
    # `sbom+prov(unsigned)` was wider than its column and pushed the digest out of place; a row
    # was cut at 100 characters, halving the digest it exists to show.
    digest = "sha256:" + "ab" * 32
    rows = [("endpoint", "state", "tag", "attached", "serves"),
            ("public", "ok", "25.03", "sbom+prov(unsigned)", digest),
            ("vpc/cn-wulanchabu", "DOWN", "25.03-latest", "", "no answer in 50 s " + "x" * 200)]  # fmt: skip

    lines = aligned(rows)

    starts = {line.index(digest) for line in lines if digest in line}
    assert lines[1].endswith(digest)
    assert starts == {lines[0].index("serves")}
    assert [line.index("attached") for line in lines[:1]] == [lines[1].index("sbom+prov(unsigned)")]
    assert len(lines[2]) <= 100


def test_verify_without_a_release_record_says_it_holds_the_endpoints_against_each_other(
    repo: Path, tmp_path: Path
) -> None:
    down = tmp_path / "down.yaml"  # every endpoint refuses the connection: nothing to hold against
    down.write_text(
        "registries:\n  hub: {host: '127.0.0.1:1', insecure: true}\n"
        "  public: {host: '127.0.0.1:1', insecure: true}\n"
        "  vpc: {hosts: {cn-beijing: '127.0.0.1:1', cn-wulanchabu: '127.0.0.1:1'}, insecure: true}\n"
    )

    result = run(repo, "--registries", str(down), "--deadline", "3", "verify", f"{XPU}:25.03")

    assert result.exit_code == 10, result.stderr
    assert (
        f"no release record at out/releases/{XPU}/25.03.json: each endpoint is held against the"
        in result.stderr
    )
    assert "--record FILE names one" in result.stderr
