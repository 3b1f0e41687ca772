"""Release lines: a release and its patches (``25.03``, ``25.03.1``, ``25.03.2``), as the
repository's manifests declare them (``patchformat.py`` says how a patch is numbered).

A user who follows a line pulls its floating tag, ``<line>-latest``: moved by the line's release
and then by each patch, never backwards. The next patch of any release of a line is the line's
version and one more than the highest patch number with a manifest.
"""

from __future__ import annotations

from ..errors import ConfigError, ReleaseError
from .loader import VERSION_RX, Repo
from .model import ImageSpec
from .patchformat import LINE_TAG_SUFFIX, MAX_PATCH, line_of_version, split_patch
from .versions import version_key


def line_of(spec: ImageSpec) -> str:
    """The version of the release ``spec`` belongs to: its own, or (a patch) the one it patches."""
    return line_of_version(spec.version, spec.release.patch is not None)


def line_tag(spec: ImageSpec) -> str:
    """The line's floating tag: ``25.03-latest`` for ``25.03`` and each of its patches."""
    return line_of(spec) + LINE_TAG_SUFFIX


def _is_patch_of(repo: Repo, image: str, version: str, line: str) -> bool:
    split = split_patch(version)
    if split is None or split[0] != line:
        return False
    try:
        return repo.load(image, version).release.patch is not None
    except ReleaseError:
        return False  # its own problems are reported by validate


def line_versions(repo: Repo, image: str, line: str) -> list[str]:
    """Every version of ``line`` with a manifest, oldest first: its release and its patches."""
    return [v for v in repo.versions(image) if v == line or _is_patch_of(repo, image, v, line)]


def newer_in_line(repo: Repo, spec: ImageSpec) -> list[str]:
    """The versions of ``spec``'s line after it (its patches, and their patches), oldest first."""
    mine = version_key(spec.version)
    return [v for v in line_versions(repo, spec.image, line_of(spec)) if version_key(v) > mine]


def later_patch_tags(tags: tuple[str, ...], spec: ImageSpec) -> list[str]:
    """The tags among ``tags`` that name a patch of ``spec``'s line after it: a registry's
    answer for releases whose manifests a checkout may not have yet."""
    mine, line = version_key(spec.version), line_of(spec)
    return [
        t for t in tags
        if VERSION_RX.fullmatch(t) and (s := split_patch(t)) is not None and s[0] == line
        and version_key(t) > mine
    ]  # fmt: skip


def newest_of_line(repo: Repo, spec: ImageSpec) -> bool:
    """True when no later release of its line has a manifest: its line tag may move to it."""
    return not newer_in_line(repo, spec)


def next_patch(repo: Repo, spec: ImageSpec) -> str:
    """The version of the next patch of ``spec``'s line: ``25.03`` → ``25.03.1`` (or one more
    than the highest patch number already taken by a manifest, whatever it holds). A line whose
    numbers are used up (past ``MAX_PATCH``, or a version longer than a version may be) is
    refused with what to do, never named a version the numbering rejects."""
    line = line_of(spec)
    taken = [s[1] for v in repo.versions(spec.image) if (s := split_patch(v)) is not None and s[0] == line]
    n = max(taken, default=0) + 1
    version = f"{line}.{n}"
    if split_patch(version) != (line, n) or not VERSION_RX.fullmatch(version):
        msg = (
            f"{spec.image}:{line} has no patch number left: {version[:140]!r} is not a patch version "
            f"(patch numbers go from 1 to {MAX_PATCH}, a version has at most 128 characters); release "
            "a new version of the image instead"
        )
        raise ConfigError(msg)
    return version
