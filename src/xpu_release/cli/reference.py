"""The reference pages (``docs/reference/``), generated from the code so that they cannot drift:
every command and option from Click's own tree, the exit codes from ``errors.EXIT_CODES``, the
environment from ``settings.ENVIRONMENT`` and the file formats from their declarations.

``xpu-release docs`` writes them; ``docs --check`` writes nothing and exits 1 naming the stale
pages, as ``render --check`` does for the Dockerfiles (the test command runs it).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import click

from ..errors import EXIT_CODES, ReleaseError, StaleError
from ..guard.generated import is_current, write_generated
from ..settings import ENVIRONMENT
from .app import State, cli, pass_state
from .markdown import cell, generated
from .output import info

FOLDER = Path("docs") / "reference"


# --- commands --------------------------------------------------------------------------------


def help_markdown(text: str) -> str:
    """Click's help text as Markdown: paragraphs rewrapped, a ``\\b`` block (Click's "do not
    rewrap") kept as it is, in a shell block under its label (``Examples:``)."""
    out: list[str] = []
    for paragraph in text.split("\f")[0].strip().split("\n\n"):
        lines = paragraph.strip("\n").splitlines()
        if lines and lines[0].strip() == "\b":
            lines = lines[1:]
            label = lines.pop(0).strip() + "\n\n" if lines and lines[0].strip().endswith(":") else ""
            code = textwrap.dedent("\n".join(lines)).strip()
            out.append(f"{label}```sh\n{code}\n```")
        else:
            out.append(" ".join(line.strip() for line in lines).replace("<", "\\<"))
    return "\n\n".join(out)


