"""The reference pages (docs/reference/) are generated from the code and committed: `docs --check`
fails naming a stale page, as `render --check` does for the Dockerfiles, and every command,
option, exit code, environment variable and manifest key is on its page."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from xpu_release.cli import cli
from xpu_release.cli.reference import help_markdown, pages
from xpu_release.errors import EXIT_CODES
from xpu_release.manifest.schema import MANIFEST
from xpu_release.settings import ENVIRONMENT

from ..helpers import run

ROOT = Path(__file__).resolve().parents[3]
PAGES = pages(cli)


def commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, command in group.commands.items():
        out.append((prefix + name, command))
        if isinstance(command, click.Group):
            out.extend(commands(command, f"{prefix}{name} "))
    return out


def test_the_committed_reference_is_current() -> None:
    result = run(ROOT, "docs", "--check")

    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"{len(PAGES)} reference pages current\n"


def test_a_stale_page_is_named_and_docs_writes_it_again(repo: Path) -> None:
    shutil.copytree(ROOT / "docs" / "reference", repo / "docs" / "reference")
    page = repo / "docs" / "reference" / "exit-codes.md"
    page.write_text(page.read_text().replace("| 14 |", "| 15 |"))
    (repo / "docs" / "reference" / "settings.md").unlink()

    stale = run(repo, "docs", "--check")
    checked_only = not (repo / "docs" / "reference" / "settings.md").exists()
    written = run(repo, "docs")
    again = run(repo, "docs", "--check")

    assert stale.exit_code == 1
    assert "docs/reference/exit-codes.md" in stale.stderr
    assert "docs/reference/settings.md" in stale.stderr
    assert "run: xpu-release docs" in stale.stderr
    assert checked_only  # --check writes nothing
    assert written.exit_code == 0, written.stderr
    assert page.read_text() == PAGES["exit-codes.md"]
    assert again.exit_code == 0, again.stderr
    assert sorted(p.name for p in page.parent.iterdir()) == sorted(PAGES)  # no temporary left


def test_every_command_and_option_is_on_the_commands_page() -> None:
    page = PAGES["commands.md"]

    for path, command in commands(cli):  # type: ignore[arg-type]
        assert f"\n## {path}\n" in page, path
        section = page.split(f"\n## {path}\n", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[0]}`" in section, (path, param.opts)
            if isinstance(param, click.Option) and isinstance(param.envvar, str):
                assert f"`{param.envvar}`" in section, (path, param.envvar)


def test_an_option_a_variable_fills_names_it() -> None:
    release = PAGES["commands.md"].split("\n## release\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in release.splitlines() if line.startswith("| `--signing-key`"))

    assert row.endswith("| `XPU_RELEASE_SIGNING_KEY` |")


def test_every_exit_code_variable_and_manifest_key_is_on_its_page() -> None:
    exit_codes, settings, formats = PAGES["exit-codes.md"], PAGES["settings.md"], PAGES["formats.md"]

    assert all(f"\n| {c.code} | " in exit_codes for c in EXIT_CODES)
    assert "`WireError`" in exit_codes.split("\n| 7 | ")[1].split("\n")[0]  # the classes of each code
    assert all(f"\n| `{v.name}` | " in settings for v in ENVIRONMENT)
    assert all(f"\n| `{key}` | " in formats for key in MANIFEST.fields)
    assert "\n| `components.<id>.url` | " in formats
    assert "\n| `template` | " in formats  # images/<image>/image.yaml
    assert "\n| `registries.<id>.ca_file` | " in formats


def test_help_text_becomes_markdown() -> None:
    text = (
        "Render images/<name>.\n\n    More\n    words.\n\n"
        "    \b\n    Examples:\n      xpu-release a \\\n          --b\n    "
    )

    assert help_markdown(text) == (
        "Render images/\\<name>.\n\nMore words.\n\nExamples:\n\n```sh\nxpu-release a \\\n    --b\n```"
    )


def test_a_page_that_cannot_be_written_is_named_and_nothing_is_left_behind(repo: Path) -> None:
    folder = repo / "docs" / "reference"
    (folder / "commands.md").mkdir(parents=True)  # a directory where the page goes

    result = run(repo, "docs")

    assert result.exit_code == 13
    assert result.stderr == (
        f"error: {folder / 'commands.md'}: cannot write the reference page docs/reference/commands.md "
        "(is a directory)\n"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["commands.md"]  # no temporary file
