"""The labels a build writes on an image, which later stages read: what a published image was
built from. Here, not in ``build.py``, so that the readers (``status``, build avoidance,
``publish``) need not load the build stage and the engine client to know a label's name."""

INPUTS_LABEL = "io.xpu-release.inputs.sha256"  # every input of the build, hashed together
MANIFEST_LABEL = "io.xpu-release.manifest.sha256"  # the resolved manifest
# The digest of the base the image was built on (the lock's); publish mounts that release's
# layers from the base's own repository at each endpoint.
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
# The workload an image carries for the evaluation (``io.xpu-release.workload.xpu-bench`` =
# ``sha256:…`` of its file, set by the Dockerfile template): images are compared only when they
# carry the same one.
WORKLOAD_LABEL_PREFIX = "io.xpu-release.workload."
