#!/usr/bin/env bash
# Run by CI on a schedule (GitHub `schedule:`, GitLab schedule pipelines): look again at every
# published release (its SBOM as the registry serves it against today's advisories, its base,
# the patch SLA) and patch and release what needs it, parents first. Registry credentials and
# artifact tokens come from the environment, as for a tag release, and are never echoed.
#
# Exit 0: nothing was due, or every patch that was due is published. 15: something still needs a
# person (out of SLA with no fix, a patch that could not be made, a patch an earlier run
# published whose files are not committed yet). Another code: a release could
# not be checked (its error's own code). out/watch.json has every field whatever the exit; the
# patch releases' files (manifests/, images/) are in the job's artifacts, to be committed.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
rc=0
xpu-release watch --release --json > out/watch.json || rc=$?
git status --porcelain -- manifests images | sed 's/^/written: /' || true
exit "$rc"
