"""Safe YAML loading that remembers where every value came from.

PyYAML's composer gives us nodes with marks; we build plain Python values from them
ourselves so that we can (a) refuse duplicate keys, anchors/aliases and object-building tags,
(b) bound the size and the nesting of what we accept (``guard.limits``: a document nested 500
deep would otherwise exhaust the recursion of the builder, far under libyaml's own bound of
1,000), and (c) keep a ``path → (file, line, column)`` table for messages like
``manifests/x/25.03.yaml:14:12: components.vllm.version: ...``. Files are read through the
guarded layer (``guard.reading``): a FIFO is refused without being opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import Problem
from ..guard.limits import MAX_DEPTH, MAX_YAML_BYTES, MAX_YAML_VALUES
from ..guard.reading import read_file

MAX_BYTES = MAX_YAML_BYTES
MAX_NODES = MAX_YAML_VALUES

KeyPath = tuple[str | int, ...]
ALIASES_REFUSED = "anchors and aliases are not supported"


def aliases_refused(file: str) -> str:
    """The refusal, in the words of the file it is about: a manifest has ``extends:`` instead."""
    if "manifests" in Path(file).parts:
        return f"{ALIASES_REFUSED} in manifests (use `extends:`)"
    return f"{ALIASES_REFUSED} in {Path(file).name[:80]} (write each value out)"


# Tags the safe resolver assigns to plain scalars; anything else was written by hand (`!!python/…`).
_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:timestamp",
}


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@dataclass(frozen=True)
class Mark:
    file: str
    line: int
    column: int


@dataclass
class Source:
    """A loaded YAML document: its value and where each key path was written."""

    file: str
    data: Any
    marks: dict[KeyPath, Mark] = field(default_factory=dict)  # where each value starts
    key_marks: dict[KeyPath, Mark] = field(default_factory=dict)  # where each key is written
    raw: dict[KeyPath, str] = field(default_factory=dict)  # the text of plain scalars

    def mark(self, path: KeyPath, *, key: bool = False) -> Mark:
        """The mark of ``path`` (its key with ``key=True``) or of its nearest written ancestor."""
        if key and path in self.key_marks:
            return self.key_marks[path]
        while path not in self.marks and path:
            path = path[:-1]
        return self.marks.get(path, Mark(self.file, 1, 1))

    def problem(self, path: KeyPath, message: str, *, key: bool = False) -> Problem:
        m = self.mark(path, key=key)
        return Problem(file=m.file, line=m.line, column=m.column, path=dotted(path), message=message)


class YamlProblems(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.marks: dict[KeyPath, Mark] = {}
        self.key_marks: dict[KeyPath, Mark] = {}
        self.raw: dict[KeyPath, str] = {}
        self.count = 0
        self.seen: set[int] = set()

    def _mark(self, node: yaml.Node) -> Mark:
        return Mark(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, path: KeyPath, message: str) -> None:
        m = self._mark(node)
        self.problems.append(
            Problem(file=m.file, line=m.line, column=m.column, path=dotted(path), message=message)
        )

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            msg = f"document has more than {MAX_NODES} values; manifests are small"
            raise YamlProblems([Problem(file=self.file, line=1, column=1, message=msg)])
        self.marks[path] = self._mark(node)
        if len(path) > MAX_DEPTH:
            self._fail(node, (), f"nested deeper than {MAX_DEPTH} levels; the limit is {MAX_DEPTH}")
            raise YamlProblems(self.problems)
        if id(node) in self.seen:  # an alias: stop here, before a recursive one loops
            self._fail(node, path, f"invalid YAML: {aliases_refused(self.file)}")
            raise YamlProblems(self.problems)
        self.seen.add(id(node))
        if node.tag not in _STANDARD_TAGS:
            self._fail(node, path, f"YAML tag {node.tag!r} is not allowed (plain values only)")
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                    self._fail(key_node, path, "keys must be plain strings")
                    continue
                key = key_node.value
                if key in out:
                    first = self.key_marks[(*path, key)]
                    self._fail(key_node, (*path, key), f"duplicate key (first set on line {first.line})")
                    continue
                self.key_marks[(*path, key)] = self._mark(key_node)
                out[key] = self.build(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)
        if not node.style:  # plain: None from PyYAML, "" from libyaml
            self.raw[path] = node.value
        constructor = yaml.SafeLoader.yaml_constructors[node.tag]
        # The safe constructors for scalars need no loader state.
        try:
            return constructor(yaml.SafeLoader(""), node)
        except ValueError:  # Python's int digit limit, a malformed timestamp
            shown = (
                node.value
                if len(node.value) <= 40
                else f"{node.value[:37]}... ({len(node.value)} characters)"
            )
            kind = {"int": "an integer", "float": "a number", "timestamp": "a date"}.get(
                node.tag.rsplit(":", 1)[-1], "a value"
            )
            self._fail(node, path, f"{shown!r} cannot be read as {kind}; quote it")
            return node.value


class _NoAliasComposer(yaml.SafeLoader):
    """Refuses anchors and aliases before they can be expanded (no alias bombs), and nesting
    deeper than ``MAX_DEPTH`` before its recursion can exhaust Python's."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.MarkedYAMLError(problem=ALIASES_REFUSED, problem_mark=event.start_mark)
        if self.depth > MAX_DEPTH:
            problem = f"nested deeper than {MAX_DEPTH} levels; the limit is {MAX_DEPTH}"
            raise yaml.MarkedYAMLError(problem=problem, problem_mark=event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _compose(text: str) -> yaml.Node | None:
    """The node tree of ``text``: libyaml's composer when present (fast), else the pure-Python
    one. Both keep an alias as a second reference to one node, never a copy, so nothing is
    expanded; with libyaml, ``_Builder`` refuses a node it meets twice."""
    if getattr(yaml, "__with_libyaml__", False):
        loader = yaml.CSafeLoader(text)
        try:
            return loader.get_single_node()
        finally:
            loader.dispose()
    py_loader = _NoAliasComposer(text)
    try:
        return py_loader.get_single_node()
    finally:
        py_loader.dispose()


def load(path: Path, display: str) -> Source:
    """Load one YAML file; raise ``YamlProblems`` with located messages on any defect, the file
    itself included (a directory, a FIFO, a dangling link, unreadable)."""

    def refused(message: str) -> YamlProblems:  # the guard's message names the file first
        why = message.removeprefix(display).removeprefix(":").strip()
        return YamlProblems([Problem(file=display, message=why)])

    data = read_file(path, what=display, limit=MAX_BYTES, error=refused)
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        msg = f"not UTF-8 text ({exc.reason})"
        raise YamlProblems([Problem(file=display, message=msg)]) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        msg = "holds a NUL byte; a manifest is text"
        raise YamlProblems([Problem(file=display, line=line, message=msg)])
    return loads(text, display)


def loads(text: str, display: str) -> Source:
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        said = aliases_refused(display) if exc.problem == ALIASES_REFUSED else (exc.problem or exc)
        message = f"invalid YAML: {said}"
        raise YamlProblems([Problem(file=display, line=line, column=col, message=message)]) from None
    except yaml.YAMLError as exc:
        problem = Problem(file=display, message=f"invalid YAML: {exc}")
        raise YamlProblems([problem]) from None
    if node is None:
        raise YamlProblems([Problem(file=display, line=1, column=1, message="file is empty")])
    builder = _Builder(display)
    data = builder.build(node, ())
    if builder.problems:
        raise YamlProblems(builder.problems)
    return Source(file=display, data=data, marks=builder.marks, key_marks=builder.key_marks, raw=builder.raw)
