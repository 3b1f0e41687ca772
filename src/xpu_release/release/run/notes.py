"""``notes``: release notes in Markdown, from the manifest (and the release record), through
``templates/notes.md.j2``, in the structure of the published notes, in Chinese or English."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError, ReleaseError
from ...evidence.lifecycle import MAX_REASON, MAX_SAID
from ...guard.shown import shown
from ...image.templating import render_template
from ...manifest import ImageSpec, Repo
from ...manifest.diff import Change, declared_upgrades, diff
from ...manifest.registries import Registries
from ...manifest.versions import version_key
from ..model import history
from ..model.record import RecordedFinding, ReleaseRecord, default_path, read_optional
from .evalnotes import LABELS as EVALUATION_LABELS
from .evalnotes import section as evaluation_section

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
        "platforms": "One image index at every endpoint; `docker pull --platform` chooses the image "
                     "of a platform",
        "platform": "Platform", "size": "Size", "attached_index": "Attached to the image index",
        "attached_platform": "Attached to its {platform} image",
        "sbom": "SBOM (CycloneDX 1.6)", "provenance": "provenance (in-toto, SLSA v1)",
        "vex": "VEX (OpenVEX, the vulnerability gate's conclusions)",
        "provenance-bundle": "provenance as a Sigstore bundle (cosign)",
        "vex-bundle": "VEX as a Sigstore bundle (cosign)",
        "spdx": "SBOM (SPDX 2.3)", "lifecycle": "end-of-life date (a lifecycle document, as .NET's)",
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
        "patches": "This release patches {image} {parent}: it fixes what is listed under Bug Fixes.",
        "base_moved": "Base image {ref} updated: `{old}` → `{new}`.",
        "base_moved_to": "Base image {old_ref} → {new_ref}: `{old}` → `{new}`.",
        "fixed": "Fixed {id} in {package}: {old} → {new} ({severity}).",
        "not_fixed": "Not fixed yet: {id} in {package} {installed} ({severity}): {why}.",
        "why:no-fix": "no version fixes it yet",
        "why:not-on-index": "its fix, {fix}, is not on the package index yet",
        "why:base": "it comes with the base image",
        "why:debian": "a Debian package, fixed with the base image",
        "why:not-installed": "this image's lock does not install it",
        "end_of_life": "End of life", "withdrawn_releases": "Withdrawn Releases",
        "withdrawn_line": "{version} was withdrawn on {at}: {reason}. Use this release instead.",
        "this_withdrawn": "This release was withdrawn on {at}: {reason}.",
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
        "platforms": "每个端点发布一个镜像索引（image index）；`docker pull --platform`选择对应平台的镜像",
        "platform": "平台", "size": "大小", "attached_index": "附加到镜像索引",
        "attached_platform": "附加到{platform}镜像",
        "sbom": "SBOM（CycloneDX 1.6）", "provenance": "来源证明（in-toto，SLSA v1）",
        "vex": "VEX（OpenVEX，漏洞门禁的结论）",
        "provenance-bundle": "来源证明的 Sigstore 包（cosign）",
        "vex-bundle": "VEX 的 Sigstore 包（cosign）",
        "spdx": "SBOM（SPDX 2.3）", "lifecycle": "终止支持日期（生命周期文档，与.NET相同）",
        "switch": "开启方式", "pull": "选择镜像",
        "switches": "调用API开启编译器+重计算显存优化", "usage_advice": "使用建议",
        "upgraded": "{name}升级至{new}", "base_upgraded": "基础镜像升级{name}至{new}",
        "changed": "{name} {old} → {new}", "added": "支持{name} {new}", "removed": "移除{name} {old}",
        "downgraded": "{name}从{old}降级至{new}",
        "scenarios": "训练|推理",
        "security": "安全", "fixed_since": "自{previous}以来修复的漏洞",
        "open_vulns": "本版本中已知的漏洞", "not_scanned": "未扫描",
        "no_previous_scan": "（所扩展的版本没有扫描记录）",
        "patches": "本版本为{image} {parent}的补丁版本，修复内容见Bugs Fix。",
        "base_moved": "基础镜像{ref}更新：`{old}` → `{new}`。",
        "base_moved_to": "基础镜像{old_ref}更新为{new_ref}：`{old}` → `{new}`。",
        "fixed": "修复{package}的{id}（{severity}）：{old} → {new}。",
        "not_fixed": "尚未修复：{package} {installed}的{id}（{severity}）：{why}。",
        "why:no-fix": "暂无修复版本", "why:not-on-index": "修复版本{fix}尚未发布到软件源",
        "why:base": "随基础镜像提供", "why:debian": "Debian软件包，随基础镜像修复",
        "why:not-installed": "本镜像的锁定文件不安装它",
        "end_of_life": "终止支持日期", "withdrawn_releases": "已撤回的版本",
        "withdrawn_line": "{version}已于{at}撤回：{reason}。请改用本版本。",
        "this_withdrawn": "本版本已于{at}撤回：{reason}。",
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


def patch_lines(spec: ImageSpec, lang: str) -> tuple[list[str], list[str]]:
    """A patch release's reasons in its notes (``release.patch``): for Main Features, what it
    patches and where its base moved; for Bug Fixes, each advisory fixed, then what it does not
    fix yet and why."""
    patch = spec.release.patch
    if patch is None:
        return [], []
    t = LABELS[lang]
    features = [t["patches"].format(image=spec.image, parent=spec.extends)]
    if patch.base is not None:
        b = patch.base
        key = "base_moved" if b.old_ref == b.new_ref else "base_moved_to"
        features.append(t[key].format(ref=b.old_ref, old_ref=b.old_ref, new_ref=b.new_ref, old=b.old_digest,
                                      new=b.new_digest))  # fmt: skip
    fixes = [t["fixed"].format(id=f.id, package=f.package, old=f.old, new=f.new, severity=f.severity)
             for f in patch.fixes]  # fmt: skip
    fixes += [t["not_fixed"].format(id=u.id, package=u.package, installed=u.installed, severity=u.severity,
                                    why=t[f"why:{u.why}"].format(fix=u.fix)) for u in patch.open]  # fmt: skip
    return features, fixes


@dataclass(frozen=True, kw_only=True)
class Security:
    """The notes' Security section, from the gate's result in the record: what the release this
    one extends had that this one does not (fixed), and what this one has (open, with VEX)."""

    scanned: bool
    reason: str
    previous: str | None  # the release compared with
    fixed: tuple[RecordedFinding, ...] | None  # None: that release has no scan on record
    open: tuple[RecordedFinding, ...]


def scanned_findings(repo: Repo, spec: ImageSpec) -> dict[tuple[str, str], RecordedFinding] | None:
    """(id, package) → finding, from the record of ``spec``'s release when the gate ran for it
    (None: no record, a damaged one, or no scan on it)."""
    try:
        rec = read_optional(default_path(repo.root, spec.image, spec.version))
    except ReleaseError:
        return None
    gate = rec.gate() if rec is not None else None
    if gate is None or gate.status == "skipped":
        return None
    return {(f.id, f.package): f for f in gate.findings}


def security_section(repo: Repo, spec: ImageSpec, record: ReleaseRecord | None) -> Security | None:
    gate = record.gate() if record is not None else None
    if gate is None:
        return None
    if gate.status == "skipped":
        return Security(scanned=False, reason=gate.reason, previous=None, fixed=(), open=())
    previous = previous_spec(repo, spec)
    earlier = scanned_findings(repo, previous) if previous is not None else None
    now = {(f.id, f.package) for f in gate.findings}
    fixed = None if earlier is None else tuple(f for k, f in earlier.items() if k not in now)
    return Security(scanned=True, reason=gate.reason, fixed=fixed, open=gate.findings,
                    previous=f"{previous.image} {previous.version}" if previous else None)  # fmt: skip


def rescanned_findings(repo: Repo, spec: ImageSpec) -> dict[tuple[str, str], RecordedFinding] | None:
    """(id, package) → finding as the latest re-scan of ``spec``'s published SBOM saw it (its
    ``watch`` history; not one that read no advisory: it saw nothing), else as its release
    record's gate did (None: neither)."""
    found = history.latest_findings(repo.root, spec.image, spec.version)
    if found is not None:
        return {(f.id, f.package): f for f in found}
    return scanned_findings(repo, spec)