def walk(group: click.Group, parent: click.Context) -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every command under ``group``, sorted by name, groups before their commands."""
    for name in sorted(group.commands):
        command = group.commands[name]
        ctx = click.Context(command, info_name=name, parent=parent)
        yield ctx.command_path.removeprefix("xpu-release "), command, ctx
        if isinstance(command, click.Group):
            yield from walk(command, ctx)


def option_rows(command: click.Command, ctx: click.Context) -> list[str]:
    overridden = {v.option: v.name for v in ENVIRONMENT if v.option}
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or param is command.get_help_option(ctx):
            continue
        facts = param.to_info_dict()
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        metavar = "" if param.is_flag else f" `{param.make_metavar(ctx)}`"
        what = param.help or ""
        if facts["multiple"] and "repeatable" not in what.lower():
            what += " Repeatable."
        if facts["required"]:
            what += " Required."
        if facts["default"] is not None and not param.is_flag and not facts["multiple"]:
            what += f" Default: `{facts['default']}`."
        envvar = param.envvar if isinstance(param.envvar, str) else overridden.get(param.opts[-1], "")
        env = f"`{envvar}`" if envvar else ""
        rows.append(f"| {cell(names + metavar)} | {cell(what)} | {env} |")
    return rows


def command_section(path: str, command: click.Command, ctx: click.Context) -> str:
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    parts = [f"## {path}", f"`{usage}`"]
    if command.hidden:
        parts.append("*A maintainer's command, not listed by `--help`.*")
    parts.append(help_markdown(command.help or ""))
    rows = option_rows(command, ctx)
    if rows:
        parts.append("\n".join(["| option | what it does | environment |", "|---|---|---|", *rows]))
    return "\n\n".join(parts)


def commands_page(root: click.Group) -> str:
    ctx = click.Context(root, info_name="xpu-release", **root.context_settings)
    commands = list(walk(root, ctx))
    index = ["| command | what it does |", "|---|---|"]
    for path, command, _ in commands:
        anchor = path.replace(" ", "-")
        hidden = " (maintainers)" if command.hidden else ""
        index.append(f"| [`{path}`](#{anchor}) | {cell(command.get_short_help_str(limit=300))}{hidden} |")
    global_rows = ["| option | what it does | environment |", "|---|---|---|", *option_rows(root, ctx)]
    parts = [
        "# Commands",
        generated("the command line's own definitions (src/xpu_release/cli/)"),
        f"`xpu-release [OPTIONS] COMMAND [ARGS]...`\n\n{help_markdown(root.help or '')}",
        "Options of `xpu-release` itself, given before the command's name "
        "(`xpu-release -q notes …`):\n\n" + "\n".join(global_rows),
        "Every command also takes `-h` / `--help`, which prints its examples. Exit codes: "
        "[exit-codes.md](exit-codes.md); environment variables: [settings.md](settings.md).",
        "\n".join(index),
        *(command_section(path, command, c) for path, command, c in commands),
    ]
    return "\n\n".join(parts) + "\n"


# --- exit codes and settings -------------------------------------------------------------------


def _classes_by_code() -> dict[int, list[str]]:
    found: list[type[ReleaseError]] = [ReleaseError]
    for cls in found:
        found.extend(sorted(cls.__subclasses__(), key=lambda c: c.__name__))
    by_code: dict[int, list[str]] = {}
    for cls in found:
        if "exit_code" in vars(cls):  # a class that inherits its parent's code is named with it
            by_code.setdefault(cls.exit_code, []).append(cls.__name__)
    return by_code


def exit_codes_page() -> str:
    by_code = _classes_by_code()
    rows = ["| code | meaning | example | raised as |", "|---|---|---|---|"]
    for c in EXIT_CODES:
        raised = ", ".join(f"`{name}`" for name in by_code.get(c.code, []))
        rows.append(f"| {c.code} | {cell(c.meaning)} | {cell(c.example)} | {raised} |")
    return "\n\n".join([
        "# Exit codes",
        generated("errors.EXIT_CODES and the error classes (src/xpu_release/errors.py)"),
        "Every mistake a user can make ends in a clear one-line error on stderr and one of these "
        "codes; no traceback unless `--debug` is given. 70 is only ever a bug of ours: the tests "
        "drive every engine-free command with generated input and assert that it never ends in 70 "
        "nor in a code outside this table. A dry run (`release --dry-run`) exits with the code the "
        "real run would have. The *raised as* column names the error classes (in "
        "`src/xpu_release/errors.py`) that end in each code.",
        "\n".join(rows),
    ]) + "\n"  # fmt: skip


def settings_page() -> str:
    rows = ["| variable | what it sets | option | setting |", "|---|---|---|---|"]
    for v in ENVIRONMENT:
        secret = " A secret: never printed, redacted from every message." if v.secret else ""
        option = f"`{v.option}`" if v.option else ""
        setting = f"`{v.setting}`" if v.setting else ""
        rows.append(f"| `{v.name}` | {cell(v.meaning + secret)} | {option} | {setting} |")
    return "\n\n".join([
        "# Settings and environment variables",
        generated("settings.ENVIRONMENT (src/xpu_release/settings.py)"),
        "The command line reads its environment once, into a `Settings` value it hands down; no "
        "module outside `cli/` reads the environment. An option, where there is one, wins over "
        "its variable. The *setting* column names the `Settings` field a variable fills (tests and "
        "benchmarks build a `Settings` instead of changing the environment).",
        "\n".join(rows),
    ]) + "\n"  # fmt: skip


# --- the pages, written or checked -------------------------------------------------------------


def pages(root: click.Group) -> dict[str, str]:
    """Every reference page by its file name under ``docs/reference/``."""
    from .reference_formats import formats_page  # the schema and the templates: read for docs only

    return {
        "commands.md": commands_page(root),
        "exit-codes.md": exit_codes_page(),
        "formats.md": formats_page(),
        "settings.md": settings_page(),
    }


@cli.command(hidden=True)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the stale pages.")
@pass_state
def docs(state: State, check: bool) -> None:
    """Generate the reference pages under docs/reference/ from the code: commands, exit codes,
    settings and the file formats (manifests, image.yaml, registries files).

    \b
    Examples:
      xpu-release docs
      xpu-release docs --check
    """
    folder = state.root / FOLDER
    generated_pages = pages(cli)
    stale = []
    for name, text in generated_pages.items():
        path, shown = folder / name, (FOLDER / name).as_posix()
        if is_current(path, text.encode(), what=shown):
            continue
        stale.append(shown)
        if not check:
            # Whole, inside the repository: a docs/reference that is a link is refused (exit
            # 13), a link at the page's name is replaced, never written through.
            write_generated(path, text.encode(), root=state.root, what=f"reference page {shown}")
            info(f"wrote {shown}")
    if check and stale:
        msg = f"{len(stale)} reference page(s) are stale: {', '.join(stale)}\nrun: xpu-release docs"
        raise StaleError(msg)
    if check:
        info(f"{len(generated_pages)} reference pages current")
