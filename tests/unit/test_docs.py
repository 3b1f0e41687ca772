"""The documentation holds together: every relative link in README.md, docs/ and the benchmark
history names a file that exists, and an anchor a heading of that file has (as GitHub makes
them), so a page moved or a heading renamed is found by the test, not by a reader; and the
architecture page names every module of every wing, so a new module is placed there too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "bench" / "results" / "HISTORY.md", *(ROOT / "docs").rglob("*.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.is_file() and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor}")

    assert broken == []


def test_the_pages_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}

    assert {"README.md", "docs/index.md", "docs/recipes.md", "docs/reference/commands.md"} <= names


def test_the_architecture_page_names_every_module_of_every_wing() -> None:
    page = (ROOT / "docs" / "maintaining" / "architecture.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `/"): line for line in page.splitlines() if line.startswith("| `")}
    src = ROOT / "src" / "xpu_release"
    missing = [
        f"{wing}/{module.stem}"
        for wing in ("cli", "release", "evidence", "image", "manifest", "oci")
        for module in sorted((src / wing).glob("*.py"))
        if module.stem != "__init__" and f"`{module.stem}`" not in rows.get(wing, "")
    ]

    assert missing == []
