"""The tag rules of a publish: version tags are immutable (a tag that holds another image is
refused, before anything is pushed and again at the moment of writing), an image's identity is
its config *and* its layers, and floating tags move only after every endpoint is verified.
Handed the endpoint pool; they never call back into the publisher."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..errors import PublishError, RegistryAuthError, ReleaseError, TagConflict
from ..image.engine import Engine
from ..manifest import ImageSpec
from ..oci.registry import Manifest
from ..progress import Sink
from .plan import Target, floating_tags
from .pool import EndpointPool
from .push import layer_mismatch


class TagRules:
    def __init__(
        self, spec: ImageSpec, pool: EndpointPool, engine: Engine | None, *, allow_overwrite: bool,
        workers: int, on_line: Sink,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.pool = pool
        self.engine = engine
        self.allow_overwrite = allow_overwrite
        self.workers = workers
        self.on_line = on_line
        self._identity: dict[str, str | None] = {}  # manifest digest → why it is not ours
        self._diff_ids: list[str] | None = None

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

    def current(self, target: Target, image_id: str) -> Manifest | None:
        """What ``target``'s version tag holds right now. Asked again at the moment of writing:
        an endpoint that was unreachable during ``check_tags`` is held to the same rule."""
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
        return current

    def not_ours(self, target: Target, manifest: Manifest, image_id: str) -> str | None:
        """Why ``manifest`` is not the tested image (None: it is). Its identity is the config
        *and* the layers: a manifest with the tested config but another layer is not ours."""
        if not manifest.config_digest:
            return "it is an image index (several platforms), not the tested image"
        if manifest.config_digest != image_id:
            return f"its config is {manifest.config_digest}, the tested image is {image_id}"
        if self.engine is None:  # status and catalog only read
            return None
        if manifest.digest not in self._identity:
            if self._diff_ids is None:
                self._diff_ids = list(
                    (self.engine.inspect_raw(image_id).get("RootFS") or {}).get("Layers") or ()
                )
            client = self.pool.client(target.endpoint, fresh=True)
            self._identity[manifest.digest] = layer_mismatch(
                client, self.pool.repo(target.endpoint), manifest, self._diff_ids, self.on_line
            )
        return self._identity[manifest.digest]

    def move_floating(self, source: Manifest, tags: tuple[str, ...]) -> tuple[str, ...]:
        """Move ``tags`` (floating tags of the plan) to ``source`` at every endpoint, checked."""
        moved: list[str] = []
        for t in self.pool.plan.targets:
            client = self.pool.client(t.endpoint)
            for tag, ref in zip(floating_tags(self.spec), t.floating_refs, strict=True):
                if tag not in tags:
                    continue
                if client.head_manifest(self.pool.repo(t.endpoint), tag) != source.digest:
                    client.put_manifest(self.pool.repo(t.endpoint), tag, source)
                if client.head_manifest(self.pool.repo(t.endpoint), tag) != source.digest:
                    msg = f"{ref} does not serve {source.digest} after moving it"
                    raise PublishError(msg)
                moved.append(ref)
        return tuple(moved)
