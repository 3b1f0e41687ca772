"""The OCI wing: talking to registries, and nothing about releases.

Owns: where a registry is (``endpoint``), the transport (session, TLS, auth flows, retries,
counters) and its typed wire errors, the registry API on top of it (manifests, blobs, mounts,
uploads, paged tags), OCI image layout directories (``layout``), credentials for a host, and
the content-addressed store of digests.

May import: the leaf modules (``errors``, ``secrets``, ``files``, ``settings``) only.
"""
