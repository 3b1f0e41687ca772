"""The evaluation as the release notes and ``diff`` say it, from the release record alone (never
measured again): the seed's section "E2E性能收益评估", with its two tables, the image against its
base and the release it extends (镜像对比基础镜像&迭代评估), and each optimisation's contribution
(核心组件E2E性能贡献分析). The same record always renders the same notes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import ReleaseError
from ...guard.shown import shown_cell
from ...image.evaluation import NOT_COMPARED, SERVED
from ...manifest import ImageSpec, Repo
from ...manifest.diff import Change
from ..model.record import ReleaseRecord, default_path, read_optional

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "title": "End-to-end performance evaluation",
        "against": "The image against its base and the previous release",
        "contribution": "Each optimisation's contribution", "variant": "Variant", "median": "median",
        "vs": "against {ref}", "plain": "plain (no optimisation)", "vs_plain": "against plain",
        "regression": "regression", "undecided": "undecided", "within": "within the threshold both ways",
        "no regression": "no regression shown",
        "undecided_passed": "Undecided, passed by the manifest's `evaluation.undecided: pass`",
        "improvement": "improvement", "accepted": "accepted regression", "skipped": "Not evaluated",
        "method": "Measured with `{command}`: {rounds} rounds per image and variant ({warmup} warm-up "
                  "discarded), interleaved, {how} with CPU set {cpuset} and {memory} MB; each "
                  "figure is the median of the rounds' ratios of {metric} ({better} is better) with its "
                  "{confidence} % bootstrap interval (rounds were added, look after look, until each "
                  "comparison was decided: {looks}). A regression is worse by more than {threshold} % over "
                  "its whole interval.",
        "higher": "higher", "lower": "lower", "rounds_needed": "about {n} rounds would decide it",
        "served": "each image and variant in one container for the stage, started (imported, compiled) "
                  "before the first round and paused while the others ran",
        "a container a run": "in a container per run",
        "not_compared": "Not compared with any other image",
        "not_compared_cell": "not compared (the manifest does not compare this variant with it)",
    },
    "zh": {
        "title": "E2E性能收益评估", "against": "镜像对比基础镜像&迭代评估",
        "contribution": "核心组件E2E性能贡献分析", "variant": "对比项", "median": "中位数",
        "vs": "对比{ref}", "plain": "plain（不开启任何优化）", "vs_plain": "对比plain",
        "regression": "性能回退", "undecided": "无法判定", "within": "双向均在阈值之内",
        "no regression": "未见性能回退",
        "undecided_passed": "无法判定，按清单的`evaluation.undecided: pass`放行",
        "improvement": "性能提升", "accepted": "已接受的性能回退", "skipped": "未评估",
        "method": "使用`{command}`测量：每个镜像与对比项各{rounds}轮（另有{warmup}轮预热，不计入），"
                  "交替运行，{how}，容器使用CPU集合{cpuset}与{memory} MB内存；每个数值为{metric}（越{better}"
                  "越好）中位数之比及其{confidence}% bootstrap置信区间（逐次增加轮数直至每项对比可判定："
                  "{looks}）。整个区间超出{threshold}%才判定为性能回退。",
        "higher": "高", "lower": "低", "rounds_needed": "约需{n}轮才能判定",
        "served": "每个镜像与对比项在整个阶段使用一个容器，首轮之前完成启动（导入与编译），其他项运行时暂停",
        "a container a run": "每次运行一个容器",
        "not_compared": "未与任何其他镜像对比",
        "not_compared_cell": "未对比（清单未将此对比项与其对比）",
    },
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Section:
    """What the notes' template shows: a method line, the like-with-like table (a header row and
    rows), the contributions table, and the regressions accepted with their reasons."""

    skipped: str | None
    not_compared: str | None  # why nothing was compared with another image (None: something was)
    undecided: str | None  # why a release passed with comparisons undecided (None: none was)
    method: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    contributions: tuple[tuple[str, str], ...]
    accepted: tuple[str, ...]


def _cell(c: dict[str, Any], t: dict[str, str], quote: Callable[[object], str] = str) -> str:
    """A comparison as a cell: ratio, interval and verdict, or its note (outside words, which
    ``quote`` shows: escaped for Markdown in the notes)."""
    if any(c.get(k) is None for k in ("ratio", "low", "high")):
        return quote(c.get("note") or "-")
    said = c.get("verdict")  # null: a comparison the record does not judge (the schema allows it)
    verdict = t["accepted"] if c.get("accepted") else "" if said is None else t.get(str(said), str(said))
    cell = f"{c['ratio']:.2f}x [{c['low']:.2f}, {c['high']:.2f}] {verdict}".rstrip()
    if c.get("verdict") == "undecided" and c.get("rounds_needed"):
        cell += f" ({t['rounds_needed'].format(n=c['rounds_needed'])})"
    return cell


def section(record: ReleaseRecord | None, lang: str) -> Section | None:
    """The notes' evaluation section of ``record`` (None: no evaluation on it)."""
    ev = record.evaluation if record is not None else None
    if not ev:
        return None
    t = LABELS[lang]
    if ev.get("status") == "skipped":
        return Section(skipped=shown_cell(ev.get("reason")), not_compared=None, undecided=None, method="",
                       header=(), rows=(), contributions=(), accepted=())  # fmt: skip
    comparisons = [c for c in ev.get("comparisons") or () if isinstance(c, dict)]
    gated = [c for c in comparisons if c.get("against") != "plain"]
    refs = list(dict.fromkeys(str(c["against_ref"]) for c in gated))
    variants = list(
        dict.fromkeys(str(a["variant"]) for a in ev.get("arms") or () if a.get("image") == "this")
    )
    medians = {str(a["variant"]): a.get("median") for a in ev.get("arms") or () if a.get("image") == "this"}
    unsupported = {
        str(a["variant"]): a.get("unsupported") for a in ev.get("arms") or () if a.get("image") == "this"
    }
    rows = []
    for v in variants:
        name = t["plain"] if v == "plain" else shown_cell(v)
        median = medians.get(v)
        cells = [
            f"{median:.1f}" if isinstance(median, int | float) else shown_cell(unsupported.get(v) or "-")
        ]
        for ref in refs:
            found = next((c for c in gated if c["variant"] == v and c["against_ref"] == ref), None)
            cells.append(_cell(found, t, shown_cell) if found else t["not_compared_cell"])
        rows.append((name, *cells))
    metric = str(ev.get("metric"))
    method = t["method"].format(
        command=" ".join(ev.get("command") or ()), rounds=ev.get("rounds"), warmup=ev.get("warmup_rounds"),
        cpuset=ev.get("cpuset"), memory=ev.get("memory_mb"), metric=metric, how=_how(ev, t),
        better=t.get(str(ev.get("better")), ""), threshold=ev.get("threshold_percent"),
        confidence=_percent((ev.get("method") or {}).get("confidence")),
        looks=", ".join(str(n) for n in ev.get("looked") or ()) or str(ev.get("rounds")),
    )  # fmt: skip
    # Every cell and line below may quote outside words (a workload's reason, an engine's or a
    # registry's answer, a record edited by hand): shown escaped for Markdown, one line each.
    vs = [t["vs"].format(ref=shown_cell(r)) for r in refs]
    header = (t["variant"], f"{shown_cell(metric)} ({t['median']})", *vs)
    contributions = tuple(
        (shown_cell(c["variant"]), _cell(c, t, shown_cell))
        for c in comparisons
        if c.get("against") == "plain"
    )
    accepted = tuple(f"{shown_cell(c['variant'])} {t['vs'].format(ref=shown_cell(c['against_ref']))}"
                     f"{': ' if lang == 'en' else '：'}{shown_cell(c['accepted'])}"
                     for c in gated if c.get("accepted"))  # fmt: skip
    not_compared = shown_cell(ev.get("reason")) if ev.get("status") == NOT_COMPARED else None
    open_ = ev.get("status") == "passed" and any(c.get("verdict") == "undecided" for c in gated)
    undecided = f"**{t['undecided_passed']}**: {shown_cell(ev.get('reason'))}" if open_ else None
    return Section(skipped=None, not_compared=not_compared, undecided=undecided, method=method, header=header,
                   rows=tuple(rows), contributions=contributions, accepted=accepted)  # fmt: skip


