"""jsonschema's IRI grammars compiled when an IRI is first checked, not when jsonschema is
imported (the record's shape checks import it; a record has no IRI)."""

from __future__ import annotations

from typing import Any


def defer_iri_grammars() -> None:
    """Let ``import jsonschema`` cost 0.1 s, not 1.1 s: its format checker imports
    ``rfc3987_syntax`` (pulled in by cyclonedx-python-lib's validation extra), which compiles three
    Earley parsers of the IRI grammar as it is imported. A record has no IRI to check, so the first
    import gets a stand-in whose checks import the real module when first called: the SBOM's
    ``iri-reference`` fields are still checked, at the first one, in the process that makes it."""
    import importlib
    import importlib.util
    import sys
    import types

    name = "rfc3987_syntax"
    if "jsonschema" in sys.modules or name in sys.modules:
        return
    found = importlib.util.find_spec(name)
    if found is None or found.submodule_search_locations is None:
        return

    def real() -> types.ModuleType:
        return importlib.import_module(f"{name}.syntax_helpers")  # what its __init__ re-exports

    def is_valid_syntax(term: str, value: str) -> bool:  # the one name jsonschema imports
        return bool(real().is_valid_syntax(term, value))

    def rest(attr: str) -> Any:
        return getattr(real(), attr)

    stand_in = types.ModuleType(name, "rfc3987_syntax, imported when first used (see release/model/iri.py)")
    # its submodules load from the real package; any other name is looked up there (PEP 562),
    # but not __file__, which tools read of every module (Hypothesis's scan for constants did)
    vars(stand_in).update(
        __path__=list(found.submodule_search_locations), __file__=found.origin,
        is_valid_syntax=is_valid_syntax, __getattr__=rest,
    )  # fmt: skip
    sys.modules[name] = stand_in
