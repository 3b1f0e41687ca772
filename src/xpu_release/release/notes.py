"""``notes``: release notes in Markdown, from the manifest (and the release record), through
``templates/notes.md.j2``, in the structure of the published notes, in Chinese or English."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ReleaseError
from ..image.templating import render_template
from ..manifest import ImageSpec, Repo
from ..manifest.diff import Change, declared_upgrades, diff
from ..manifest.loader import version_key
from ..manifest.registries import Registries
from .evalnotes import LABELS as EVALUATION_LABELS
from .evalnotes import section as evaluation_section
from .record import ReleaseRecord, default_path, read_optional

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "intro": "This page describes the release of {image} {version}.",
        "main_features_and_fixes": "Main Features and Bug Fix Lists",
        "main_features": "Main Features", "bug_fixes": "Bug Fixes", "none": "(none)",
        "contents": "Contents", "scenario": "Scenario", "framework": "Framework",
        "accelerator": "Accelerator", "core_components": "Core components",
        "assets_auth": "Pulling the image over the internet needs an authentication key; "
                       "pulling through the VPC endpoint of your region is recommended (faster).",
        "public_image": "Public image", "vpc_image": "VPC image",
        "region_note": "{region-id} is the region of your ACS product, e.g. {regions}; {image:tag} is "
                       "the image's name and tag.",
        "colon": ": ", "list_sep": ", ", "stop": ".", "ref_open": " (", "ref_close": ")",
        "merged": ", with the features and bug fixes of those versions.",
        "endpoint": "Endpoint", "reference": "Reference", "not_published": "not published",
        "tested_image": "Image tested before publishing (config digest)",
        "attached": "Attached to the image by digest at every endpoint (OCI referrers)",
        "sbom": "SBOM (CycloneDX 1.6)", "provenance": "provenance (in-toto, SLSA v1)",
        "vex": "VEX (OpenVEX, the vulnerability gate's conclusions)",
        "provenance-bundle": "provenance as a Sigstore bundle (cosign)",
        "vex-bundle": "VEX as a Sigstore bundle (cosign)",
        "spdx": "SBOM (SPDX 2.3)",
        "switch": "How to enable", "pull": "Choose the image",
        "switches": "Enable the compiler and recompute optimisations through the API",
        "usage_advice": "Usage advice",
        "upgraded": "{name} upgraded to {new}", "base_upgraded": "Base image upgraded {name} to {new}",
        "changed": "{name} {old} → {new}", "added": "{name} {new} added", "removed": "{name} {old} removed",
        "downgraded": "{name} {old} → {new} (downgrade)",
        "scenarios": "training|inference",
        "security": "Security", "fixed_since": "Vulnerabilities fixed since {previous}",
        "open_vulns": "Known vulnerabilities in this release", "not_scanned": "Not scanned",
        "no_previous_scan": "(the release this one extends has no scan on record)",
    },
    "zh": {
        "intro": "本文介绍{image} {version}版本发布记录。",
        "main_features_and_fixes": "Main Features and Bug Fix Lists",
        "main_features": "Main Features", "bug_fixes": "Bugs Fix", "none": "（暂无）",
        "contents": "Contents", "scenario": "应用场景", "framework": "框架",
        "accelerator": "加速器", "core_components": "核心组件",
        "assets_auth": "通过公网拉取ACS AI容器镜像需要先获取鉴权密钥。"
                       "建议您使用VPC方式加速拉取AI容器镜像，减少镜像拉取的时间。",
        "public_image": "公网镜像", "vpc_image": "VPC镜像",
        "region_note": "{region-id}为您使用的ACS产品所在的开服地域，比如：{regions}等。"
                       "{image:tag}为实际镜像的名称和Tag。",
        "colon": "：", "list_sep": "、", "stop": "。", "ref_open": "（", "ref_close": "）",
        "merged": "，合入对应版本功能和Bug fix。",
        "endpoint": "端点", "reference": "镜像地址", "not_published": "未发布",
        "tested_image": "发布前经过测试的镜像（config digest）",
        "attached": "在每个端点按digest附加到镜像（OCI referrers）",
        "sbom": "SBOM（CycloneDX 1.6）", "provenance": "来源证明（in-toto，SLSA v1）",
        "vex": "VEX（OpenVEX，漏洞门禁的结论）",
        "provenance-bundle": "来源证明的 Sigstore 包（cosign）",
        "vex-bundle": "VEX 的 Sigstore 包（cosign）",
        "spdx": "SBOM（SPDX 2.3）",
        "switch": "开启方式", "pull": "选择镜像",
        "switches": "调用API开启编译器+重计算显存优化", "usage_advice": "使用建议",
        "upgraded": "{name}升级至{new}", "base_upgraded": "基础镜像升级{name}至{new}",
        "changed": "{name} {old} → {new}", "added": "支持{name} {new}", "removed": "移除{name} {old}",
        "downgraded": "{name}从{old}降级至{new}",
        "scenarios": "训练|推理",
        "security": "安全", "fixed_since": "自{previous}以来修复的漏洞",
        "open_vulns": "本版本中已知的漏洞", "not_scanned": "未扫描",
        "no_previous_scan": "（所扩展的版本没有扫描记录）",
    },
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Notes:
    spec: ImageSpec
    lang: str
    text: str


def previous_spec(repo: Repo, spec: ImageSpec) -> ImageSpec | None:
    """The release this one is compared with: the one it extends, else the version before it."""
    if spec.extends:
        return repo.load(spec.image, spec.extends)
    earlier = [v for v in repo.versions(spec.image) if version_key(v) < version_key(spec.version)]
    return repo.load(spec.image, earlier[-1]) if earlier else None


def _feature_line(c: Change, spec: ImageSpec, lang: str) -> str:
    t = LABELS[lang]
    if c.kind == "upgraded" and c.old is None:
        key = "base_upgraded" if spec.base.component == c.id else "upgraded"
        return t[key].format(name=c.name, new=c.new)
    if c.kind == "downgraded":
        return t["downgraded"].format(name=c.name, old=c.old, new=c.new)
    if c.kind in ("upgraded", "changed"):
        return t["changed"].format(name=c.name, old=c.old, new=c.new)
    return t[c.kind].format(name=c.name, old=c.old, new=c.new)


# Chinese typography: no space after full-width punctuation, none between two CJK characters,
# none before full-width punctuation (YAML folding and ASCII habits put them there).
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_FULL_PUNCT = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20"
_SPACES = re.compile(rf"(?<=[{_FULL_PUNCT}])[ \t]+|(?<=[{_CJK}])[ \t]+(?=[{_CJK}])|[ \t]+(?=[{_FULL_PUNCT}])")


def typeset(text: str, lang: str) -> str:
    """Prose as the language writes it (zh: no ASCII spaces between sentences)."""
    return _SPACES.sub("", text) if lang == "zh" else text


def feature_sentences(changes: tuple[Change, ...], spec: ImageSpec, lang: str) -> list[str]:
    """Main Features in the published notes' shape: the base on its own, then one sentence for
    the artifacts and one for the Python stack, each closed by "with the features and bug
    fixes of those versions" (合入对应版本功能和Bug fix)."""
    t = LABELS[lang]
    groups: dict[str, list[Change]] = {"base": [], "artifact": [], "pip": []}
    for c in changes:
        comp = spec.component(c.id)
        groups[comp.kind if comp else "pip"].append(c)
    out = [_feature_line(c, spec, lang) + t["stop"] for c in groups["base"]]
    for kind in ("artifact", "pip"):
        if groups[kind]:
            parts = t["list_sep"].join(_feature_line(c, spec, lang) for c in groups[kind])
            brought = any(c.kind != "removed" for c in groups[kind])
            out.append(parts + (t["merged"] if brought else t["stop"]))
    return out


