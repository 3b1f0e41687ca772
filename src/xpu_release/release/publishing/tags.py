"""The tag rules of a publish: version tags are immutable (a tag that holds another image is
refused, before anything is pushed and again at the moment of writing), an image's identity is
its config *and* its layers, and floating tags move only after every endpoint is verified.
Handed the endpoint pool; they never call back into the publisher."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from ...errors import PublishError, RegistryAuthError, ReleaseError, TagConflict
from ...image.engine import Engine
from ...manifest import ImageSpec
from ...manifest.platforms import Platform
from ...oci.registry import Manifest, RegistryClient
from ...progress import Sink
from ..model.plan import Target, floating_tags
from ..model.pool import EndpointPool
from .push import layer_mismatch


class TagRules:
    def __init__(
        self, spec: ImageSpec, pool: EndpointPool, engine: Engine | None, *, allow_overwrite: bool,
        workers: int, on_line: Sink, platform_images: Mapping[Platform, str] | None = None,
    ) -> None:  # fmt: skip
        """``platform_images``: a platformed release's tested image of each platform; its version
        tag holds an index of exactly these (and the ``image_id`` the methods take is unused)."""
        self.spec = spec
        self.platform_images = dict(platform_images or {})
        self.pool = pool
        self.engine = engine
        self.allow_overwrite = allow_overwrite
        self.workers = workers
        self.on_line = on_line
        self._identity: dict[str, str | None] = {}  # manifest digest → why it is not ours
        self._diff_ids: dict[str, list[str]] = {}  # image id → its layers

    def check(self, image_id: str) -> None:
        """Before anything is pushed: refuse if any endpoint's version tag holds another image."""
        conflicts: list[str] = []

        def look(t: Target) -> tuple[Target, Manifest | None]:
            try:
                return t, self.pool.client(t.endpoint).get_manifest(
                    self.pool.repo(t.endpoint), self.spec.version
                )
            except RegistryAuthError:
                raise  # definitive: without access nothing can be published there
            except ReleaseError:
                return t, None  # a region that is down fails later, on its own

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            found = list(pool.map(look, self.pool.plan.targets))
        for t, m in found:
            why = self.not_ours(t, m, image_id) if m is not None else None
            if m is not None and why:
                conflicts.append(f"  {t.version_ref}: serves {m.digest}: {why}")
        if conflicts and not self.allow_overwrite:
            msg = (
                f"{self.spec.ref} is already published with other content; version tags are immutable:\n"
                + "\n".join(conflicts)
                + "\nnothing was pushed. Release a new version, or pass --allow-overwrite."
            )
            raise TagConflict(msg)

    def current(self, target: Target, image_id: str, platform: Platform | None = None) -> Manifest | None:
        """What ``target``'s version tag holds right now. Asked again at the moment of writing:
        an endpoint that was unreachable during ``check`` is held to the same rule. With
        ``platform`` (one platform's image of a platformed release being staged), the image the
        index at the tag names for that platform."""
        current = self.pool.client(target.endpoint).get_manifest(
            self.pool.repo(target.endpoint), self.spec.version
        )
        if current is not None and not self.allow_overwrite:
            why = self.not_ours(target, current, image_id)
            if why:
                msg = (
                    f"{target.version_ref} holds other content ({current.digest}): {why}; "
                    "version tags are immutable"
                )
                raise TagConflict(msg)
        if current is not None and current.is_index and platform is not None:
            return self.platform_image(target, current, platform)
        return current

    def not_ours(self, target: Target, manifest: Manifest, image_id: str) -> str | None:
        """Why ``manifest`` is not the tested image (None: it is). Its identity is the config
        *and* the layers: a manifest with the tested config but another layer is not ours. Of a
        platformed release: an index of exactly its platforms' tested images."""
        if self.platform_images:
            return self._index_not_ours(target, manifest)
        if not manifest.config_digest:
            return "it is an image index (several platforms), not the tested image"
        return self._image_not_ours(target, manifest, image_id)

    def is_tested(self, target: Target, manifest: Manifest, image_id: str) -> bool:
        """``manifest`` at ``target`` is the tested image ``image_id`` itself, config and layers:
        what a push may keep instead of pushing it again (``--allow-overwrite`` lets a tag hold
        other content; it never makes that content the tested image)."""
        return not manifest.is_index and self._image_not_ours(target, manifest, image_id) is None

    def _image_not_ours(self, target: Target, manifest: Manifest, image_id: str) -> str | None:
        if manifest.config_digest != image_id:
            return f"its config is {manifest.config_digest}, the tested image is {image_id}"
        if self.engine is None:  # status and catalog only read
            return None
        if manifest.digest not in self._identity:
            if image_id not in self._diff_ids:
                self._diff_ids[image_id] = list(
                    (self.engine.inspect_raw(image_id).get("RootFS") or {}).get("Layers") or ()
                )
            client = self.pool.client(target.endpoint, fresh=True)
            self._identity[manifest.digest] = layer_mismatch(
                client, self.pool.repo(target.endpoint), manifest, self._diff_ids[image_id], self.on_line
            )
        return self._identity[manifest.digest]

    def _index_not_ours(self, target: Target, manifest: Manifest) -> str | None:
        names = ", ".join(p.name for p in self.platform_images)
        if not manifest.is_index:
            return f"it is one image; {self.spec.ref} is an index of its {names} images"
        if len(manifest.manifests) != len(self.platform_images):
            return f"its index names {len(manifest.manifests)} images; {self.spec.ref} has {names}"
        for platform, image_id in self.platform_images.items():
            image = self.platform_image(target, manifest, platform)
            why = self._image_not_ours(target, image, image_id) if image is not None else "it is not there"
            if why:
                return f"its {platform} image: {why}"
        return None

    def platform_image(self, target: Target, index: Manifest, platform: Platform) -> Manifest | None:
        """The image manifest ``index`` names for ``platform`` at ``target`` (None: it names
        none, or the endpoint does not hold it)."""
        entry = platform.entry(index.manifests)
        if entry is None:
            return None
        found = self.pool.client(target.endpoint, fresh=True).get_manifest(
            self.pool.repo(target.endpoint), entry.digest
        )
        return found if found is not None and not found.is_index else None

    def move_floating(self, source: Manifest, tags: tuple[str, ...]) -> tuple[str, ...]:
        """Move ``tags`` (floating tags of the plan) to ``source`` at every endpoint, checked."""
        moved: list[str] = []
        for t in self.pool.plan.targets:
            client = self.pool.client(t.endpoint)
            for tag, ref in zip(floating_tags(self.spec), t.floating_refs, strict=True):
                if tag not in tags:
                    continue
                point(client, self.pool.repo(t.endpoint), tag, source, ref)
                moved.append(ref)
        return tuple(moved)


def point(client: RegistryClient, repo: str, tag: str, manifest: Manifest, ref: str) -> None:
    """``repo:tag`` names ``manifest``, checked after the write (a registry that took it and
    serves another is exit 7)."""
    if client.head_manifest(repo, tag) != manifest.digest:
        client.put_manifest(repo, tag, manifest)
    if client.head_manifest(repo, tag) != manifest.digest:
        msg = f"{ref} does not serve {manifest.digest} after moving it"
        raise PublishError(msg)
