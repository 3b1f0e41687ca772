"""The house's plan, enforced: wings import one way (cli → release → evidence → image → manifest
→ oci → the leaf modules), no two modules import each other around a circle (not even from
inside a function), no module outside ``cli/`` reads the environment, and no module or class
grows past what one person can hold in mind."""

from __future__ import annotations

import ast
import functools
import itertools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "xpu_release"
# Higher may import lower, never the reverse; a wing may import itself.
RANK = {"cli": 6, "release": 5, "evidence": 4, "image": 3, "manifest": 2, "oci": 1}
LEAVES = {"errors", "secrets", "labels", "files", "settings", "progress", "guard", "__init__", "__main__"}
MAX_MODULE_LINES = 400  # no module past what one person holds in mind
MAX_CLASS_LINES = 200


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def wing_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def rank(wing: str) -> int:
    return RANK.get(wing, 0)


@functools.cache
def _parsed(text: str) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    tree = ast.parse(text)
    return tree, tuple(ast.walk(tree))


def parsed(path: Path) -> ast.Module:
    """The module at ``path``, parsed once per text (these tests read each module six times)."""
    return _parsed(path.read_text())[0]


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, as ``ast.walk`` gives them."""
    return _parsed(path.read_text())[1]


def imported_wings(path: Path) -> set[tuple[str, int]]:
    """Every wing (or leaf module) ``path`` imports from inside the package, with the line."""
    package = path.relative_to(SRC).parent.parts
    out: set[tuple[str, int]] = set()
    for node in nodes(path):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[: len(package) - (node.level - 1)])
            target = [*base, *(node.module.split(".") if node.module else [])]
            if target:
                out.add((target[0], node.lineno))
            else:  # from .. import name: each name is a module of the package
                out.update((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xpu_release."):
            out.add((node.module.split(".")[1], node.lineno))  # type: ignore[union-attr]
    return out


def test_wings_import_one_way() -> None:
    against = []
    for path in modules():
        mine = wing_of(path)
        for wing, line in imported_wings(path):
            if wing in LEAVES or wing == "__version__" or wing == mine or mine == "__main__":
                continue
            if (mine in LEAVES and mine not in ("__init__", "__main__")) or rank(wing) >= rank(mine):
                against.append(f"{path.relative_to(SRC)}:{line}: {mine} imports {wing}")
    assert against == []


def test_every_wing_says_what_it_owns_and_may_import() -> None:
    for wing in RANK:
        doc = ast.get_docstring(parsed(SRC / wing / "__init__.py")) or ""
        assert "Owns" in doc, wing
        assert "May import" in doc, wing


def test_only_the_cli_reads_the_environment() -> None:
    readers = []
    for path in modules():
        if wing_of(path) == "cli" or path.name == "smoke_plugin.py":  # the plugin's hand-off from its parent
            continue
        if path.parent.name == "workloads":  # run inside images, switched by their users' environment
            continue
        for node in nodes(path):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("environ", "getenv", "environb")
            ):
                readers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert readers == []


# No module but settings.py names a variable (a set, should one ever need to: none does).
NAMES_AGAIN: set[str] = set()


def test_every_environment_variable_is_named_once_in_settings() -> None:
    # Settings are read once, by one module (cibuildwheel's options.py): a variable's name spelt
    # anywhere else is a second place to change when it does.
    again = []
    for path in modules():
        rel = str(path.relative_to(SRC))
        if rel == "settings.py" or rel in NAMES_AGAIN:
            continue
        for node in nodes(path):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value.startswith("XPU_RELEASE_") and value.isupper():
                again.append(f"{rel}:{node.lineno}: {value}")
    assert again == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_and_no_class_grows_past_one_head(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name}: {text.count(chr(10))} lines"
    for node in nodes(path):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            assert size <= MAX_CLASS_LINES, f"{path.name}: class {node.name} is {size} lines"


def test_every_module_says_why_it_exists() -> None:
    missing = [str(p.relative_to(SRC)) for p in modules() if not ast.get_docstring(parsed(p))]
    assert missing == []


# --- no circles ---------------------------------------------------------------------------------


def module_name(path: Path, src: Path) -> str:
    """``xpu_release.evidence.scan`` for ``src/xpu_release/evidence/scan.py`` (a package by its
    ``__init__``)."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(src: Path) -> dict[str, dict[str, int]]:
    """Module → every module of the package it imports, with the line: at the top, inside a
    function or under ``TYPE_CHECKING`` alike (a circle hidden in a function is still a circle).
    ``from package import name`` is an import of the module ``name`` when there is one, else of
    the package."""
    paths = {module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    top = src.name
    graph: dict[str, dict[str, int]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in nodes(path):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                named = (f"{module}.{a.name}" for a in node.names)
                targets = [n if n in paths else module for n in named]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in paths and target != name and (target == top or target.startswith(f"{top}.")):
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every set of modules that import one another around a circle (the strongly connected
    components of more than one module, Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def shown_circle(graph: dict[str, dict[str, int]], members: list[str]) -> str:
    """One way around a circle, each step with the line of its import."""
    start, path = members[0], [members[0]]
    while True:
        here = path[-1]
        step = next(m for m in sorted(graph[here]) if m in members and (m == start or m not in path))
        path.append(step)
        if step == start or len(path) > len(members):
            break
    return " → ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(path)) + f" → {start}"


def test_no_modules_import_one_another_around_a_circle() -> None:
    graph = import_graph(SRC)
    assert [shown_circle(graph, c) for c in circles(graph)] == []


def test_a_circle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    # The check itself: the one kind of circle the interpreter lets pass (the import runs late).
    pkg = tmp_path / "xpu_release"
    (pkg / "wing").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "wing" / "__init__.py").write_text("")
    (pkg / "wing" / "a.py").write_text("from .b import B\n")
    (pkg / "wing" / "b.py").write_text("def make():\n    from .c import C\n    return C\nB = 1\n")
    (pkg / "wing" / "c.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from . import a\n")
    (pkg / "wing" / "d.py").write_text("from . import a, c\n")  # imports into the circle: not in it

    graph = import_graph(pkg)

    assert circles(graph) == [["xpu_release.wing.a", "xpu_release.wing.b", "xpu_release.wing.c"]]
    assert shown_circle(graph, circles(graph)[0]) == (
        "xpu_release.wing.a (line 1) → xpu_release.wing.b (line 2) → xpu_release.wing.c (line 3) → "
        "xpu_release.wing.a"
    )
