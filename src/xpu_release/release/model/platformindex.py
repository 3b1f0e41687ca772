"""Is what a version tag serves a platformed release's index, as ``docker pull --platform`` will
read it? Asked by ``verify`` at every endpoint and by ``promote`` of the staging endpoint before
anything is copied (a version tag is never written onto an index that lacks a platform).

An index of a release names each declared platform's image once and nothing else (as publish
makes it: ``indexpublish.image_index``). Each entry's image is served there as an image manifest
(not another index), of the size and media type the entry says (a client refuses a manifest
whose size is not its descriptor's), and its config says the entry's platform: an arm64 entry
naming the amd64 image would give arm64 machines an image they cannot run.
"""

from __future__ import annotations

from ...errors import ReleaseError, WireError
from ...manifest import ImageSpec
from ...manifest.platforms import Platform
from ...oci.model import Platform as OciPlatform
from ...oci.model import parse_config
from ...oci.registry import Manifest, RegistryClient

Problem = tuple[str, str]  # what (the index, a platform's image) and what is wrong with it


def shape_problem(manifest: Manifest, spec: ImageSpec) -> str | None:
    """Why ``manifest`` (what the version tag serves) is not what a release of ``spec``
    publishes: an index of a platformed release, one image of linux/amd64 alone (None: it is)."""
    if manifest.is_index == spec.platformed:
        return None
    said = "an image index" if manifest.is_index else "one image"
    return f"serves {said}; {spec.ref} is built for {', '.join(p.name for p in spec.platforms)}"


def _named(platform: OciPlatform | None) -> str:
    parts = (platform.os, platform.architecture, platform.variant) if platform is not None else ()
    return "/".join(x for x in parts if x) or "no platform"


def platform_images(
    client: RegistryClient, repo: str, index: Manifest, platforms: tuple[Platform, ...]
) -> tuple[list[Problem], list[tuple[Platform, Manifest]]]:
    """What is wrong with ``index`` as the index of ``platforms``' images in ``repo``, and each
    declared platform's image it names that is served there as one (those with a problem of
    their own too: their blobs and documents are still worth checking)."""
    problems: list[Problem] = []
    images: list[tuple[Platform, Manifest]] = []
    others = [d for d in index.manifests if not any(p.matches(d.platform) for p in platforms)]
    for d in others:
        problems.append(
            ("index", f"names {d.digest} for {_named(d.platform)}, not a platform of the release")
        )
    for platform in platforms:
        what = f"{platform} image"
        entries = [d for d in index.manifests if platform.matches(d.platform)]
        if len(entries) != 1:
            problems.append(
                (what, f"the index names {f'{len(entries)} images for it' if entries else 'none'}")
            )
        if not entries:
            continue
        entry = entries[0]
        try:
            image = client.get_manifest(repo, entry.digest)
            if image is None or image.is_index:
                problems.append((what, f"the index names {entry.digest}, not served as an image"))
                continue
            images.append((platform, image))
            if entry.size != len(image.body) or entry.media_type != image.media_type:
                is_ = f"{entry.digest} is {image.media_type} of {len(image.body)}"
                problems.append((what, f"the index says {entry.media_type} of {entry.size} bytes; {is_}"))
            raw = client.blob_bytes(repo, image.config_digest)
            config = parse_config(
                raw, what=f"{client.endpoint.name}: config {image.config_digest}", error=WireError
            )
            if not platform.matches(config.platform):
                said = _named(config.platform)
                problems.append((what, f"{entry.digest}'s config says {said}, not {platform}"))
        except ReleaseError as exc:
            problems.append((what, exc.message))
    return problems, images