def changes_for_notes(repo: Repo, spec: ImageSpec) -> tuple[Change, ...]:
    previous = previous_spec(repo, spec)
    if previous is None:
        return declared_upgrades(spec)
    return tuple(c for c in diff(previous, spec) if c.section == "components") or declared_upgrades(spec)


@dataclass(frozen=True, kw_only=True)
class Security:
    """The notes' Security section, from the gate's result in the record: what the release this
    one extends had that this one does not (fixed), and what this one has (open, with VEX)."""

    scanned: bool
    reason: str
    previous: str | None  # the release compared with
    fixed: tuple[dict[str, Any], ...] | None  # None: that release has no scan on record
    open: tuple[dict[str, Any], ...]


def _finding(f: dict[str, Any]) -> dict[str, Any]:
    """A finding of a record as the notes show it (a record may have been written by an
    earlier version: every field the template reads is there)."""
    return {"id": str(f["id"]), "aliases": [str(a) for a in f.get("aliases") or ()],
            "purls": [str(p) for p in f.get("purls") or ()],
            "package": str(f["package"]), "installed": str(f["installed"]),
            "severity": str(f["severity"]), "fixed": [str(x) for x in f.get("fixed") or ()],
            "vex": f.get("vex"), "justification": str(f.get("justification") or "")}  # fmt: skip


