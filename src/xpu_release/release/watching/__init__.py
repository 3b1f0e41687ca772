"""After a release: ``watch`` reads what users are served, finds what needs a patch, and
``patch`` prepares it (``watch --release`` releases it)."""
