"""The bounds of the guarded layer, each a named constant with a sentence on why it is what it
is. Errors that a bound raises name the input and the bound."""

from __future__ import annotations
