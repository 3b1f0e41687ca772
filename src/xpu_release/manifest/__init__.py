"""Manifests: load, inherit (``extends:``), validate, and build ``ImageSpec`` values."""

from .loader import Repo, parse_ref
from .model import Component, ImageSpec, Localized

__all__ = ["Component", "ImageSpec", "Localized", "Repo", "parse_ref"]
