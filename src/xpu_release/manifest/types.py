"""The building blocks of the manifest format: constrained types (strings, mappings, lists,
choices) that check a value with located messages and print themselves as JSON Schema.
``schema.py`` declares the manifest with them."""

from __future__ import annotations

import datetime
import difflib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import Problem
from .yamlsrc import KeyPath, Source

# Every character that some line splitter treats as a line break: Python's str.splitlines()
# (LF, VT, FF, CR, FS, GS, RS, NEL, LS, PS), Docker's parser (LF, CR) and YAML (NEL, LS, PS).
LINE_BREAKS = frozenset("\n\x0b\x0c\r\x1c\x1d\x1e\x85\u2028\u2029")
# Unicode categories refused in every constrained string (Str): control characters, format
# characters (bidi overrides and zero-width joiners that hide what a reader sees), line and
# paragraph separators, and lone surrogates.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_CONTROL_NAMES = {"\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\t": "TAB", "\x0b": "VERTICAL TAB",
                  "\x0c": "FORM FEED", "\x85": "NEXT LINE", "\x00": "NUL"}  # fmt: skip


def first_unsafe_char(value: str) -> str | None:
    """How to name the first line break or control character in ``value``, or None."""
    for ch in value:
        if ch in LINE_BREAKS or unicodedata.category(ch) in UNSAFE_CATEGORIES:
            name = _CONTROL_NAMES.get(ch) or unicodedata.name(ch, "")
            return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")
    return None


JSON = dict[str, Any]


