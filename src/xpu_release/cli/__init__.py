"""The ``xpu-release`` command line: Click, option parsing, output, and exit codes. Nothing else.

Every stage lives in its own module; these files only wire them together and map the
``ReleaseError`` hierarchy (``errors.py``) to messages and exit statuses.
"""

from . import images, manifests, releases
from .app import cli, main

__all__ = ["cli", "images", "main", "manifests", "releases"]
