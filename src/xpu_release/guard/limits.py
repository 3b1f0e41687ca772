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

# --- reading: sizes ------------------------------------------------------------------------------

# A manifest or an image index, from a registry or a layout: distribution refuses to store one
# larger than 4 MiB (registry/handlers/manifests.go, maxManifestBodySize), and so do containerd
# and go-containerregistry when they read one; ours are a few kilobytes.
MAX_MANIFEST_BYTES = 4 << 20

# A layout's index.json: one entry (about 300 bytes) per tag and per referrer; 64 MiB holds some
# 200,000 of them, far past any layout a person carries, and is still read in a moment.
MAX_INDEX_JSON_BYTES = 64 << 20

# The oci-layout marker file: ``{"imageLayoutVersion": "1.0.0"}`` is 30 bytes.
MAX_MARKER_BYTES = 4 << 10

# A small blob read into memory (an image config, an attached document such as an SBOM or a
# signed provenance): an SBOM of a large image is a few megabytes; 64 MiB is the bound the
# attachments were read with before this module.
MAX_DOCUMENT_BYTES = 64 << 20

# An image config: distribution reads configs into memory too; a config of 100 layers with its
# history is tens of kilobytes. 4 MiB as for a manifest.
MAX_CONFIG_BYTES = 4 << 20

# A release record: ours are a few kilobytes (one entry per endpoint, one per finding); 16 MiB
# leaves room for a gate that found thousands of vulnerabilities.
MAX_RECORD_BYTES = 16 << 20

# One entry of a release's re-scan history (one ``watch`` answer: a few kilobytes, one object per
# finding): bounded as a release record is.
MAX_HISTORY_ENTRY_BYTES = MAX_RECORD_BYTES

# A YAML file the repository holds (a manifest, the registries file, image.yaml, a VEX
# document): ours are a few kilobytes. The bound the YAML loader had before this module.
MAX_YAML_BYTES = 256 << 10

# The values of one YAML document (every scalar, mapping and list counts one).
MAX_YAML_VALUES = 20_000

# A committed lock file: a few hundred pinned wheels with their hashes are tens of kilobytes.
MAX_LOCK_BYTES = 16 << 20

# A wheel or an artifact a build fetches: the largest (a PyTorch wheel for XPU) is about a
# gigabyte; 64 GiB stops a server that sends without end before it fills the cache's disk.
MAX_ARTIFACT_BYTES = 64 << 30

# A signing or verifying key (PEM): an Ed25519 or P-256 key is a few hundred bytes.
MAX_KEY_BYTES = 64 << 10

# A docker config.json (credentials): a few kilobytes even with many registries.
MAX_DOCKER_CONFIG_BYTES = 1 << 20

# One OSV record, loose or inflated from an archive: the largest in osv.dev's exports (Linux
# kernel advisories with every affected version listed) are a few hundred kilobytes.
MAX_ADVISORY_BYTES = 16 << 20

# The body of an answer we only show in an error (a registry's 4xx/5xx text) or do not use (a
# 201 to a PUT): a few hundred bytes are shown; no more than this is ever read.
MAX_ERROR_BODY_BYTES = 64 << 10

# A registry's answer that is a small JSON document: a page of tags, a token.
MAX_SMALL_ANSWER_BYTES = 4 << 20

# An eStargz layer's TOC (oci/toc.py): about 200 bytes an entry; the largest layer of an SDK
# (half a million files) makes some 100 MB, which Python's JSON reader holds in about ten times
# that. 256 MiB, and the entries bounded below, keep a hostile TOC from taking the runner's memory.
MAX_TOC_BYTES = 256 << 20
# Entries of one eStargz layer (files, folders and links; its chunks count apart, at most as many
# again): an SDK's largest layer holds some 500,000.
MAX_TOC_ENTRIES = 2_000_000

# A prefetch profile (images/<image>/<version>/prefetch.txt): the files a workload opens first,
# a few thousand paths of under a hundred bytes; 4 MiB holds forty thousand.
MAX_PROFILE_BYTES = 4 << 20

# --- reading: structure --------------------------------------------------------------------------

# JSON and YAML nesting: the deepest document read (an SLSA provenance, a CycloneDX SBOM) is
# under 10 levels; 64 leaves room and stays far below Python's recursion limit (1000 frames),
# which a parser or a walk over the value would otherwise meet first as a crash.
MAX_DEPTH = 64

# The characters of one JSON number: a 64-bit integer has at most 20 digits, a double's
# shortest form at most 24 characters. A 400-digit number is no size, count or score.
MAX_NUMBER_CHARS = 32

# The largest size or count a descriptor may state: OCI's ``size`` is an int64.
MAX_INT64 = (1 << 63) - 1

# Descriptors in one manifest (layers) or index (manifests): an image has at most 127 layers
# (overlayfs' limit in Docker); an index a few platforms. index.json lists one per tag and
# referrer; 100,000 is far past any layout a person carries.
MAX_DESCRIPTORS = 100_000

# Referrers of one image: its SBOM, provenance, VEX, signatures and their bundles are a handful,
# but other tools attach per scan or per signer, and the mirror copies 10,000 in seconds (a test
# holds it): 100,000 is far past any image and bounds the manifests fetched for them.
MAX_REFERRERS = 100_000

