"""The manifest wing: what a release is made of, as the repository declares it.

Owns: the manifest format (``schema``), loading, inheriting (``extends:``, a list of named
rules in ``inherit``) and validating manifests (the cross-key rules in ``rules``) into
``ImageSpec`` values (``loader``, ``model``, ``yamlsrc``), the
registries file (``registries``), what changed between releases (``diff``), starting a new
release (``bump``), and what CI runs for (``triggers``).

May import: ``oci`` (only the ``Endpoint`` value, which the registries file makes) and the leaf
modules; never ``image``, ``evidence``, ``release`` or ``cli``.
"""

from .loader import Repo, parse_ref
from .model import Component, ImageSpec, Localized

__all__ = ["Component", "ImageSpec", "Localized", "Repo", "parse_ref"]
