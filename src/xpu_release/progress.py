"""Progress: the one type every stage reports through (a line at a time), and the stage result
the pipeline's report is made of. The CLI decides how lines look (``cli/output.py``)."""

from __future__ import annotations

from collections.abc import Callable

Sink = Callable[[str], None]
