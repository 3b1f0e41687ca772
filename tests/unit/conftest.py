"""Unit tests see only the repository's own registries file, whatever the shell exported, and
write into a cache folder of their own, never the user's (a release engineer's cache, or the
stack's that `ci/local-stack.sh reset` is emptying at the same moment); and jsonschema, which test
modules import as they are collected, compiles rfc3987's IRI grammars when an IRI is first
checked, as in the commands (``release.iri.defer_iri_grammars``), not in each worker's collection
(about 1 s of CPU a worker)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from xpu_release.oci.transport import RetryPolicy
from xpu_release.release.model.iri import defer_iri_grammars
from xpu_release.secrets import forget_all
from xpu_release.settings import CACHE_ENV, Settings, use

# One folder per test process (each xdist worker imports this once), removed when it ends.
_CACHE = tempfile.mkdtemp(prefix="xpu-unit-cache-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ[CACHE_ENV] = _CACHE
use(Settings.from_env(os.environ))

defer_iri_grammars()

STACK_ENVIRONMENT = (
    "XPU_RELEASE_REGISTRIES",
    "XPU_RELEASE_ROOT",
    "XPU_RELEASE_USERNAME",
    "XPU_RELEASE_PASSWORD",
)


def forget_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STACK_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_stack_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    forget_the_stack(monkeypatch)
    yield
    forget_all()  # a test's passwords are hidden in its own output only, not in the next test's


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries follow one another at once: a test of what a command says when a registry does
    not answer makes every attempt the command's policy makes, without waiting out its backoff
    (about 5 s with the default policy)."""
    monkeypatch.setattr(RetryPolicy, "delay", lambda _self, _attempt, _retry_after: 0.0)
