"""Whether a release is withdrawn, as the commands that move floating tags ask it (``publish``,
``promote``): asked of **every** endpoint of a pool, and **failing closed**. An endpoint that
does not answer, or a notice it lists but does not serve, is not "not withdrawn": the question
has no answer, and a command that would move a floating tag onto the release stops saying so
(exit 7; 10 when no endpoint answers; 8 when every endpoint refuses our credentials).

``withdrawals`` is the one question at one endpoint; every command that asks a registry whether a
release is withdrawn (``status``, ``verify``, ``watch``, ``withdraw``, ``promote``, ``publish``)
asks it or reads the same notices (``evidence.lifecycle.in_force``), and none takes "could not
tell" as "not withdrawn". (``list`` and the release notes say what the local release record
says, offline; the registries are the truth, ``status`` reads them.)

And which floating tags a release takes because every newer release carrying them has left them,
withdrawn or never published (``past_withdrawn``): after ``withdraw``, ``latest`` serves the
newest release that is published and not withdrawn; a patch of that release, released later, is
then the newest such one and takes it. A newer release whose endpoints cannot say stops the tags
where they are, saying so (exit 7, or 10).
"""

from __future__ import annotations

from ...errors import ReleaseError, endpoints_failed
from ...evidence.lifecycle import Notice, in_force, notices_at
from ...manifest import ImageSpec, Repo
from ...manifest.versions import version_key
from ...oci.registry import RegistryClient
from .plan import floating_tags, make_plan
from .pool import EndpointPool


def withdrawals(client: RegistryClient, repo: str, digest: str) -> tuple[Notice, ...]:
    """The withdrawals of ``digest`` in force at one endpoint; raises when its notices cannot be
    read (never "none")."""
    return in_force(notices_at(client, repo, digest))


def could_not_tell(
    ref: str, problems: list[tuple[str, ReleaseError]], endpoints: int, then: str
) -> ReleaseError:
    """A withdrawal question that endpoints did not answer; ``then`` says what was (not) done."""
    lines = [f"  {name:<22} {exc.message}" for name, exc in problems]
    return endpoints_failed("\n".join([f"whether {ref} is withdrawn cannot be told; {then}:", *lines]),
                            [e for _, e in problems], endpoints)  # fmt: skip


def withdrawal_in_force(pool: EndpointPool, digest: str, *, then: str) -> Notice | None:
    """A withdrawal of ``digest`` in force at any endpoint of ``pool``; raises (``could_not_tell``)
    when one does not say and no other names a withdrawal."""
    problems: list[tuple[str, ReleaseError]] = []
    for t in pool.plan.targets:
        try:
            found = withdrawals(pool.client(t.endpoint), pool.repo(t.endpoint), digest)
        except ReleaseError as exc:
            problems.append((t.endpoint.name, exc))
            continue
        if found:
            return found[0]
    if problems:
        raise could_not_tell(pool.spec.ref, problems, len(pool.plan.targets), then)
    return None


def past_withdrawn(repo: Repo, pool: EndpointPool) -> tuple[str, ...]:
    """The floating tags of ``pool.spec`` that the newer releases carrying them leave to it: at
    least one carries the tag, and each has left it (``_left``: withdrawn at every endpoint of
    the pool, or not published at any). One published in part, or an endpoint that does not
    answer, keeps the tag where it is."""
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
    left: dict[str, bool] = {}

    def gone(other: ImageSpec) -> bool:
        if other.version not in left:
            left[other.version] = _left(pool, other)
        return left[other.version]

    # A tag no newer release carries is not "left": whether it moves is the manifests' rule
    # (a newer version without floating tags keeps latest where it is, never on an older one).
    return tuple(
        tag for tag in floating_tags(spec)
        if (carrying := [other for other in newer if tag in floating_tags(other)])
        and all(gone(other) for other in carrying)
    )  # fmt: skip


def _left(pool: EndpointPool, other: ImageSpec) -> bool:
    """Whether ``other`` holds none of its floating tags for good: every endpoint of its plan
    that serves it has withdrawn it, and one that does not serve it holds nothing of it (a
    manifest not released yet, or a publish done in part and then withdrawn; its own publish,
    or its rerun, moves the tags on by the manifests' rule). One endpoint that serves it not
    withdrawn is a "no" (a publish done in part: the rerun that finishes it moves the tags); one
    that cannot say, with no "no" elsewhere, stops the question (``could_not_tell``).
    ``withdraw`` puts a tag on the newest release this leaves it to (``steering/withdraw``)."""
    targets = make_plan(other, pool.registries).targets
    problems: list[tuple[str, ReleaseError]] = []
    for t in targets:
        client, name = pool.client(t.endpoint), t.endpoint.repository(other.image)
        try:
            served = client.head_manifest(name, other.version)
            if served is not None and not withdrawals(client, name, served):
                return False
        except ReleaseError as exc:
            problems.append((t.endpoint.name, exc))
    if problems:
        raise could_not_tell(other.ref, problems, len(targets), "no floating tag was moved")
    return True
