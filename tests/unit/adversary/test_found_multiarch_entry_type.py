"""Found by the adversary of issue 43: a registry serving manifests with another Content-Type
(``text/plain``) at the first endpoint made publish write an index whose every entry said that
type, at every endpoint (the index is copied byte for byte), its version tag written: a client
reading the index takes the entry's media type and refuses it; and the copies to the other regions
were put as ``text/plain`` too. A manifest read from outside (``Manifest.read``) now has the
media type its bytes state, else the one it was served with: the index's entries and the copies
say what each manifest is."""

from __future__ import annotations

from pathlib import Path

from xpu_release.oci.model import OCI_MANIFEST
from xpu_release.release.publishing.verify import verify

from ..release.platformed import world


def test_the_index_names_each_image_by_the_media_type_it_states_whatever_the_registry_served(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        w.registries["public"].faults.manifest_type = "text/plain"
        record = w.published()
        w.registries["public"].faults.manifest_type = None

        for name in ("public", "vpc/cn-beijing", "vpc/cn-wulanchabu"):
            client, repo = w.client(name)
            index = client.get_manifest(repo, "25.03")
            assert index is not None
            assert index.digest == record.digest
            assert [d.media_type for d in index.manifests] == [OCI_MANIFEST, OCI_MANIFEST]
        report = verify(w.pool(), record.digest, deep=False)
        assert report.ok, report.findings
