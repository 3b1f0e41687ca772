"""How `verify --deep` shares out its reading: each blob's copies (one an endpoint) are one group,
read in step and hashed once, whatever order the endpoints listed them in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xpu_release.release.publishing.blobjobs import in_step


@given(sizes=st.lists(st.integers(0, 10**10), min_size=1, max_size=12), endpoints=st.integers(1, 6))
def test_each_blobs_copies_are_one_group_and_every_job_is_in_one(sizes: list[int], endpoints: int) -> None:
    jobs = [(f"sha256:{n}", size) for _ in range(endpoints) for n, size in enumerate(sizes)]

    groups = in_step(jobs)

    assert sorted(i for g in groups for i in g) == list(range(len(jobs)))
    assert sorted({jobs[g[0]] for g in groups}) == sorted(set(jobs))  # one group a blob
    assert all(len({jobs[i] for i in g}) == 1 and len(g) == endpoints for g in groups)
