"""Find the repository, load manifests, apply ``extends:`` and validate the result."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ManifestError, NotFoundError, Problem, ReleaseError
from ..guard.shown import quoted, shown
from . import inherit, rules, schema
from .model import ImageSpec
from .patchformat import LINE_TAG_SUFFIX, line_of_version, numbering_problem
from .platforms import KNOWN, of_names
from .versions import version_key
from .yamlsrc import Source, YamlProblems, load

ROOT_MARKERS = ("manifests", "templates", "registries.yaml")
IMAGE_PATTERN = r"[a-z0-9]+(?:[._\-][a-z0-9]+)*"
VERSION_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}"
REF_RX = re.compile(rf"(?P<image>{IMAGE_PATTERN}):(?P<version>{VERSION_PATTERN})")
VERSION_RX = re.compile(VERSION_PATTERN)


def parse_ref(ref: str) -> tuple[str, str]:
    """``NAME:VERSION`` → (name, version), with a clear message for anything else."""
    m = REF_RX.fullmatch(ref.strip())
    if not m or len(m["image"]) > 128:
        msg = f"{quoted(ref)} is not NAME:VERSION (e.g. training-xpu-pytorch:25.03)"
        raise ConfigError(msg)
    return m["image"], m["version"]


def check_version(version: str, what: str) -> str:
    """``version`` as a version (``25.03``): never a path (``../x``), an option, or empty."""
    if not VERSION_RX.fullmatch(version):
        msg = (
            f"{what} {quoted(version)} is not a version: letters, digits, '.', '_' and '-', "
            "at most 128 characters, starting with a letter or digit (e.g. 25.03)"
        )
        raise ConfigError(msg)
    return version


def find_root(start: Path | None = None, explicit: str | None = None) -> Path:
    """The repository root: ``explicit`` (``--root`` or ``XPU_RELEASE_ROOT``, which the CLI
    reads), else the nearest ancestor that holds ``manifests/``, ``templates/`` and
    ``registries.yaml`` (like git finds ``.git``)."""
    given = explicit
    if given:
        root = Path(given).resolve()
        if not all((root / m).exists() for m in ROOT_MARKERS):
            msg = f"{root} is not an xpu-release repository (needs {', '.join(ROOT_MARKERS)})"
            raise ConfigError(msg)
        return root
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if all((candidate / m).exists() for m in ROOT_MARKERS):
            return candidate
    msg = f"no xpu-release repository at or above {here}; run inside one or pass --root"
    raise ConfigError(msg)


@dataclass(frozen=True)
class Repo:
    root: Path
    # The registry aliases a manifest's base.registry may name (None: not checked here).
    registry_names: frozenset[str] | None = field(default=None, compare=False)
    # Each manifest resolved once per Repo (one CLI invocation): a chain of N releases costs N
    # resolutions, not N²/2.
    _resolved_cache: dict[tuple[str, str], Source] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _loaded_cache: dict[tuple[str, str], ImageSpec] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _notices: dict[tuple[str, str], tuple[Problem, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    @classmethod
    def discover(cls, explicit: str | None = None) -> Repo:
        return cls(find_root(explicit=explicit))

    @property
    def manifests_dir(self) -> Path:
        return self.root / "manifests"

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def manifest_path(self, image: str, version: str) -> Path:
        return self.manifests_dir / image / f"{version}.yaml"

    def _entries(self, folder: Path) -> list[Path]:
        """What ``folder`` holds; a folder that cannot be listed is an error naming it, never
        an image or a version silently left out."""
        try:
            return list(folder.iterdir())
        except OSError as exc:
            from ..files import describe

            problem = Problem(file=self.rel(folder), message=f"cannot read this folder ({describe(exc)})")
            raise ManifestError([problem]) from None

    def images(self) -> list[str]:
        return sorted(p.name for p in self._entries(self.manifests_dir) if p.is_dir())

    def versions(self, image: str) -> list[str]:
        folder = self.manifests_dir / image
        if not folder.is_dir():
            known = ", ".join(self.images()) or "none"
            msg = f"no image {quoted(image)} under {self.rel(self.manifests_dir)} (known: {known})"
            raise NotFoundError(msg)
        names = (p.name for p in self._entries(folder))
        found = (n[: -len(".yaml")] for n in names if n.endswith(".yaml") and n != ".yaml")
        return sorted(found, key=version_key)

    def is_latest(self, image: str, version: str) -> bool:
        """True if no later version of ``image`` has a manifest (floating tags may move to it)."""
        versions = self.versions(image)
        return bool(versions) and versions[-1] == version

    def refs(self) -> list[str]:
        return [f"{i}:{v}" for i in self.images() for v in self.versions(i)]

    # --- loading -----------------------------------------------------------------------

    def _source(self, image: str, version: str) -> Source:
        from ..files import kind_of

        path = self.manifest_path(image, version)
        if kind_of(path) == "missing":
            known = ", ".join(self.versions(image)) or "none"
            ref = shown(f"{image}:{version}", 120)
            msg = f"no manifest {shown(self.rel(path), 200)} for {ref} (versions: {known})"
            raise NotFoundError(msg)
        if not VERSION_RX.fullmatch(version):
            why = "its file name is not a version (letters, digits, '.', '_', '-'; at most 128); rename it"
            raise ManifestError([Problem(file=shown(self.rel(path), 200), message=why)])
        try:
            return load(path, self.rel(path))
        except YamlProblems as exc:
            raise ManifestError(exc.problems) from None

    def _resolved(self, image: str, version: str, chain: tuple[str, ...]) -> Source:
        key = (image, version)
        if key not in self._resolved_cache:
            self._resolved_cache[key] = self._resolve(image, version, chain)
        return self._resolved_cache[key]

    def _resolve(self, image: str, version: str, chain: tuple[str, ...]) -> Source:
        src = self._source(image, version)
        if not isinstance(src.data, dict):
            raise ManifestError([src.problem((), "a manifest is a mapping of keys")])
        problems = _placed_problems(src, image, version)
        parent = src.data.get("extends")
        if parent is not None:
            problems.extend(_parent_problems(self, src, image, (*chain, version)))
        if problems:
            raise ManifestError(problems)
        if parent is None:
            return src
        base = self._resolved(image, parent, (*chain, version))
        got = inherit.inherit({k: v for k, v in base.data.items() if k not in schema.NOT_INHERITED}, src.data)
        merged = Source(
            file=src.file,
            data=got.data,
            marks={**base.marks, **src.marks},
            key_marks={**base.key_marks, **src.key_marks},
            raw={**base.raw, **src.raw},
        )
        if got.errors:
            raise ManifestError([merged.problem(f.path, f.message) for f in got.errors])
        self._notices[(image, version)] = tuple(merged.problem(f.path, f.message) for f in got.notices)
        return merged

    def notices(self, image: str, version: str) -> tuple[Problem, ...]:
        """What inheriting from the parent left for a person to check (``validate`` prints it):
        inherited prose that names a version this release no longer has, prose not inherited."""
        self._resolved(image, version, ())
        return self._notices.get((image, version), ())

    def load(self, image: str, version: str) -> ImageSpec:
        """Load, inherit and validate one manifest; all its problems at once. Once per Repo."""
        key = (image, version)
        if key not in self._loaded_cache:
            self._loaded_cache[key] = self._load(image, version)
        return self._loaded_cache[key]

    def _load(self, image: str, version: str) -> ImageSpec:
        src = self._resolved(image, version, ())
        checker = schema.Checker(src)
        schema.MANIFEST.check(src.data, (), checker)
        if not checker.problems:
            rules.check(rules.Resolved(src.data, self.registry_names), checker)
        if not checker.problems:
            _check_base_chain(self, image, version, src, checker)
        if not checker.problems and (src.data.get("release") or {}).get("patch") is not None:
            exists = lambda v: self.manifest_path(image, v).is_file()  # noqa: E731
            why = numbering_problem(version, src.data.get("extends"), exists)
            if why:
                checker.fail(("release", "patch"), why)
        if not checker.problems:
            _check_floating_tags(self, image, version, src.data, checker)
        if checker.problems:
            raise ManifestError(checker.problems)
        return ImageSpec.from_dict(src.data, manifest_path=src.file)

    def base_release(self, ref: str) -> str | None:
        """The release of ours ``ref`` is built on (its ``base.image``), if any."""
        try:
            base = self._resolved(*parse_ref(ref), ()).data.get("base") or {}
        except ReleaseError:
            return None
        return f"{base['image']}:{base.get('version')}" if base.get("image") else None

    def load_ref(self, ref: str) -> ImageSpec:
        return self.load(*parse_ref(ref))

    def load_all(self) -> tuple[list[ImageSpec], list[Problem]]:
        """Every manifest in the repository; problems are collected, not raised."""
        specs: list[ImageSpec] = []
        problems: list[Problem] = []
        for image in self.images():
            for version in self.versions(image):
                try:
                    specs.append(self.load(image, version))
                except ManifestError as exc:
                    whole = Problem(file=self.rel(self.manifest_path(image, version)), message=exc.message)
                    problems.extend(exc.problems or [whole])
        return specs, problems


def _placed_problems(src: Source, image: str, version: str) -> list[Problem]:
    """Where the manifest says it belongs that its place contradicts: its image is not the
    folder it lives in, its version not its file name."""
    data, problems = src.data, []
    if data.get("image") != image:
        problems.append(src.problem(("image",), f"must be {image!r}, the folder it lives in"))
    if data.get("version") != version:
        got, raw = data.get("version"), src.raw.get(("version",))
        hint = f"; quote it: '{raw}'" if raw is not None and not isinstance(got, str) else ""
        why = f"{got!r} does not match the file name {version}.yaml{hint}"
        problems.append(src.problem(("version",), why))
    return problems


def _parent_problems(repo: Repo, src: Source, image: str, chain: tuple[str, ...]) -> list[Problem]:
    """What is wrong with the ``extends`` of the manifest at the end of ``chain`` (the
    versions that extend one another down to it): not a version, a cycle, no such manifest."""
    from ..files import kind_of

    parent = src.data.get("extends")
    if not isinstance(parent, str) or not VERSION_RX.fullmatch(parent):
        return [src.problem(("extends",), "must be a version of the same image, e.g. '25.03'")]
    if parent in chain:
        return [src.problem(("extends",), f"inheritance cycle: {' → '.join((*chain, parent))}")]
    path = repo.manifest_path(image, parent)
    if kind_of(path) == "missing":
        return [src.problem(("extends",), f"parent {image}:{parent} does not exist ({repo.rel(path)})")]
    return []


def _check_floating_tags(
    repo: Repo, image: str, version: str, data: dict[str, Any], c: schema.Checker
) -> None:
    """No floating tag of a release is another release's version tag (``25.03``) or another
    line's tag (``25.03-latest`` moved by a release of 25.04): a tag that moves would take it."""
    line = line_of_version(version, (data.get("release") or {}).get("patch") is not None)
    for i, tag in enumerate(data.get("floating_tags") or ()):
        named = str(tag).removesuffix(LINE_TAG_SUFFIX)
        if named == str(tag) and repo.manifest_path(image, named).is_file():
            c.fail(("floating_tags", i), f"{tag!r} is the version tag of {image}:{named}, which never moves: "
                   "name the floating tag otherwise")  # fmt: skip
        elif named != str(tag) and named != line and repo.manifest_path(image, named).is_file():
            c.fail(("floating_tags", i), f"{tag!r} is the line's tag of {image}:{named}, which moves "
                   f"with that line only; this release's is {line}{LINE_TAG_SUFFIX}: drop it")  # fmt: skip


