"""The release wing: the stages that put a tested image everywhere and prove it.

Owns: the pipeline (``pipeline``: the stages in order; ``context``: what a release works out
once and hands down; ``stages``: each stage on that context), what a publish would do
(``plan``), the first push (``push``), the image manifest it writes (``manifests``), what an
endpoint already holds of an image (``held``: earlier releases' layers, the base release's
layers to mount), publishing
(``publish``, with the tag rules in ``tags`` and the blob spool and early copies in
``copies``), the endpoint pool and read-only questions (``pool``, ``serving``), verification
(``verify``), the dry run's checks (``preflight``), the record (``record``), the release notes
(``notes``), a runner's disk (``cache``: du, prune, the lock a run holds), and copies of a
release with its referrers elsewhere (``mirror``).

May import: ``evidence``, ``image``, ``manifest``, ``oci`` and the leaf modules; never ``cli``.
"""
