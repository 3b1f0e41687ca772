"""The release wing: what a release is, and the operations that make, publish, steer and watch it.

Owns, by folder:

- ``model/``: what a release is, the one answer every command asks: its plan, the line rule
  (which floating tags it takes), the endpoint pool and what the endpoints serve, which image is
  the release, whether it is withdrawn, its typed record and re-scan history.
- ``run/``: running a release: the pipeline and its stages, preflight, the evaluation, the notes,
  a runner's disk.
- ``publishing/``: the first push, the copies to the regions, the tag rules, the documents,
  ``verify`` and ``mirror``.
- ``steering/``: ``promote``, ``withdraw`` and ``reinstate``.
- ``watching/``: ``watch``, ``patch`` and ``watch --release``.

May import: ``evidence``, ``image``, ``manifest``, ``oci`` and the leaf modules; never ``cli``.
"""
