"""xpu-release: manifests → Dockerfiles → tested images → verified multi-region releases."""

__version__ = "0.1.0"
