"""Commands that keep a runner's disk bounded: cache du, cache prune (release/run/cache.py)."""

from __future__ import annotations

from typing import Any

import click

from ..guard.limits import MAX_FOLDER_DEPTH
from ..guard.shown import path_text, shown
from .app import State, _emit_json, cli, json_option, pass_state
from .output import info, notice


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


@cli.group()
def cache() -> None:
    """What the cache holds, and giving space back (least recently used first).

    The cache is $XPU_RELEASE_CACHE (default ~/.cache/xpu-release). $XPU_RELEASE_CACHE_MAX (e.g.
    20G) brings it under that size after every publish and release.

    \b
    Examples:
      xpu-release cache du
      xpu-release cache prune --keep-storage 20G --engine
    """


@cache.command("du")
@json_option()
@pass_state
def cache_du(state: State, as_json: bool) -> None:
    """How much each kind of entry takes.

    \b
    Examples:
      xpu-release cache du
      xpu-release cache du --json
    """
    from ..release.run.cache import FACTS, usage

    folder = state.settings.cache
    kinds, survey = usage(folder)
    facts = survey.facts
    total = sum(u.size for u in kinds) + facts
    _said_skipped(survey.skipped)
    if as_json:
        _emit_json({
            "cache": path_text(folder),
            "kinds": [{"kind": u.kind, "what": u.what, "entries": u.count, "bytes": u.size} for u in kinds],
            "facts_bytes": facts,
            "total_bytes": total,
            "skipped_folders": survey.skipped,
        })  # fmt: skip
        return
    click.echo(path_text(folder))
    for u in kinds:
        click.echo(f"  {u.kind:<10} {_mb(u.size):>14}  {u.count:>6} entries  {u.what}")
    click.echo(f"  {'facts':<10} {_mb(facts):>14}  {'':>14}  {FACTS}")
    click.echo(f"  {'total':<10} {_mb(total):>14}")


def _said_skipped(skipped: int) -> None:
    if skipped:
        notice(f"{skipped} folders not counted: deeper than {MAX_FOLDER_DEPTH} levels, or unreadable")


@cache.command("prune")
@click.option(
    "--keep-storage", metavar="SIZE", help="Remove the least recently used until the rest fits (20G, 500M)."
)
@click.option("--older-than", metavar="AGE", help="Remove what no run used for this long (7d, 12h, 30m).")
@click.option(
    "--engine", is_flag=True, help="Also remove images xpu-release built that no kept release needs."
)
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@click.option("--no-wait", is_flag=True, help="Remove nothing if a run uses the cache (exit 0, says so).")
@json_option()
@pass_state
def cache_prune(state: State, keep_storage: str | None, older_than: str | None, engine: bool, dry_run: bool,
                no_wait: bool, as_json: bool) -> None:  # fmt: skip
    """Remove compressed layers, fetched artifacts and build contexts, least recently used first.

    Leftovers of killed runs always go. Small facts (digest maps, smoke-test markers, build
    observations, kept evaluations) stay. A prune waits until no running command uses the cache.

    \b
    Examples:
      xpu-release cache prune --keep-storage 20G
      xpu-release cache prune --older-than 14d --engine
      xpu-release cache prune --keep-storage 0 --dry-run
    """
    from ..release.run.cache import exclusive, parse_age, parse_size, prune, prune_engine

    limit = parse_size(keep_storage, what="--keep-storage") if keep_storage is not None else None
    age = parse_age(older_than, what="--older-than") if older_than is not None else None
    folder = state.settings.cache
    out: dict[str, Any] = {"cache": path_text(folder), "dry_run": dry_run}
    waiting = lambda: notice("waiting: a run is using the cache")  # noqa: E731
    with exclusive(folder, wait=not no_wait, on_wait=waiting) as held:
        if not held:
            notice("nothing removed: a run is using the cache (--no-wait)")
            out["skipped"] = "in use"
            if as_json:
                _emit_json(out)
            return
        report = prune(folder, keep_storage=limit, older_than=age, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    out.update(removed=[path_text(e.path) for e in report.removed], freed_bytes=report.freed,
               kept_bytes=report.kept_size, facts_bytes=report.facts_size,
               stayed=[path_text(e.path) for e in report.stayed],
               skipped_folders=report.skipped)  # fmt: skip
    info(f"{verb} {len(report.removed)} entries ({_mb(report.freed)}); kept {_mb(report.kept_size)} "
         f"+ {_mb(report.facts_size)} of facts")  # fmt: skip
    _said_skipped(report.skipped)
    for e in report.stayed:
        notice(f"not removed whole: {shown(path_text(e.path))} (a folder deeper than {MAX_FOLDER_DEPTH} "
               "levels, or no permission): remove it by hand")  # fmt: skip
    if engine:
        from ..image.engine import Engine

        images = prune_engine(Engine.connect(), state.repo, dry_run=dry_run)
        out["engine"] = {"removed": list(images.removed), "kept": list(images.kept),
                         "refused": [{"image": i, "why": w} for i, w in images.refused]}  # fmt: skip
        info(f"engine: {verb} {len(images.removed)} images xpu-release built; kept {len(images.kept)}")
        for image_id, why in images.refused:
            notice(f"engine: kept {image_id[:19]}: {why}")
    if as_json:
        _emit_json(out)


def cache_limit(state: State) -> int | None:
    """$XPU_RELEASE_CACHE_MAX in bytes (None: not set); read before a publish starts, so that a
    mistake in it stops the run before anything is sent."""
    if not state.settings.cache_max:
        return None
    from ..release.run.cache import parse_size
    from ..settings import CACHE_MAX_ENV

    return parse_size(state.settings.cache_max, what=CACHE_MAX_ENV)


def cap_cache(state: State, limit: int | None) -> None:
    """After a publish or a release: bring the cache under ``limit`` (``cache_limit``)."""
    if limit is None:
        return
    from ..release.run.cache import cap_after_run

    report = cap_after_run(state.settings.cache, limit, state.cache_hold)
    if report is None:
        info("cache: not capped now, another run uses it")
    elif report.removed:
        info(f"cache: removed {len(report.removed)} entries ({_mb(report.freed)}) to stay under "
             f"{state.settings.cache_max}")  # fmt: skip
