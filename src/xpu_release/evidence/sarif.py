"""The gate's findings as SARIF 2.1.0, which GitHub code scanning (and other tools) take.

One rule per vulnerability (its main id; ``security-severity`` from the CVSS score, which GitHub
reads), one result per finding, located at the manifest of the release (the pins live there):
``error`` when it blocks the release, ``note`` when a reviewed exception covers it, ``warning``
otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from .scan import Finding, ScanResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# CVSS's qualitative levels as GitHub's security-severity numbers, for findings with no score.
_LEVEL_SCORE = {"critical": 9.0, "high": 7.0, "medium": 4.0, "low": 0.1}


def _level(f: Finding) -> str:
    if f.blocking:
        return "error"
    return "note" if f.exception is not None else "warning"


def _message(f: Finding) -> str:
    fix = f"fixed in {', '.join(f.fixed)}" if f.fixed else "no fixed version yet"
    text = f"{f.ids[0]} ({f.level}) in {f.package.name} {f.package.version}: {fix}."
    if f.exception is not None:
        ex = f.exception
        text += f" VEX {ex.status} ({ex.reason}) at {ex.where}, review by {ex.review_by}."
    if f.note:
        text += f" {f.note}."
    return text


def to_sarif(result: ScanResult, *, manifest: str, version: str) -> str:
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for f in result.findings:
        score = f.score if f.score is not None else _LEVEL_SCORE.get(f.level)
        rule: dict[str, Any] = {
            "id": f.ids[0],
            "shortDescription": {"text": f.summary or f.ids[0]},
            "properties": {"tags": ["security", "vulnerability"], "aliases": list(f.ids[1:])},
        }
        if score is not None:
            rule["properties"]["security-severity"] = f"{score:.1f}"
        rules.setdefault(f.ids[0], rule)
        results.append({
            "ruleId": f.ids[0],
            "level": _level(f),
            "message": {"text": _message(f)},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": manifest},
                                                "region": {"startLine": 1}}}],
            "partialFingerprints": {"package/id": f"{f.package.ecosystem}/{f.package.name}/{f.ids[0]}"},
        })  # fmt: skip
    doc = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "xpu-release", "version": version, "rules": list(rules.values())}},
            "automationDetails": {"id": f"xpu-release/scan/{result.ref}/"},
            "results": results,
        }],
    }  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"
