"""The releases as a graph: which release builds on which (a base that is one of ours), every
release that builds on a set of them, and an order to build them in, wave after wave."""

from __future__ import annotations

from .loader import Repo, parse_ref
from .versions import version_key


def descendants(repo: Repo, refs: set[str]) -> set[str]:
    """Every release that builds on one of ``refs``, directly or through other releases."""
    out = set(refs)
    changed = True
    parents = {ref: repo.base_release(ref) for ref in repo.refs()}
    while changed:
        changed = False
        for ref, parent in parents.items():
            if parent in out and ref not in out:
                out.add(ref)
                changed = True
    return out


def build_order(repo: Repo, refs: list[str]) -> list[list[str]]:
    """``refs`` in waves: each wave builds only on releases of earlier waves (or on none of
    ``refs``), so a wave's releases can run in parallel and the next waits for it."""
    remaining = set(refs)
    waves: list[list[str]] = []
    while remaining:
        wave = [r for r in remaining if repo.base_release(r) not in remaining]
        if not wave:  # a cycle (validate reports it): one at a time, in name order
            wave = sorted(remaining)[:1]
        waves.append(sorted(wave, key=lambda r: (parse_ref(r)[0], version_key(parse_ref(r)[1]))))
        remaining -= set(wave)
    return waves
