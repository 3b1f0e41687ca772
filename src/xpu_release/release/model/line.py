"""The line rule: which floating tags a publish of a release moves. One answer, asked by every
command that publishes or copies a release (``release``, ``publish``, ``promote``, and the
release of a patch ``watch --release`` makes), so none of them moves a tag another would not.

Floating tags never move backwards: ``latest`` (the manifest's tags) goes to the newest version
of the image, the line's tag (``25.03-latest``) to the newest release of its line. And a tag
every newer release carrying it has left, withdrawn or never published (``withdrawn.past_withdrawn``,
asked of the pool's endpoints), comes to this release: after ``withdraw 25.04``, a release of the
patch 25.03.1 takes ``latest``, as the newest release that is published and not withdrawn. So a
floating tag serves what ``withdraw`` and ``reinstate`` put it on (``steering/withdraw``).

The answer depends on the registries (what is withdrawn), so it is asked when the tags move, not
when a command starts (a release builds for minutes first), and asked again once they moved: a
newer release reinstated or published meanwhile would be passed over backwards, which is said
(exit 7) with the command that moves the tags forward again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import PublishError, ReleaseError
from ...manifest import ImageSpec, Repo
from ...manifest.lines import newest_of_line
from ...oci.registry import Manifest
from ..publishing.tags import TagRules
from .plan import moving
from .pool import EndpointPool
from .withdrawn import past_withdrawn


def forward(repo: Repo, spec: ImageSpec) -> tuple[str, ...]:
    """The floating tags ``spec`` takes by the manifests alone: all of them when it is the
    newest version of its image, its line's when it is the newest of its line, else none."""
    try:
        newest_in_line = bool(newest_of_line(repo, spec))
    except ReleaseError:
        newest_in_line = True  # an invalid later manifest is refused where it is loaded, not here
    return moving(spec, newest=repo.is_latest(spec.image, spec.version), newest_of_line=newest_in_line)


def newer_version(repo: Repo, spec: ImageSpec) -> str | None:
    """The latest version of ``spec``'s image when it is not ``spec``'s (its floating tags stay)."""
    return None if repo.is_latest(spec.image, spec.version) else str(repo.versions(spec.image)[-1])


@dataclass(frozen=True)
class Planned:
    """The floating tags a publish would move, and why the withdrawals were not asked (None:
    they were; else ``moves`` is the manifests' answer alone)."""

    moves: tuple[str, ...]
    unasked: str | None = None


@dataclass(frozen=True)
class Line:
    """The line rule over one repository's manifests; the registries are the pool's it is asked of."""

    repo: Repo

    def moves(self, pool: EndpointPool) -> tuple[str, ...]:
        """The floating tags a publish of ``pool.spec`` moves: ``forward``'s, then those every
        newer release carrying them left by withdrawal."""
        left = past_withdrawn(self.repo, pool)
        return tuple(dict.fromkeys((*forward(self.repo, pool.spec), *left)))

    def planned(self, pool: EndpointPool) -> Planned:
        """What a publish of ``pool.spec`` would move, as a plan (a dry run) says it: the rule's
        answer; when the endpoints cannot say whether a newer release left a tag, the manifests'
        answer and why (a plan moves nothing, so it fails nothing: the publish asks again)."""
        try:
            return Planned(moves=self.moves(pool))
        except ReleaseError as exc:
            return Planned(moves=forward(self.repo, pool.spec), unasked=exc.message.splitlines()[0])

    def move(self, pool: EndpointPool, tags: TagRules, source: Manifest) -> tuple[str, ...]:
        """The floating tags the rule gives ``pool.spec`` now, moved onto ``source`` at every
        endpoint (their refs); the rule asked again after: a tag it no longer gives was passed
        over a newer release that came back meanwhile."""
        moving_now = self.moves(pool)
        if not moving_now:
            return ()
        moved = tags.move_floating(source, moving_now)
        lost = [t for t in moving_now if t not in self.moves(pool)]
        if lost:
            ref = pool.spec.ref
            msg = (f"{', '.join(lost)} moved onto {ref} while a newer release of its line came back "
                   f"(reinstated or published meanwhile): `xpu-release status {ref}` says where they "
                   "are; rerun `xpu-release reinstate` (or `publish`) of the newer release to move them "
                   "forward")  # fmt: skip
            raise PublishError(msg)
        return moved
