"""The guarded layer: every byte of outside data comes in and goes out through here.

Outside data is anything this run did not make itself: a file the user names, an OCI layout, an
archive member, an advisory, a VEX document or a release record, a registry's answer. Reading it
is bounded in size (declared and actual), nesting depth, number of entries and time; only regular
files are read. Writing goes through one helper: a temporary file of this run's own in the
target folder, fsync, rename; never through a link; a copy proven where it lands.

Owns: the named limits (``limits``); reading: files and JSON (``reading``), a registry's answer
bodies (``bodies``), zip archives (``archives``); outside text as it may be shown (``shown``);
writing (``writing``; files the user names: ``named``; the locks of what several runs write at
once: ``locks``).

May import: the leaf modules (``errors``, ``files``, ``secrets``) only (and the HTTP client's
types, for the bodies it reads); every wing may import it.
"""
