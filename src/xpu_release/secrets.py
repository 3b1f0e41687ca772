"""Secrets are registered once, where they are read, and redacted from everything we print."""

from __future__ import annotations

_SECRETS: set[str] = set()


def register(value: str | None) -> str | None:
    """Remember ``value`` so that ``redact`` hides it; returns it unchanged."""
    if value and len(value) >= 4:
        _SECRETS.add(value)
    return value


def redact(text: str) -> str:
    for s in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(s, "***")
    return text