def security_changes(repo: Repo, old: ImageSpec, new: ImageSpec) -> list[Change]:
    """What ``diff OLD NEW`` adds on vulnerabilities: each advisory a patch NEW fixes (its
    ``release.patch``, with the package's old → new version); then, when both were scanned (the
    latest re-scan, else the release record), each vulnerability OLD had and NEW has not
    (``removed``: fixed) and each NEW has that OLD had not (``added``)."""
    patch = (
        new.release.patch
        if new.image == old.image and version_key(old.version) < version_key(new.version)
        else None
    )
    fixes = patch.fixes if patch else ()
    out = [Change(section="security", id=f.id, name=f.package, kind="removed", new=None,
                  old=f"{f.id} ({f.old} → {f.new}, fixed)") for f in fixes]  # fmt: skip
    said = {(c.id, c.name) for c in out}
    before, after = rescanned_findings(repo, old), rescanned_findings(repo, new)
    if before is None or after is None:
        return out
    out += [Change(section="security", id=i, name=p, kind="removed", new=None,
                   old=f"{i} ({before[(i, p)].installed}, fixed)")
            for i, p in sorted(before.keys() - after.keys()) if (i, p) not in said]  # fmt: skip
    out += [Change(section="security", id=i, name=p, kind="added", old=None,
                   new=f"{i} ({after[(i, p)].installed}, {after[(i, p)].severity})")
            for i, p in sorted(after.keys() - before.keys())]  # fmt: skip
    return out


def withdrawn_before(repo: Repo, spec: ImageSpec) -> list[tuple[str, dict[str, Any]]]:
    """Each earlier release of the image whose record says it is withdrawn, with the withdrawal
    (a damaged or missing record says nothing)."""
    out = []
    for version in repo.versions(spec.image):
        if version_key(version) >= version_key(spec.version):
            continue
        try:
            rec = read_optional(default_path(repo.root, spec.image, version))
        except ReleaseError:
            continue
        if rec is not None and rec.withdrawn:  # a record written before notices were read guarded
            reason, at = (
                shown(str(rec.withdrawn.get(k) or ""), n)
                for k, n in (("reason", MAX_REASON), ("at", MAX_SAID))
            )
            out.append((version, {**rec.withdrawn, "reason": reason, "at": at}))
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
        end_of_life=spec.support.end(spec.version) if spec.support is not None else None,
        withdrawn=withdrawn_before(repo, spec),
        evaluation=evaluation_section(record, lang),
        te=EVALUATION_LABELS[lang],
        features=feature_sentences(changes_for_notes(repo, spec), spec, lang),
        patch=patch_lines(spec, lang),
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