def _how(ev: dict[str, Any], t: dict[str, str]) -> str:
    """How the arms ran, as the record's method says (a record from before it said: a container a run)."""
    return t["served"] if (ev.get("method") or {}).get("runs") == SERVED else t["a container a run"]


def _percent(confidence: object) -> str:
    """A confidence as the notes say it: 95, 99, 99.5."""
    value = float(confidence) if isinstance(confidence, int | float) else 0.95
    return f"{100 * value:.1f}".rstrip("0").rstrip(".")


def _evaluated(repo: Repo, spec: ImageSpec) -> dict[str, Any] | None:
    try:
        rec = read_optional(default_path(repo.root, spec.image, spec.version))
    except ReleaseError:
        return None
    ev = rec.evaluation if rec is not None else None
    return ev if ev and ev.get("status") != "skipped" else None


def evaluation_changes(repo: Repo, old: ImageSpec, new: ImageSpec) -> list[Change]:
    """What ``diff OLD NEW`` adds from NEW's record: each variant of NEW measured against OLD
    (when NEW's evaluation compared it with OLD, as with the release it extends), and each other
    variant both records measured by its medians in the two (measured apart: on another day,
    maybe another machine)."""
    after = _evaluated(repo, new)
    if after is None:
        return []
    metric = str(after.get("metric"))
    direct = {
        str(c["variant"]): c
        for c in after.get("comparisons") or ()
        if c.get("against_ref") in (old.ref, f"{old.ref} (local image)")
    }
    changes = [Change(section="evaluation", id=v, name=f"{v} {metric}", kind="changed", old="1.00x",
                      new=_cell(c, LABELS["en"])) for v, c in direct.items()]  # fmt: skip
    before = _evaluated(repo, old)
    if before is None:
        return changes

    def medians(ev: dict[str, Any]) -> dict[str, float]:
        return {str(a["variant"]): float(a["median"]) for a in ev.get("arms") or ()
                if a.get("image") == "this" and isinstance(a.get("median"), int | float)}  # fmt: skip

    was, now = medians(before), medians(after)
    return changes + [
        Change(section="evaluation", id=v, name=f"{v} {metric} (medians of two records)", kind="changed",
               old=f"{was[v]:.1f}", new=f"{now[v]:.1f} ({now[v] / was[v]:.2f}x)")
        for v in now if v in was and was[v] > 0 and v not in direct
    ]  # fmt: skip
