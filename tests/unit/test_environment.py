"""Every environment variable the command line reads is in one table (``settings.ENVIRONMENT``),
which the settings reference is generated from: what ``Settings.from_env`` reads, what Click's
options read, every ``XPU_RELEASE_*`` name the code mentions, and every setting it fills."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import click

from xpu_release.cli import cli
from xpu_release.settings import ENVIRONMENT, Settings

SRC = Path(__file__).resolve().parents[2] / "src" / "xpu_release"
NAMES = {v.name for v in ENVIRONMENT}


class Recording(dict[str, str]):
    """A mapping that remembers every key asked of it."""

    def __init__(self) -> None:
        super().__init__(HOME="/home/someone")
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)


def options(group: click.Group) -> Iterator[click.Option]:
    yield from (p for p in group.params if isinstance(p, click.Option))
    for command in group.commands.values():
        if isinstance(command, click.Group):
            yield from options(command)
        else:
            yield from (p for p in command.params if isinstance(p, click.Option))


def test_every_variable_settings_read_is_in_the_table_and_every_setting_one_is_read() -> None:
    env = Recording()
    Settings.from_env(env)

    assert env.asked - NAMES == set()
    assert {v.name for v in ENVIRONMENT if v.setting} - env.asked == set()


def test_every_option_that_reads_a_variable_is_in_the_table_with_that_option() -> None:
    read = {(o.envvar, o.opts[-1]) for o in options(cli) if isinstance(o.envvar, str)}
    table = {(v.name, v.option) for v in ENVIRONMENT}

    assert read
    assert read - table == set()


def test_every_option_the_table_names_exists() -> None:
    names = {name for o in options(cli) for name in o.opts}

    assert {v.option for v in ENVIRONMENT if v.option} - names == set()


def test_every_setting_is_filled_by_a_variable_and_names_are_real_fields() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    filled = {v.setting for v in ENVIRONMENT if v.setting}

    assert filled == fields


def test_every_xpu_release_variable_the_code_mentions_is_in_the_table() -> None:
    mentioned = {
        name
        for path in SRC.rglob("*.py")
        for name in re.findall(r"\b_?XPU_RELEASE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8"))
    }

    assert mentioned
    assert mentioned - NAMES == set()


def test_the_variables_marked_secret_are_those_of_the_settings_never_shown() -> None:
    hidden = {f.name for f in dataclasses.fields(Settings) if not f.repr}

    assert hidden
    assert {v.setting for v in ENVIRONMENT if v.secret} == hidden
