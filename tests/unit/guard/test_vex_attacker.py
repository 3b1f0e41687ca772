"""A Hypothesis attacker of the VEX a registry serves, as ``promote`` reads it
(``evidence/vex.vex_statements``, the repository's VEX file reader): whatever the predicate holds
(any JSON value, statements of any shape, dates that are not dates, products that are not package
URLs), the reader returns statements and problems and never raises; an exception it returns
always has its review date, so no due review is passed over."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_release.evidence.vex import CONTEXT, EXCEPTIONS, vex_statements
from xpu_release.manifest.yamlsrc import Source

from .strategies import TEXT

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
STATEMENT = st.fixed_dictionaries(
    {},
    optional={
        "vulnerability": st.fixed_dictionaries({"name": TEXT}) | JSON,
        "status": st.sampled_from(["not_affected", "affected", "fixed", "under_investigation"]) | JSON,
        "justification": st.sampled_from(["vulnerable_code_not_present"]) | JSON,
        "review_by": st.dates().map(str) | JSON,
        "products": st.lists(st.sampled_from(["pkg:oci/demo", "pkg:pypi/x@1"]) | JSON, max_size=3) | JSON,
        "action_statement": TEXT | JSON,
    },
)
PREDICATE = JSON | st.fixed_dictionaries(
    {"@context": st.just(CONTEXT) | JSON, "statements": st.lists(STATEMENT | JSON, max_size=4) | JSON}
)


@settings(max_examples=300, deadline=None)
@given(PREDICATE)
def test_any_predicate_is_statements_and_problems_never_an_exception(predicate: Any) -> None:
    statements, problems = vex_statements(Source(file="registry: the VEX", data=predicate))

    assert all(p.file == "registry: the VEX" for p in problems)
    assert all(s.review_by is not None for s in statements if s.status in EXCEPTIONS)
    if not (isinstance(predicate, dict) and predicate.get("@context") == CONTEXT):
        assert statements == ()
