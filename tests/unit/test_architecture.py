"""The house's plan, enforced: wings import one way (cli → release → evidence → image → manifest
→ oci → the leaf modules), no module outside ``cli/`` reads the environment, and no module or
class grows past what one person can hold in mind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "xpu_release"
# Higher may import lower, never the reverse; a wing may import itself.
RANK = {"cli": 6, "release": 5, "evidence": 4, "image": 3, "manifest": 2, "oci": 1}
LEAVES = {"errors", "secrets", "labels", "files", "settings", "progress", "guard", "__init__", "__main__"}
MAX_MODULE_LINES = 420  # "about 400": no module past what one person holds in mind
MAX_CLASS_LINES = 220  # "about 200"


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def wing_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def rank(wing: str) -> int:
    return RANK.get(wing, 0)


def imported_wings(path: Path) -> set[tuple[str, int]]:
    """Every wing (or leaf module) ``path`` imports from inside the package, with the line."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parent.parts
    out: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
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
        doc = ast.get_docstring(ast.parse((SRC / wing / "__init__.py").read_text())) or ""
        assert "Owns" in doc, wing
        assert "May import" in doc, wing


def test_only_the_cli_reads_the_environment() -> None:
    readers = []
    for path in modules():
        if wing_of(path) == "cli" or path.name == "smoke_plugin.py":  # the plugin's hand-off from its parent
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("environ", "getenv", "environb")
            ):
                readers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert readers == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_and_no_class_grows_past_one_head(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name}: {text.count(chr(10))} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            assert size <= MAX_CLASS_LINES, f"{path.name}: class {node.name} is {size} lines"


def test_every_module_says_why_it_exists() -> None:
    missing = [str(p.relative_to(SRC)) for p in modules() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert missing == []
