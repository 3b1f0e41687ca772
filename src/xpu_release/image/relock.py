"""``lock`` as one step others can run too (``patch`` locks the release it writes): pin the
base tag to the digest it serves now, learn what that base provides, resolve the pins keeping
what the earlier lock chose.

What a base provides is a fact of its digest: when the earlier lock pinned the same digest, its
``# provided:`` lines are that fact and no engine is asked (a bump of a pin on an unmoved base
locks without Docker). A base that moved is asked in a throwaway container, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LockError
from ..guard.writing import write_bytes
from ..manifest import ImageSpec
from ..manifest.registries import Registries
from ..oci.credentials import CredentialStore
from ..progress import Sink
from .baseimage import current_digest, ensure, provided, pull_auth
from .engine import Engine
from .lock import Kept, Lock, base_missing, check_index, earlier_lock, lock_path, pin_base, resolve


@dataclass(frozen=True, kw_only=True)
class Relocked:
    lock: Lock
    earlier: tuple[Lock, str] | None  # the lock it kept pins from, and where it is
    asked_engine: bool  # the base moved (or nothing was known of it): its interpreter was asked


def relock(root: Path, spec: ImageSpec, registries: Registries, credentials: CredentialStore, *,
           engine: Callable[[], Engine], on_line: Sink, upgrade: bool = False) -> Relocked:  # fmt: skip
    """``spec``'s new lock (not written): the base pinned as its tag serves it now."""
    check_index(spec)  # an unreachable index is the first thing to say
    current = current_digest(spec, registries, credentials)
    if current is None:
        msg = f"{base_missing(spec)}: nothing to pin. No lock was written."
        raise LockError(msg)
    base = pin_base(spec, current)
    earlier = None if upgrade else earlier_lock(root, spec)
    if earlier is not None and earlier[0].base == base:
        facts, asked = earlier[0].provided, False
    else:
        # What the base provides is a fact of the lock: asked of the pinned base itself.
        running = engine()
        by_digest = f"{registries.endpoint(spec.base.registry).prefix}/{spec.base.repository}@{current}"
        ensure(running, by_digest, on_line, pull_auth(spec, registries), release=spec.base.release_ref)
        facts, asked = provided(running, by_digest, spec.base.python), True
    keep = Kept.of(earlier[0], spec) if earlier else Kept()
    return Relocked(lock=resolve(spec, base, facts, keep), earlier=earlier, asked_engine=asked)


def write_lock(root: Path, spec: ImageSpec, lock: Lock) -> Path:
    """The lock at its committed place (``images/<image>/<version>/requirements.lock``)."""
    path = lock_path(root, spec)
    write_bytes(path, lock.render(spec).encode(), what="lock file")
    return path
