"""Frozen value objects for a resolved manifest, built once from validated plain data."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from .evaluation import EvaluationSpec
from .inherit import applies
from .patchformat import Patch
from .platforms import DEFAULT, Platform, of_names, platformed
from .support import Support

# Where a base is served when the manifest names no ``base.registry`` (a family's release is
# published there).
DEFAULT_BASE_REGISTRY = "public"

Kind = Literal["base", "artifact", "pip"]


def canonical_name(name: str) -> str:
    """A Python distribution name as PEP 503 compares them (``Flash_Infer`` = ``flash-infer``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, kw_only=True)
class Localized:
    en: str
    zh: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Localized:
        return cls(en=d["en"], zh=d["zh"])

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


def _loc(d: dict[str, Any] | None) -> Localized | None:
    return Localized.from_dict(d) if d else None


@dataclass(frozen=True, kw_only=True)
class Component:
    id: str
    kind: Kind
    name: str
    version: str
    noted_as: str | None = None
    about: Localized | None = None
    # pip
    package: str | None = None
    import_name: str | None = None
    # artifact
    url: str | None = None
    sha256: str | None = None
    format: str | None = None
    dest: str | None = None
    # (platform name, version): what a platform installs where its wheels carry another version
    platform_versions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_dict(cls, cid: str, d: dict[str, Any]) -> Component:
        package = d.get("package") or (cid if d["kind"] == "pip" else None)
        import_name = d.get("import") or (package.replace("-", "_") if package else None)
        return cls(
            id=cid,
            kind=d["kind"],
            name=d.get("name") or cid,
            version=d["version"],
            noted_as=d.get("noted_as"),
            about=_loc(d.get("about")),
            package=package,
            import_name=import_name,
            url=d.get("url"),
            sha256=d.get("sha256"),
            format=d.get("format"),
            dest=d.get("dest"),
            platform_versions=tuple((d.get("platform_versions") or {}).items()),
        )

    @property
    def display_version(self) -> str:
        return self.noted_as or self.version

    @property
    def pin(self) -> str:
        """The requirement line for a pip component (``vllm==0.7.3``)."""
        return f"{self.package}=={self.version}"

    def version_on(self, platform: Platform) -> str:
        """The version ``platform`` installs: its ``platform_versions`` entry, else ``version``."""
        return dict(self.platform_versions).get(platform.name, self.version)

    def pin_on(self, platform: Platform) -> str:
        """The requirement line ``platform``'s lock resolves (``torch==2.13.0`` on linux/arm64)."""
        return f"{self.package}=={self.version_on(platform)}"


@dataclass(frozen=True, kw_only=True)
class BaseImage:
    """Where a release starts from. Either a base image by registry, repository and tag, or
    another family's release (``image`` + ``version``), served at that family's public endpoint
    as ``<image>:<version>``; either way the lock pins it by digest."""

    registry: str
    repository: str
    tag: str
    component: str | None
    python: str
    image: str | None = None  # set when the base is another family's release
    provides: tuple[str, ...] = ()  # distributions no layer may replace

    @property
    def release_ref(self) -> str | None:
        """``image:version`` of the family release this builds on, if it builds on one."""
        return f"{self.image}:{self.tag}" if self.image else None


@dataclass(frozen=True, kw_only=True)
class Feature:
    title: Localized
    text: Localized
    switch: Localized | None
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class KnownIssue:
    title: Localized
    text: Localized
    refs: tuple[str, ...]
    applies: tuple[tuple[str, str], ...] = ()  # (component, specifier): where it holds


@dataclass(frozen=True, kw_only=True)
class Command:
    title: Localized
    command: str


@dataclass(frozen=True, kw_only=True)
class ReleaseInfo:
    upgraded: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    previous: tuple[tuple[str, str], ...] = ()
    bug_fixes: tuple[Localized, ...] = ()
    highlights: tuple[Localized, ...] = ()
    patch: Patch | None = None  # a patch release: why it exists (patchformat.py)


# security.sla_days when a manifest says nothing: AWS's published CVE SLA (low: none).
SLA_DAYS = {"critical": 14, "high": 28, "medium": 180, "low": None}