def _check_base_chain(repo: Repo, image: str, version: str, src: Source, c: schema.Checker) -> None:
    """A base that is another family's release names a manifest that exists, and the chain
    of such bases never comes back (a cycle): both located at this manifest's base.image."""
    chain = [f"{image}:{version}"]
    data = src.data
    while True:
        base = data.get("base") or {}
        if not base.get("image"):
            return
        ref = f"{base['image']}:{base.get('version')}"
        if ref in chain:
            c.fail(("base", "image"), f"the bases form a cycle: {' → '.join([*chain, ref])}")
            return
        path = repo.manifest_path(base["image"], str(base.get("version")))
        if not path.is_file():
            c.fail(("base", "image"), f"the base release {ref} has no manifest ({repo.rel(path)})")
            return
        chain.append(ref)
        try:
            data = repo._resolved(base["image"], str(base["version"]), ()).data
        except ManifestError:
            return  # its own problems are reported where it is written
        if len(chain) == 2:
            _base_serves_every_platform(src.data, ref, data, c)


def _base_serves_every_platform(
    data: dict[str, Any], ref: str, base: dict[str, Any], c: schema.Checker
) -> None:
    """A release built on another family's release declares no platform that release lacks: its
    image for that platform is what the build starts from."""
    named = base.get("platforms")
    if named is not None and not (isinstance(named, list) and all(n in KNOWN for n in named)):
        return  # its own problems are reported where it is written
    ours = [p.name for p in of_names(data.get("platforms"))]
    theirs = [p.name for p in of_names(named)]
    missing = [p for p in ours if p not in theirs]
    if missing:
        where = ("platforms",) if "platforms" in data else ("base", "image")
        c.fail(where, f"{', '.join(missing)}: the base release {ref} is built for {', '.join(theirs)} only; "
               "add the platform to its manifest and release it first")  # fmt: skip


def release_chain(repo: Repo, ref: str) -> list[str]:
    """``ref`` after the releases of ours it builds on, the deepest base first (``release
    --with-bases``); an unknown or invalid ``ref`` is its own clear error, before any base."""
    repo.load_ref(ref)
    chain = [ref]
    while (parent := repo.base_release(chain[0])) is not None and parent not in chain:
        chain.insert(0, parent)
    return chain
