"""How the command line behaves beside docker, crane and skopeo: data on stdout and messages on
stderr, -q and -v, --json where a script would want it, `-o -`, help with examples and the
environment's variables, shell completion, colour only on a terminal, and output that cannot be
written (a full device, a closed stdout) as its own exit code (13), never 70."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from xpu_release.cli import cli

from ..helpers import on_a_terminal, run

CPU = "training-cpu-pytorch:25.03"


def xpu(repo: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """The real entry point in a child process: what a shell sees, file descriptors and all."""
    env = {**os.environ, "XPU_RELEASE_ROOT": str(repo)}
    env.pop("XPU_RELEASE_REGISTRIES", None)
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run([sys.executable, "-m", "xpu_release", *args], text=True, env=env, check=False,
                          **streams)  # type: ignore[call-overload, no-any-return]  # fmt: skip


def test_notes_to_a_file_or_a_pipe_carry_only_the_notes(repo: Path) -> None:
    to_stdout = run(repo, "notes", CPU, "--lang", "en")
    dash = run(repo, "notes", CPU, "--lang", "en", "-o", "-")
    into = repo / "new" / "folder" / "notes.md"
    written = run(repo, "notes", CPU, "--lang", "en", "-o", str(into))

    assert to_stdout.stdout.startswith("# ")
    assert dash.stdout == to_stdout.stdout
    assert into.read_text() == to_stdout.stdout  # a missing folder is made, as for schema and sbom
    assert written.stdout == ""
    assert written.stderr == f"wrote {into}\n"


@pytest.mark.parametrize("command", [["schema"], ["notes", CPU]])
def test_o_into_a_missing_folder_is_made_and_a_directory_is_refused_as_usage(
    repo: Path, tmp_path: Path, command: list[str]
) -> None:
    made = run(repo, *command, "-o", str(tmp_path / "a" / "b" / "out.txt"))
    refused = run(repo, *command, "-o", str(tmp_path))

    assert made.exit_code == 0, made.stderr
    assert (tmp_path / "a" / "b" / "out.txt").stat().st_size > 0
    assert refused.exit_code == 2  # Click's own check of the option, before anything runs
    assert "is a directory" in refused.stderr


def test_quiet_leaves_only_errors_and_data(repo: Path) -> None:
    quiet = run(repo, "-q", "validate")
    quiet_render = run(repo, "-q", "render", "--all", "--check")
    failing = run(repo, "-q", "validate", "nope:1.0")

    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")
    assert (quiet_render.exit_code, quiet_render.stderr) == (0, "")
    assert failing.exit_code == 11
    assert failing.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        (["validate"], {"checked", "valid", "problems", "notices"}),
        (["from-tag", "training-cpu-pytorch/25.03"], {"tag", "ref", "image", "version", "platforms"}),
        (["render", "--all", "--check"], {"stale", "checked", "current"}),
    ],
)
def test_json_where_a_script_wants_it(repo: Path, args: list[str], keys: set[str]) -> None:
    result = run(repo, *args, "--json")

    assert result.exit_code == 0, result.stderr
    assert set(json.loads(result.stdout)) == keys


def test_validate_json_lists_the_problems_and_still_exits_2(repo: Path) -> None:
    path = repo / "manifests" / "training-cpu-pytorch" / "25.03.yaml"
    path.write_text(path.read_text().replace("framework: pytorch", "framework: pytorch\nframwork: x"))

    result = run(repo, "validate", "--json")

    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["valid"] is False
    assert any("framwork" in p for p in data["problems"])


def test_every_command_has_help_with_an_example_and_names_its_arguments(repo: Path) -> None:
    for name, command in sorted(cli.commands.items()):  # type: ignore[attr-defined]
        result = run(repo, name, "--help")
        assert result.exit_code == 0, name
        assert "Examples:" in result.stdout or name == "build-release", name
        assert " REF" not in result.stdout.split("\n", 1)[0], name  # the usage line says NAME:VERSION
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag:
                assert param.help, f"{name} {param.name} has no help"
    alias = run(repo, "build-release", "--help")
    assert "Alias of `release`" in alias.stdout


def test_the_command_line_loads_no_template_engine_until_a_command_renders() -> None:
    # Every process imports the command group; a command imports what it uses when it runs. The
    # template engine and the manifest's reference tables were 70 ms of every `xpu-release`.
    heavy = [
        "jinja2",
        "xpu_release.image.render",
        "xpu_release.manifest.order",
        "xpu_release.cli.reference_formats",
    ]
    probe = f"import sys, xpu_release.cli; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert loaded.stdout.strip() == "[]"


def test_help_names_the_environment_variables_options_read(repo: Path) -> None:
    top = run(repo, "--help").stdout
    publish = run(repo, "publish", "--help").stdout

    assert "XPU_RELEASE_ROOT" in top
    assert "XPU_RELEASE_REGISTRIES" in top
    assert "XPU_RELEASE_USERNAME" in publish
    assert "XPU_RELEASE_SIGNING_KEY" in publish


def test_shell_completion_offers_the_manifests_refs(repo: Path) -> None:
    env = {**os.environ, "_XPU_RELEASE_COMPLETE": "bash_complete", "COMP_WORDS": "xpu-release plan train",
           "COMP_CWORD": "2", "XPU_RELEASE_ROOT": str(repo)}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", "from xpu_release.cli import main; main()"], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip

    offered = {line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line}
    assert offered == {"training-cpu-pytorch:25.03", "training-xpu-pytorch:25.03"}


def _on_a_terminal(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """What a person sees: the command's stderr and stdout on a pseudo-terminal."""
    return on_a_terminal([sys.executable, "-m", "xpu_release", *args],
                         {"XPU_RELEASE_ROOT": str(repo), **(env or {})})  # fmt: skip


def test_errors_are_coloured_on_a_terminal_and_never_with_no_color_or_in_a_pipe(repo: Path) -> None:
    coloured = _on_a_terminal(repo, "validate", "nope:1.0")
    plain = _on_a_terminal(repo, "validate", "nope:1.0", env={"NO_COLOR": "1"})
    piped = xpu(repo, "validate", "nope:1.0")

    assert "\x1b[31m" in coloured
    assert "error:" in coloured
    assert "\x1b[" not in plain
    assert "\x1b[" not in piped.stderr


@pytest.mark.parametrize("command", [["schema"], ["list"], ["notes", CPU]])
def test_a_full_device_is_exit_13_not_an_internal_error(repo: Path, command: list[str]) -> None:
    with Path("/dev/full").open("w") as full:
        proc = xpu(repo, *command, stdout=full)

    assert proc.returncode == 13, proc.stderr
    assert "cannot write the output (No space left on device)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_closed_stdout_is_exit_13_not_a_silent_success(repo: Path) -> None:
    env = {**os.environ, "XPU_RELEASE_ROOT": str(repo)}
    proc = subprocess.run(f'"{sys.executable}" -m xpu_release list >&-', shell=True, env=env,
                          capture_output=False, stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip

    assert proc.returncode == 13
    assert "standard output is closed" in proc.stderr


def test_verbose_shows_the_log_an_error_keeps(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xpu_release.errors import ReleaseError

    def fails(*_args: object, **_kwargs: object) -> None:
        msg = "the build failed"
        raise ReleaseError(msg, details="step 3/7: the whole log")

    monkeypatch.setattr("xpu_release.manifest.loader.Repo.refs", fails)
    plain = run(repo, "list")
    verbose = run(repo, "-v", "list")

    assert "the whole log" not in plain.stderr
    assert "step 3/7: the whole log" in verbose.stderr
