"""The image wing: from a manifest to a built, smoke-tested image in the engine.

Owns: rendering Dockerfiles (``render``, ``templating``), the lock (``lock``), what an image is
made from, worked out once (``inputs``: the Dockerfile, the lock, their digest), the pinned base
(``baseimage``), fetching wheels and artifacts (``fetch``), the engine adapter (``engine``), the
build and its reproducible layers (``build``, ``normalize``, ``layers``, ``repro``), and the smoke
test (``smoke``, ``smoke_plugin``, and the generic checks it runs inside every image, ``checks/``:
pytest files, not modules of the package, shipped with it).

May import: ``manifest``, ``oci`` and the leaf modules; never ``evidence``, ``release`` or ``cli``.
"""
