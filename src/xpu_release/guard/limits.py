"""The bounds of the guarded layer, each a named constant with a sentence on why it is what it
is. Errors that a bound raises name the input and the bound."""

from __future__ import annotations

# --- writing (guard/writing.py, guard/locks.py) -----------------------------------------------

# A new file is readable by every user (less the umask): a layout on a shared disk is read by
# another user's skopeo, a cache by the runner's other jobs; nothing we write is a secret.
NEW_FILE_MODE = 0o644
NEW_FOLDER_MODE = 0o755  # the same for the folders made on the way (blobs/sha256, the cache's)

# Bytes read or written at a time when a blob is copied or hashed: large enough that a system
# call per block costs nothing beside the bytes, small enough to stay out of memory's way.
COPY_BLOCK = 1 << 20

# A temporary file younger than this is never swept, even unlocked: it may be one another run
# has just created and not yet locked (microseconds; the margin covers a clock step on a
# shared disk). A killed run's temporary is older by the time anyone reruns.
TEMPORARY_GRACE_SECONDS = 10.0
