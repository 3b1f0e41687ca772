"""The standard annotations of a release's image manifest (OCI image-spec ``annotations.md``), as
docker-library writes them: ``org.opencontainers.image.version``, ``.created``, ``.revision``,
``.source``, ``.base.name`` and ``.base.digest``.

They are part of the manifest, so of its digest, and so are a pure function of the release's
inputs: ``created`` is the release's SOURCE_DATE_EPOCH, never the time of the push; the base is
the lock's pin; ``revision`` is the commit that last changed the image's committed build
directory (``images/<image>/<version>/``: its Dockerfile and lock, as docker-library names the
commit of a Dockerfile's directory), not HEAD, so a later commit that leaves the image alone
leaves its digest alone. It is left out outside git and while that directory has uncommitted
changes (no commit holds what is built); a shallow clone that cuts that commit off is refused,
as it would name another. ``source`` is the URL ``images/<image>/image.yaml`` gives, if any.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import ConfigError
from ..image.build import source_date_epoch
from ..image.lockfile import Lock
from ..image.normalize import iso
from ..image.render import image_source
from ..manifest import ImageSpec

PREFIX = "org.opencontainers.image."


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)


def build_revision(root: Path, spec: ImageSpec) -> str:
    """The commit that last changed ``images/<image>/<version>/`` ("" outside git, or with
    uncommitted changes there)."""
    folder = f"images/{spec.image}/{spec.version}"
    log = _git(root, "log", "-1", "--format=%H", "--", folder)
    commit = log.stdout.strip() if log.returncode == 0 else ""
    if not commit or _git(root, "status", "--porcelain", "--", folder).stdout.strip():
        return ""
    if _git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        where = Path(_git(root, "rev-parse", "--git-path", "shallow").stdout.strip())
        boundary = (where if where.is_absolute() else root / where).read_text().split()
        if commit in boundary:
            msg = (f"{folder}: this clone is shallow and cuts off the commit that last changed it, so "
                   "the image's revision annotation cannot be known; fetch the whole history "
                   "(actions/checkout fetch-depth: 0, GitLab GIT_DEPTH: 0, "
                   "`git fetch --unshallow`)")  # fmt: skip
            raise ConfigError(msg)
    return commit


def image_annotations(root: Path, spec: ImageSpec, lock: Lock) -> dict[str, str]:
    """The annotations of ``spec``'s image manifest."""
    out = {PREFIX + "version": spec.version, PREFIX + "created": iso(source_date_epoch(spec))}
    name, _, digest = lock.base.partition("@")
    if digest:
        out[PREFIX + "base.name"] = name
        out[PREFIX + "base.digest"] = digest
    revision = build_revision(root, spec)
    if revision:
        out[PREFIX + "revision"] = revision
    source = image_source(root, spec.image)
    if source:
        out[PREFIX + "source"] = source
    return out