def scanned_findings(repo: Repo, spec: ImageSpec) -> dict[tuple[str, str], dict[str, Any]] | None:
    """(id, package) → finding, from the record of ``spec``'s release when the gate ran for it
    (None: no record, a damaged one, or no scan on it)."""
    try:
        rec = read_optional(default_path(repo.root, spec.image, spec.version))
    except ReleaseError:
        return None
    if rec is None or rec.scan is None or rec.scan.get("status") == "skipped":
        return None
    return {(f["id"], f["package"]): f for f in map(_finding, rec.scan.get("findings") or ())}


def security_section(repo: Repo, spec: ImageSpec, record: ReleaseRecord | None) -> Security | None:
    if record is None or record.scan is None:
        return None
    scan = record.scan
    if scan.get("status") == "skipped":
        return Security(scanned=False, reason=str(scan.get("reason")), previous=None, fixed=(), open=())
    findings = tuple(_finding(f) for f in scan.get("findings") or ())
    previous = previous_spec(repo, spec)
    earlier = scanned_findings(repo, previous) if previous is not None else None
    now = {(f["id"], f["package"]) for f in findings}
    fixed = None if earlier is None else tuple(f for k, f in earlier.items() if k not in now)
    return Security(scanned=True, reason=str(scan.get("reason")), fixed=fixed, open=findings,
                    previous=f"{previous.image} {previous.version}" if previous else None)  # fmt: skip


def security_changes(repo: Repo, old: ImageSpec, new: ImageSpec) -> list[Change]:
    """What ``diff OLD NEW`` adds from the two releases' records, when both ran the gate: each
    vulnerability OLD had and NEW has not (``removed``: fixed), and each NEW has that OLD had
    not (``added``); the name is the package, the values the id at its installed version."""
    before, after = scanned_findings(repo, old), scanned_findings(repo, new)
    if before is None or after is None:
        return []
    out = [Change(section="security", id=i, name=p, kind="removed", new=None,
                  old=f"{i} ({before[(i, p)]['installed']}, fixed)")
           for i, p in sorted(before.keys() - after.keys())]  # fmt: skip
    out += [Change(section="security", id=i, name=p, kind="added", old=None,
                   new=f"{i} ({after[(i, p)]['installed']}, {after[(i, p)]['severity']})")
            for i, p in sorted(after.keys() - before.keys())]  # fmt: skip
    return out


def render_notes(repo: Repo, spec: ImageSpec, registries: Registries, lang: str,
                 record: ReleaseRecord | None = None) -> Notes:  # fmt: skip
    if lang not in LABELS:
        msg = f"--lang {lang!r}: choose one of {', '.join(LABELS)}"
        raise ConfigError(msg)
    public = next((e for e in registries.publish_endpoints() if e.role == "public"), None)
    if public is None:
        msg = f"{registries.source}: no public registry to name in the notes"
        raise ConfigError(msg)
    vpc = registries.vpc_pattern()
    names = dict(zip(("training", "inference"), LABELS[lang]["scenarios"].split("|"), strict=True))
    text = render_template(
        repo.root,
        "notes.md.j2",
        spec=spec,
        lang=lang,
        t=LABELS[lang],
        record=record,
        security=security_section(repo, spec, record),
        evaluation=evaluation_section(record, lang),
        te=EVALUATION_LABELS[lang],
        features=feature_sentences(changes_for_notes(repo, spec), spec, lang),
        p=lambda text: typeset(text, lang),
        scenario="/".join(names[s] for s in spec.scenario),
        public_ref=public.ref(spec.image, spec.version),
        public_host=public.host,
        vpc_pattern=vpc[0].replace("{region}", "{region-id}") if vpc else None,
        regions=vpc[1] if vpc else (),
        region_note=(
            LABELS[lang]["region_note"].replace("{regions}", LABELS[lang]["list_sep"].join(vpc[1]))
            if vpc
            else ""
        ),
        vpc_endpoints=[e for e in registries.publish_endpoints() if e.role == "vpc"],
        issue_url=lambda r: "https://github.com/{}/issues/{}".format(*r.split("#")),
    )
    return Notes(spec=spec, lang=lang, text=text)


def notes_path(root: Path, spec: ImageSpec, lang: str) -> Path:
    return root / "out" / "releases" / spec.image / f"{spec.version}.{lang}.md"