class Checker:
    """Collects problems while walking a value against a schema."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def fail(self, path: KeyPath, message: str, *, key: bool = False) -> None:
        self.problems.append(self.source.problem(path, message, key=key))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Type:
    description = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        raise NotImplementedError

    def schema(self, partial: bool = False) -> JSON:
        """The JSON Schema of this type; ``partial``: as a manifest that ``extends:`` another
        writes it, where anything may be inherited (no key is required)."""
        raise NotImplementedError

    def _with_description(self, out: JSON) -> JSON:
        if self.description:
            out["description"] = self.description
        return out


@dataclass
class Str(Type):
    pattern: str | None = None
    what: str = "a string"
    hint: str = ""
    max_len: int = 200
    description: str = ""
    _rx: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._rx = re.compile(self.pattern) if self.pattern else None

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, str):
            raw = c.source.raw.get(path)
            quote = f"; quote it: '{raw}'" if raw is not None and isinstance(value, int | float) else ""
            c.fail(path, f"expected {self.what}, got {_describe(value)}{quote}")
            return
        if len(value) > self.max_len:
            c.fail(path, f"is {len(value)} characters long; at most {self.max_len} allowed")
            return
        bad = first_unsafe_char(value)
        if bad is not None:
            c.fail(path, f"contains {bad}; a line break or control character is never allowed here")
            return
        if self._rx and not self._rx.fullmatch(value):
            hint = f" ({self.hint})" if self.hint else ""
            c.fail(path, f"{value!r} is not {self.what}{hint}")

    def schema(self, partial: bool = False) -> JSON:
        out: JSON = {"type": "string", "maxLength": self.max_len}
        if self.pattern:
            out["pattern"] = f"^(?:{self.pattern})$"
        return self._with_description(out)


@dataclass
class Text(Type):
    """Free prose for release notes (Markdown). Never reaches a Dockerfile."""

    max_len: int = 4000
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, str):
            c.fail(path, f"expected text, got {_describe(value)}")
        elif not value.strip():
            c.fail(path, "is empty")
        elif len(value) > self.max_len:
            c.fail(path, f"is {len(value)} characters long; at most {self.max_len} allowed")

    def schema(self, partial: bool = False) -> JSON:
        return self._with_description({"type": "string", "minLength": 1, "maxLength": self.max_len})


@dataclass
class Bool(Type):
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, bool):
            c.fail(path, f"expected true or false, got {_describe(value)}")

    def schema(self, partial: bool = False) -> JSON:
        return self._with_description({"type": "boolean"})


@dataclass
class Date(Type):
    """A calendar day, ``YYYY-MM-DD``: unquoted (YAML reads it as a date) or quoted; never a
    time of day."""

    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if isinstance(value, datetime.datetime):
            c.fail(path, f"{value.isoformat()} is a time; give a day, YYYY-MM-DD")
        elif isinstance(value, datetime.date):
            return
        elif not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            c.fail(path, f"expected a date YYYY-MM-DD (e.g. 2026-03-31), got {_describe(value)}"[:300])
        else:
            try:
                datetime.date.fromisoformat(value)
            except ValueError:
                c.fail(path, f"{value!r} is no day of the calendar")

    def schema(self, partial: bool = False) -> JSON:
        day = {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
        return self._with_description(day)


@dataclass
class Int(Type):
    """A whole number in ``[minimum, maximum]`` (``true`` is not one, as YAML would have it)."""

    minimum: int = 0
    maximum: int = 1 << 31
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            c.fail(path, f"expected a whole number, got {_describe(value)}")
        elif not self.minimum <= value <= self.maximum:
            c.fail(path, f"{value} is out of range: {self.minimum} to {self.maximum}")

    def schema(self, partial: bool = False) -> JSON:
        return self._with_description({"type": "integer", "minimum": self.minimum, "maximum": self.maximum})


@dataclass
class Enum(Type):
    choices: tuple[str, ...] = ()
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if value not in self.choices:
            close = difflib.get_close_matches(str(value), self.choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            c.fail(path, f"{_describe(value)} is not one of {', '.join(self.choices)}{hint}")

    def schema(self, partial: bool = False) -> JSON:
        return self._with_description({"enum": list(self.choices)})


@dataclass
class Nullable(Type):
    inner: Type = field(default_factory=Text)
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if value is not None:
            self.inner.check(value, path, c)

    def schema(self, partial: bool = False) -> JSON:
        return self._with_description({"anyOf": [self.inner.schema(partial), {"type": "null"}]})


@dataclass
class List(Type):
    item: Type = field(default_factory=Text)
    unique: bool = False
    max_items: int = 200
    description: str = ""
    min_items: int = 0

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, list):
            c.fail(path, f"expected a list, got {_describe(value)}")
            return
        if len(value) < self.min_items:
            said = "is empty" if not value else f"has {len(value)} items"
            c.fail(path, f"{said}; at least {self.min_items} needed")
        if len(value) > self.max_items:
            c.fail(path, f"has {len(value)} items; at most {self.max_items} allowed")
        seen: set[str] = set()
        for i, item in enumerate(value):
            self.item.check(item, (*path, i), c)
            if self.unique and isinstance(item, str):
                if item in seen:
                    c.fail((*path, i), f"{item!r} is listed twice")
                seen.add(item)

    def schema(self, partial: bool = False) -> JSON:
        out: JSON = {"type": "array", "items": self.item.schema(partial), "maxItems": self.max_items}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.unique:
            out["uniqueItems"] = True
        return self._with_description(out)


@dataclass
class Map(Type):
    """A mapping with user-chosen keys (component names, env names)."""

    value: Type = field(default_factory=Text)
    key: Str = field(default_factory=Str)
    nullable_values: bool = False  # `key: null` removes an inherited entry
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, dict):
            c.fail(path, f"expected a mapping, got {_describe(value)}")
            return
        for k, v in value.items():
            self.key.check(k, (*path, k), c)
            if v is None and self.nullable_values:
                continue
            self.value.check(v, (*path, k), c)

    def schema(self, partial: bool = False) -> JSON:
        value = self.value.schema(partial)
        if self.nullable_values:
            value = {"anyOf": [value, {"type": "null"}]}
        out: JSON = {"type": "object", "additionalProperties": value}
        if self.key.pattern:
            out["propertyNames"] = {"pattern": f"^(?:{self.key.pattern})$"}
        return self._with_description(out)


@dataclass
class Obj(Type):
    """A mapping with fixed keys; unknown keys get a "did you mean"."""

    fields: Mapping[str, Type] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, dict):
            c.fail(path, f"expected a mapping, got {_describe(value)}")
            return
        for k, v in value.items():
            if k not in self.fields:
                close = difflib.get_close_matches(k, list(self.fields), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                allowed = ", ".join(self.fields)
                c.fail((*path, k), f"unknown key {k!r}{hint} (allowed: {allowed})", key=True)
                continue
            self.fields[k].check(v, (*path, k), c)
        for k in self.required:
            if k not in value:
                c.fail(path, f"missing required key {k!r}")

    def schema(self, partial: bool = False) -> JSON:
        out: JSON = {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: t.schema(partial) for k, t in self.fields.items()},
        }
        if self.required and not partial:
            out["required"] = list(self.required)
        return self._with_description(out)


@dataclass
class Either(Type):
    """One of several object shapes, chosen by a discriminating key (``kind``)."""

    key: str = "kind"
    shapes: Mapping[str, Obj] = field(default_factory=dict)
    description: str = ""

    def check(self, value: Any, path: KeyPath, c: Checker) -> None:
        if not isinstance(value, dict):
            c.fail(path, f"expected a mapping, got {_describe(value)}")
            return
        kind = value.get(self.key)
        if not isinstance(kind, str) or kind not in self.shapes:
            Enum(choices=tuple(self.shapes)).check(kind, (*path, self.key), c)
            return
        self.shapes[kind].check(value, path, c)

    def schema(self, partial: bool = False) -> JSON:
        shapes = [s.schema(partial) for s in self.shapes.values()]
        # An inherited component may omit its kind: then more than one shape can match.
        return self._with_description({"anyOf" if partial else "oneOf": shapes})
