"""The line rule: which floating tags a publish of a release moves. One answer, asked by every
command that publishes or copies a release (``release``, ``publish``, ``promote``, and the
release of a patch ``watch --release`` makes), so none of them moves a tag another would not.

Floating tags never move backwards: ``latest`` (the manifest's tags) goes to the newest version
of the image, the line's tag (``25.03-latest``) to the newest release of its line. And a tag
every newer release carrying it has left by withdrawal (``withdrawn.past_withdrawn``, asked of
the pool's endpoints) comes to this release: after ``withdraw 25.04``, a release of the patch
25.03.1 takes ``latest``, as the newest release that is not withdrawn.
"""

from __future__ import annotations

from ..errors import ReleaseError
from ..manifest import ImageSpec, Repo
from ..manifest.lines import newest_of_line
from ..manifest.registries import Registries
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


def moves(repo: Repo, pool: EndpointPool, registries: Registries) -> tuple[str, ...]:
    """The floating tags a publish of ``pool.spec`` moves: ``forward``'s, then those every newer
    release carrying them left by withdrawal."""
    return tuple(dict.fromkeys((*forward(repo, pool.spec), *past_withdrawn(repo, pool, registries))))
