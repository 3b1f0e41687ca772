"""Whether a release is withdrawn, as the commands that move floating tags ask it (``publish``,
``promote``): asked of **every** endpoint of a pool, and **failing closed**. An endpoint that
does not answer, or a notice it lists but does not serve, is not "not withdrawn": the question
has no answer, and a command that would move a floating tag onto the release stops saying so
(exit 7; 10 when no endpoint answers; 8 when every endpoint refuses our credentials).

And which floating tags a release takes because every newer release carrying them is withdrawn
(``past_withdrawn``): after ``withdraw``, ``latest`` serves the newest release not withdrawn; a
patch of that release, released later, is then the newest one not withdrawn and takes it.
"""

from __future__ import annotations

from ...errors import PublishError, RegistryAuthError, ReleaseError, StackError, is_down
from ...evidence.lifecycle import Notice, in_force, notices_at
from ...manifest import ImageSpec, Repo
from ...manifest.registries import Registries
from ...manifest.versions import version_key
from .plan import floating_tags, make_plan
from .pool import EndpointPool


def failure(text: str, errors: list[ReleaseError], endpoints: int) -> ReleaseError:
    """The error of a run that failed at endpoints with ``errors``: 8 when every endpoint refused
    our credentials (a rerun cannot help), 10 when every endpoint is down (``is_down``: retry
    later), else 7 (rerun to finish)."""
    if len(errors) >= endpoints and all(isinstance(e, RegistryAuthError) for e in errors):
        return RegistryAuthError(text)
    if len(errors) >= endpoints and all(is_down(e) for e in errors):
        return StackError(text)
    return PublishError(text)


def could_not_tell(
    ref: str, problems: list[tuple[str, ReleaseError]], endpoints: int, then: str
) -> ReleaseError:
    """A withdrawal question that endpoints did not answer; ``then`` says what was (not) done."""
    lines = [f"  {name:<22} {exc.message}" for name, exc in problems]
    return failure("\n".join([f"whether {ref} is withdrawn cannot be told; {then}:", *lines]),
                   [e for _, e in problems], endpoints)  # fmt: skip


def withdrawal_in_force(pool: EndpointPool, digest: str, *, then: str) -> Notice | None:
    """A withdrawal of ``digest`` in force at any endpoint of ``pool``; raises (``could_not_tell``)
    when one does not say and no other names a withdrawal."""
    problems: list[tuple[str, ReleaseError]] = []
    for t in pool.plan.targets:
        try:
            found = in_force(notices_at(pool.client(t.endpoint), pool.repo(t.endpoint), digest))
        except ReleaseError as exc:
            problems.append((t.endpoint.name, exc))
            continue
        if found:
            return found[0]
    if problems:
        raise could_not_tell(pool.spec.ref, problems, len(pool.plan.targets), then)
    return None


def past_withdrawn(repo: Repo, pool: EndpointPool, registries: Registries) -> tuple[str, ...]:
    """The floating tags of ``pool.spec`` that the newer releases carrying them leave to it: at
    least one carries the tag, and each is served and withdrawn at every endpoint of the pool
    (one that is not served there, or an endpoint that does not answer, keeps the tag where it
    is)."""
    spec = pool.spec
    mine = version_key(spec.version)
    newer: list[ImageSpec] = []
    for version in repo.versions(spec.image):
        if version_key(version) <= mine:
            continue
        try:
            newer.append(repo.load(spec.image, version))
        except ReleaseError:
            return ()  # a newer manifest that cannot be read: keep every tag where it is
    withdrawn: dict[str, bool] = {}

    def gone(other: ImageSpec) -> bool:
        if other.version not in withdrawn:
            withdrawn[other.version] = _withdrawn_everywhere(pool, other, registries)
        return withdrawn[other.version]

    # A tag no newer release carries is not "left": whether it moves is the manifests' rule
    # (a newer version without floating tags keeps latest where it is, never on an older one).
    return tuple(
        tag for tag in floating_tags(spec)
        if (carrying := [other for other in newer if tag in floating_tags(other)])
        and all(gone(other) for other in carrying)
    )  # fmt: skip


def _withdrawn_everywhere(pool: EndpointPool, other: ImageSpec, registries: Registries) -> bool:
    for t in make_plan(other, registries).targets:
        client, name = pool.client(t.endpoint), t.endpoint.repository(other.image)
        try:
            served = client.head_manifest(name, other.version)
            if served is None or not in_force(notices_at(client, name, served)):
                return False
        except ReleaseError:
            return False
    return True
