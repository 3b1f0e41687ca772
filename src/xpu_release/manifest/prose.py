"""The notes' prose as a manifest writes it (a part of ``schema.MANIFEST``): text in every
language the notes are written in, scoped to one release (``only_in``), the features, known
issues (with the component versions they apply to) and Quick Start commands."""

from __future__ import annotations

from .tokens import COMPONENT_ID, ENV_NAME, SAFE_VALUE, TAG
from .types import List, Map, Nullable, Obj, Str, Text

LANGS = ("en", "zh")
LOCALIZED = Obj(
    fields={lang: Text() for lang in LANGS},
    required=LANGS,
    description="Text in every language the notes are written in (en, zh).",
)

ONLY_IN = Nullable(
    inner=TAG,
    description="The one release this text holds for; a release that extends it does not inherit it.",
)
SPECIFIER = Str(
    pattern=r"[=<>!~]=?=? ?[A-Za-z0-9._+\-*]+(?: ?, ?[=<>!~]=?=? ?[A-Za-z0-9._+\-*]+)*",
    what="a version specifier",
    hint="e.g. '==0.7.3', '<0.8', '>=2.43,<2.45'",
    max_len=120,
)
PROSE_ITEM = Obj(fields={"only_in": ONLY_IN, **LOCALIZED.fields}, required=LANGS)
FEATURE = Obj(
    fields={
        "only_in": ONLY_IN,
        "title": LOCALIZED,
        "text": LOCALIZED,
        "switch": Nullable(inner=LOCALIZED, description="How a user turns it on."),
        "env": Map(value=SAFE_VALUE, key=ENV_NAME, description="Variables that switch it on."),
    },
    required=("title", "text"),
)
KNOWN_ISSUE = Obj(
    fields={
        "only_in": ONLY_IN,
        "applies": Map(
            value=SPECIFIER,
            key=COMPONENT_ID,
            description="The component versions it applies to; releases outside leave it out.",
        ),
        "title": LOCALIZED,
        "text": LOCALIZED,
        "refs": List(
            item=Str(
                pattern=r"[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#[0-9]+",
                what="an upstream issue reference",
                hint="owner/repo#number",
            )
        ),
    },
    required=("title", "text"),
)
COMMAND = Obj(
    fields={
        "title": LOCALIZED,
        "command": Str(pattern=r"[^\n\r]+", what="a one-line command", max_len=300),
    },
    required=("title", "command"),
)