def content_hash(data: dict[str, Any]) -> str:
    """The sha256 of a resolved manifest, canonical JSON, but its ``support:``: support dates are
    metadata, and this hash is an input of the image (its inputs digest, a label)."""
    built_from = {k: v for k, v in data.items() if k != "support"}
    text = json.dumps(built_from, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ImageSpec:
    """A manifest after inheritance and validation: everything later stages need."""

    image: str
    version: str
    manifest_path: str  # relative to the repository root
    extends: str | None
    title: Localized
    scenario: tuple[str, ...]
    framework: str
    platforms: tuple[Platform, ...] = DEFAULT  # what it is built for; the first is the one measured
    accelerator_name: str
    accelerator_kind: str
    base: BaseImage
    sdk_requirement: tuple[str, str] | None
    driver_requirement: str | None
    pip_index_url: str | None
    pip_find_links: tuple[str, ...]
    pip_install: str = "venv"  # or "system": into the base interpreter's environment
    pip_constraints: tuple[str, ...] = ()  # pip.constraints: NAME>=VERSION the lock holds to
    os_packages: tuple[str, ...]
    components: tuple[Component, ...]
    env: tuple[tuple[str, str], ...]
    tools: tuple[str, ...]
    files: tuple[str, ...]
    floating_tags: tuple[str, ...]
    fail_on: str = "high"  # security.fail_on: the vulnerability gate's threshold
    fail_on_unknown: bool = True  # security.fail_on_unknown
    review_horizon_days: int = 365  # security.review_horizon_days: how far ahead review_by may be
    # security.sla_days over SLA_DAYS: (severity, days an open finding may stay; None: no limit)
    sla_days: tuple[tuple[str, int | None], ...] = tuple(SLA_DAYS.items())
    sbom_formats: tuple[str, ...] = ("cyclonedx",)  # the SBOMs attached: cyclonedx, and spdx if asked
    support: Support | None = None  # metadata, never a build input: not in ``content_hash``
    features: tuple[Feature, ...]
    quick_start: tuple[Command, ...]
    usage_advice: tuple[Localized, ...]
    quick_start_intro: tuple[Localized, ...] = ()
    known_issues: tuple[KnownIssue, ...]
    release: ReleaseInfo
    content_hash: str  # sha256 of the resolved manifest but its ``support:``, canonical JSON
    evaluation: EvaluationSpec | None = None  # the performance evaluation after the smoke test

    @property
    def base_provides(self) -> frozenset[str]:
        """Canonical names of the distributions the base provides that no layer may replace."""
        return frozenset(canonical_name(p) for p in self.base.provides)

    @property
    def ref(self) -> str:
        return f"{self.image}:{self.version}"

    @property
    def platformed(self) -> bool:
        """Built for any platforms but linux/amd64 alone: a lock section per platform, and one
        OCI image index published (``platforms.platformed``)."""
        return platformed(self.platforms)

    def of_kind(self, kind: Kind) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.kind == kind)

    def component(self, cid: str) -> Component | None:
        return next((c for c in self.components if c.id == cid), None)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, manifest_path: str) -> ImageSpec:
        reqs = data.get("requirements") or {}
        sdk = reqs.get("sdk")
        pip = data.get("pip") or {}
        release = data.get("release") or {}
        base = data["base"]
        components = tuple(
            Component.from_dict(cid, c) for cid, c in data["components"].items() if c is not None
        )
        pins = {c.id: c.version for c in components}
        return cls(
            image=data["image"],
            version=data["version"],
            manifest_path=manifest_path,
            extends=data.get("extends"),
            title=Localized.from_dict(data["title"]),
            scenario=tuple(data["scenario"]),
            framework=data["framework"],
            platforms=of_names(data.get("platforms")),
            accelerator_name=data["accelerator"]["name"],
            accelerator_kind=data["accelerator"]["kind"],
            base=BaseImage(
                registry=base.get("registry") or DEFAULT_BASE_REGISTRY,
                repository=base.get("image") or base["repository"],
                tag=base.get("version") or base["tag"],
                component=base.get("component"),
                python=base["python"],
                image=base.get("image"),
                provides=tuple(base.get("provides") or ()),
            ),
            sdk_requirement=(sdk["name"], sdk["version"]) if sdk else None,
            driver_requirement=reqs.get("driver"),
            pip_index_url=pip.get("index_url"),
            pip_find_links=tuple(pip.get("find_links") or ()),
            pip_install=pip.get("install") or "venv",
            pip_constraints=tuple(pip.get("constraints") or ()),
            os_packages=tuple(data.get("os_packages") or ()),
            components=components,
            env=tuple((k, v) for k, v in (data.get("env") or {}).items() if v is not None),
            tools=tuple(data.get("tools") or ()),
            files=tuple(data.get("files") or ()),
            floating_tags=tuple(data.get("floating_tags") or ()),
            fail_on=(data.get("security") or {}).get("fail_on") or "high",
            fail_on_unknown=(data.get("security") or {}).get("fail_on_unknown") is not False,
            review_horizon_days=(data.get("security") or {}).get("review_horizon_days") or 365,
            sla_days=tuple({**SLA_DAYS, **((data.get("security") or {}).get("sla_days") or {})}.items()),
            sbom_formats=("cyclonedx", *(f for f in data.get("sbom_formats") or () if f != "cyclonedx")),
            support=Support.from_dict(data.get("support")),
            features=tuple(
                Feature(
                    title=Localized.from_dict(f["title"]),
                    text=Localized.from_dict(f["text"]),
                    switch=_loc(f.get("switch")),
                    env=tuple((f.get("env") or {}).items()),
                )
                for f in data.get("features") or ()
            ),
            quick_start=tuple(
                Command(title=Localized.from_dict(q["title"]), command=q["command"])
                for q in data.get("quick_start") or ()
            ),
            usage_advice=tuple(Localized.from_dict(u) for u in data.get("usage_advice") or ()),
            quick_start_intro=tuple(Localized.from_dict(u) for u in data.get("quick_start_intro") or ()),
            known_issues=tuple(
                KnownIssue(
                    title=Localized.from_dict(k["title"]),
                    text=Localized.from_dict(k["text"]),
                    refs=tuple(k.get("refs") or ()),
                    applies=tuple((k.get("applies") or {}).items()),
                )
                for k in data.get("known_issues") or ()
                # A scoped issue is in the notes of the releases it applies to only.
                if applies(k.get("applies") or {}, pins)
            ),
            release=ReleaseInfo(
                upgraded=tuple(release.get("upgraded") or ()),
                added=tuple(release.get("added") or ()),
                previous=tuple((release.get("previous") or {}).items()),
                bug_fixes=tuple(Localized.from_dict(b) for b in release.get("bug_fixes") or ()),
                highlights=tuple(Localized.from_dict(h) for h in release.get("highlights") or ()),
                patch=Patch.from_dict(release["patch"]) if release.get("patch") else None,
            ),
            evaluation=EvaluationSpec.from_dict(data["evaluation"]) if data.get("evaluation") else None,
            content_hash=content_hash(data),
        )
