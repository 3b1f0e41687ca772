"""The cli wing: the ``xpu-release`` command line: Click, option parsing, output, exit codes.

Owns: reading the environment (once, into ``Settings``), the commands, what a person sees
(``output``), and mapping the ``ReleaseError`` hierarchy (``errors.py``) and the one rule for
user errors to messages and exit statuses.

May import: every wing. Nothing imports it.
"""

from . import (
    ci,
    evaluating,
    gating,
    housekeeping,
    images,
    lifecycle,
    manifests,
    mirroring,
    publishing,
    reference,
    releases,
    watching,
)
from .app import cli, main

__all__ = [
    "ci",
    "cli",
    "evaluating",
    "gating",
    "housekeeping",
    "images",
    "lifecycle",
    "main",
    "manifests",
    "mirroring",
    "publishing",
    "reference",
    "releases",
    "watching",
]