# SBOMs attached to one release that ``watch`` reads (and scans as one): a release has one; a rerun
# after the SBOM generator changed, or one attached again by hand, makes two or three. More is
# no release of ours: refused, named, rather than fetched by the thousand.
MAX_SBOMS = 16

# Tags of one repository read by the tag list, over every page.
MAX_TAGS = 100_000

# --- reading: folder trees (guard/trees.py) --------------------------------------------------

# Folders walked below a folder from outside (an advisories folder, the cache a runner shares):
# osv.dev's exports are 2 deep, a build context (a source tree) rarely 30. A walk keeps one open
# folder per level while it removes a tree, far under a process's 1,024 descriptors, and never
# meets Python's recursion limit (1,000 frames), which its own walks (rglob, os.walk, rmtree) hit
# at a tree 1,000 deep. A folder deeper is not entered: counted as skipped, named.
MAX_FOLDER_DEPTH = 256

# --- reading: a workload's figures (image/workload.py) -------------------------------------------

# What the engine keeps of an evaluation container's log (its json-file driver's max-size) and
# what is read of it: a workload prints one line of figures, a few hundred bytes; a chatty one a
# progress line per step before it. 1 MiB keeps the last line of any of them.
MAX_WORKLOAD_LOG_BYTES = 1 << 20

# The line of figures itself: xpu-bench's is about 400 bytes (a dozen numbers and its sha256).
MAX_WORKLOAD_LINE_BYTES = 16 << 10

# What the record keeps of one run's line: the metric and at most this many other numbers (the
# first in the line's order), each named in at most MAX_WORKLOAD_FIGURE_NAME characters (longer
# names are not kept). xpu-bench prints 7 numbers. The record keeps every run of every arm: at
# the manifest's most (9 variants x 3 images x 55 rounds) a full 16 KiB line kept whole made a
# record past MAX_RECORD_BYTES (its reader then refused the release's own record as damaged);
# so bounded, such a record is under 3 MB.
MAX_WORKLOAD_FIGURES_KEPT = 16
MAX_WORKLOAD_FIGURE_NAME = 64

# --- reading: archives ---------------------------------------------------------------------------

# Members of one advisory archive: osv.dev's largest per-ecosystem export (Debian) has under
# 100,000 records; its all-ecosystems export under 600,000.
MAX_ARCHIVE_MEMBERS = 1_000_000

# How much larger a member may inflate than it is stored: OSV JSON deflates 5 to 15 times; a
# member that claims (or turns out) to inflate more than 200 times is a bomb (a 2 MB archive that
# inflates to 4.3 GB is 2,000 times). Members under MAX_ADVISORY_BYTES / 64 are exempt: a short
# record of repeated text may compress further without costing anything.
MAX_INFLATE_RATIO = 200

# Everything an archive inflates to, over all members: osv.dev's all-ecosystems export inflates
# to about 5 GB; twice that bounds the time an index build may take.
MAX_ARCHIVE_INFLATED = 10 << 30

# What an advisory archive's index (``evidence/osvindex.py``: each record once, a row per package
# it names) may be made of, against the archive's size: OSV JSON deflates 5 to 15 times, so an
# index is about that much larger than its archive. Past 40 times (or MIN_INDEX_ALLOWANCE, for a
# small archive) it is refused: a record naming thousands of packages, or members built to inflate,
# cannot fill the runner's disk with an index.
MAX_INDEX_GROWTH = 40
MIN_INDEX_ALLOWANCE = 64 << 20

# --- reading: the network ------------------------------------------------------------------------

# A registry must send a body at least this fast, averaged over each RATE_WINDOW: a healthy
# registry sends megabytes a second; a link slower than 16 KiB/s would take 3 days for a 4 GB
# layer. A server that sends a byte every few seconds never trips the socket's read timeout
# (each byte resets it); this bound stops it.
MIN_RATE = 16 << 10
RATE_WINDOW = 30.0

# A body read whole into memory (a manifest, an index, a config, a token) must arrive within this
# many seconds: 4 MiB at MIN_RATE, with room to spare.
BODY_DEADLINE = 300.0

# (An answer's status line and headers must arrive within the request's socket timeout once the
# request is sent, 60 s by default: ``oci.transport.RetryPolicy.timeout``, a deadline there.)

# Redirects followed for one request: a registry sends a blob's GET to its storage once
# (requests' default of 30 lets a server that redirects for ever hold a run 30 round trips).
MAX_REDIRECTS = 10

# Pages of one tag list: registries page at 100 tags or more (Docker Hub, Harbor, ACR), so
# MAX_TAGS fits in 1,000 pages. A page that brings no new tag and names another ends the list
# as an error (empty pages, a new ``Link`` each time: ``status --catalog`` asked for ever); this
# bound stops one that sends a tag a page.
MAX_TAG_PAGES = 1_000

# A CA bundle named by the registries file (``ca_file``): the system's, with every public root,
# is about 220 KB; a private CA is a few kilobytes.
MAX_CA_BYTES = 4 << 20

# A password or token given on standard input (``--password-stdin``): a registry token (a JWT,
# an Aliyun STS token) is a few kilobytes; a file given by mistake is not read to its end.
MAX_PASSWORD_BYTES = 64 << 10

# --- showing outside text ------------------------------------------------------------------------

# Outside text echoed in a message (an id, a tag, a registry's error text) is cut to this many
# characters: enough to recognise it, never a screenful.
MAX_SHOWN_CHARS = 200
