"""The evidence wing: what a release says about itself, and how it travels with the image.

Owns: the documents as values (``attachment``), making the SBOM and the provenance
(``attest``; the SBOM as SPDX too, ``spdx``), which found one may be reused (``reuse``), the
release's VEX (``vexdoc``), signing them (``signing``) and cosign's layouts of a signed one
(``cosign``), and attaching and
finding them by digest at a registry (``referrers``, which is here rather than in ``oci``
because it knows our documents); and the vulnerability gate that reads the SBOM: advisories
offline (``osv``), OSV's matching rules and severity (``matching``), reviewed exceptions
(``vex``), findings and the gate (``scan``), and SARIF (``sarif``).

May import: ``image``, ``manifest``, ``oci`` and the leaf modules; never ``release`` or ``cli``.
"""
