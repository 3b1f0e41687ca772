"""The evidence wing: what a release says about itself, and how it travels with the image.

Owns: the documents as values (``attachment``), making the SBOM and the provenance
(``attest``), signing them (``signing``), and attaching and finding them by digest at a
registry (``referrers``, which is here rather than in ``oci`` because it knows our documents).

May import: ``image``, ``manifest``, ``oci`` and the leaf modules; never ``release`` or ``cli``.
"""
