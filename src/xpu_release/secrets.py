"""Secrets are registered once, where they are read, and redacted from everything we print."""

from __future__ import annotations

import os

_SECRETS: set[str] = set()
ARTIFACT_TOKEN_ENV = "XPU_RELEASE_ARTIFACT_TOKEN"


def register(value: str | None) -> str | None:
    """Remember ``value`` so that ``redact`` hides it; returns it unchanged."""
    if value and len(value) >= 4:
        _SECRETS.add(value)
    return value


def redact(text: str) -> str:
    for s in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def artifact_token() -> str | None:
    """The bearer token for private artifact URLs, from the environment only (never argv)."""
    return register(os.environ.get(ARTIFACT_TOKEN_ENV) or None)
