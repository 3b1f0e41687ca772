"""The packages of a CycloneDX SBOM (``scan.packages_in``) are a set: however a document lists
them (twice, with another qualifier, nested in an assembly's ``components``, split over two
SBOMs attached to one image), one package is one package, and reading them takes time linear
in their number."""

from __future__ import annotations

import gc
import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from xpu_release.evidence.scan import packages_in

PYPI = st.tuples(
    st.sampled_from(["accelerate", "Flash_Attn", "flash-attn", "ray"]), st.sampled_from(["1.0", "2.0"])
)
DEB = st.tuples(st.sampled_from(["libssl3", "openssl", "bash"]), st.sampled_from(["3.0.1-1", "5.2-1"]))


def pypi(name: str, version: str, qualifier: str = "") -> dict[str, Any]:
    return {
        "type": "library",
        "name": name,
        "version": version,
        "purl": f"pkg:pypi/{name}@{version}{qualifier}",
    }


def deb(name: str, version: str, qualifier: str = "") -> dict[str, Any]:
    purl = f"pkg:deb/debian/{name}@{version}?arch=amd64&distro=debian-12&upstream=openssl{qualifier}"
    return {"type": "library", "name": name, "version": version, "purl": purl}


components = st.lists(st.builds(lambda nv: pypi(*nv), PYPI) | st.builds(lambda nv: deb(*nv), DEB), max_size=8)


def document(listed: list[dict[str, Any]]) -> dict[str, Any]:
    return {"bomFormat": "CycloneDX", "components": listed}


def nest(listed: list[dict[str, Any]], at: int) -> list[dict[str, Any]]:
    """The components from ``at`` on, moved inside an assembly (CycloneDX's nested components)."""
    return [*listed[:at], {"type": "application", "name": "assembly", "components": listed[at:]}]


def key(packages: tuple[Any, ...]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {(p.ecosystem, p.name, p.version, p.binaries) for p in packages}


@given(listed=components, at=st.integers(0, 8), split=st.integers(0, 8), data=st.data())
def test_how_a_document_lists_its_packages_never_changes_which_they_are(
    listed: list[dict[str, Any]], at: int, split: int, data: st.DataObject
) -> None:
    once = packages_in(document(listed))
    again = [
        *listed,
        *(
            pypi(c["name"], c["version"], "?vendored=yes")
            for c in listed
            if c["purl"].startswith("pkg:pypi/")
        ),
        *(deb(c["name"], c["version"], "&note=copy") for c in listed if c["purl"].startswith("pkg:deb/")),
    ]
    shuffled = data.draw(st.permutations(again))

    for listing in (
        [document(listed)],
        [document(again)],  # each listed twice, once with a qualifier
        [document(nest(shuffled, at))],  # nested in an assembly, in another order
        [document(listed[:split]), document(listed[split:])],  # over two SBOMs of one image
    ):
        found = packages_in(*listing)
        assert key(found) == key(once)
        assert len(found) == len(key(once))  # one package, one entry


def test_a_pypi_name_is_one_package_however_it_is_spelled() -> None:
    found = packages_in(
        document([pypi("Flash_Attn", "2.0"), pypi("flash-attn", "2.0"), pypi("flash.attn", "2.0")])
    )

    assert [(p.name, p.version) for p in found] == [("flash-attn", "2.0")]


def test_reading_many_packages_takes_time_linear_in_their_number() -> None:
    def took(n: int) -> float:
        doc = document([pypi(f"p{i}", "1.0") for i in range(n)])
        gc.collect()
        gc.disable()  # a collection of the other's garbage is no part of either reading
        try:
            started = time.thread_time()  # this thread's CPU: time spent descheduled is not counted
            assert len(packages_in(doc)) == n
            return time.thread_time() - started
        finally:
            gc.enable()

    took(1000)  # warm
    # The fastest of three of each, in CPU time: on a loaded machine (five test workers on two
    # cores) wall time once made 16 times the packages take 70 times as long; they take 18.5.
    small, large = min(took(1_000) for _ in range(3)), min(took(16_000) for _ in range(3))

    # 16 times the packages: about 16 times the time, never 256 (a margin of 4 for a loaded
    # machine: the check failed once at 8 times the packages with a margin of 3).
    assert large < small * 16 * 4
