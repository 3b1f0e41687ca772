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
from ..guard.generated import write_generated
from ..manifest import ImageSpec
from ..manifest.platforms import Platform
from ..manifest.registries import Registries
from ..oci.credentials import CredentialStore
from ..progress import Sink
from .baseimage import base_index, current_digest, ensure, provided, pull_auth
from .engine import Engine
from .lock import (
    Kept,
    Lock,
    Locks,
    base_missing,
    check_index,
    earlier_locks,
    lock_path,
    pin_base,
    pins_sha256,
    resolve,
)


@dataclass(frozen=True, kw_only=True)
class Relocked:
    lock: Locks  # a section per platform (one, for a release of linux/amd64 alone)
    earlier: tuple[Locks, str] | None  # the lock it kept pins from, and where it is
    asked_engine: bool  # the base moved (or nothing was known of it): its interpreter was asked


def relock(root: Path, spec: ImageSpec, registries: Registries, credentials: CredentialStore, *,
           engine: Callable[[], Engine], on_line: Sink, upgrade: bool = False) -> Relocked:  # fmt: skip
    """``spec``'s new lock (not written): the base pinned as its tag serves it now; a platformed
    release's base by its index, and each platform resolved with its own wheels against what
    that platform's base image provides."""
    check_index(spec)  # an unreachable index is the first thing to say
    if spec.platformed:
        found = base_index(spec, registries, credentials)
        current, digests = found if found is not None else (None, {})
    else:
        current = current_digest(spec, registries, credentials)
        digests = {spec.platforms[0]: current} if current is not None else {}
    if current is None:
        msg = f"{base_missing(spec)}: nothing to pin. No lock was written."
        raise LockError(msg)
    earlier = None if upgrade else earlier_locks(root, spec)
    sections, asked, running = [], False, _Once(engine)
    for platform in spec.platforms:
        base = pin_base(spec, digests[platform])
        before = _section(earlier[0], platform) if earlier else None
        if before is not None and before.base == base:
            facts = before.provided
        else:  # what the base provides is a fact of the lock: asked of the pinned base itself
            by_digest = (
                f"{registries.endpoint(spec.base.registry).prefix}/{spec.base.repository}@{digests[platform]}"
            )
            auth = pull_auth(spec, registries, credentials)
            ensure(running(), by_digest, on_line, auth, release=spec.base.release_ref)
            facts, asked = provided(running(), by_digest, spec.base.python), True
        keep = Kept.of(before, spec, platform) if before is not None else Kept()
        made = resolve(spec, base, facts, keep, platform if spec.platformed else None)
        sections.append((platform, made))
    if spec.platformed:
        lock = Locks(pins_sha256=pins_sha256(spec), base=pin_base(spec, current), by_platform=tuple(sections),
                     platformed=True)  # fmt: skip
    else:
        lock = Locks.single(sections[0][1])
    return Relocked(lock=lock, earlier=earlier, asked_engine=asked)


def _section(earlier: Locks, platform: Platform) -> Lock | None:
    """The earlier lock's section for ``platform`` (a single-platform lock is linux/amd64's)."""
    return next((lock for p, lock in earlier.by_platform if p == platform), None)


class _Once:
    """The engine, connected when first needed (a lock whose bases are all known needs none)."""

    def __init__(self, connect: Callable[[], Engine]) -> None:
        self._connect = connect
        self._engine: Engine | None = None

    def __call__(self) -> Engine:
        if self._engine is None:
            self._engine = self._connect()
        return self._engine


def write_lock(root: Path, spec: ImageSpec, lock: Lock | Locks) -> Path:
    """The lock at its committed place (``images/<image>/<version>/requirements.lock``)."""
    path = lock_path(root, spec)
    write_generated(path, lock.render(spec).encode(), root=root, what="lock file")
    return path
