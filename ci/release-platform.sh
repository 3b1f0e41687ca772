#!/usr/bin/env bash
# Run by CI on a tag push, in a job per platform (on a runner of that architecture where there is
# one): build, smoke-test and scan the tagged release's image of PLATFORM, then save it for the
# release job (out/images/<slug>.tar, `docker save`), which runs only once every platform's job
# has passed (ci/release-tag.sh loads the images, then releases: one index, fail-closed).
#
#   ci/release-platform.sh TAG PLATFORM        e.g. training-cpu-pytorch/26.01 linux/arm64
#
# A platform the release does not declare has nothing to do: said, exit 0 (GitLab's matrix lists
# every platform we build for, whatever the tagged release declares). Any step that fails fails
# the job with its own exit code, and nothing is saved.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:?usage: ci/release-platform.sh TAG PLATFORM}"
platform="${2:?usage: ci/release-platform.sh TAG PLATFORM}"

# The tagged release, and its entry for the platform: the tag of its image in the engine, its slug.
entry="$(xpu-release from-tag "$tag" --json | python3 -c '
import json, sys
tagged = json.load(sys.stdin)
found = [p for p in tagged["platforms"] if p["platform"] == sys.argv[1]]
print(tagged["ref"], *(found[0]["local_ref"], found[0]["slug"]) if found else ("-", "-"))
' "$platform")"
read -r ref image slug <<<"$entry"
if [[ "$image" == "-" ]]; then
  echo "$ref does not declare $platform: nothing to build for it"
  exit 0
fi

xpu-release build "$ref" --platform "$platform"
xpu-release test "$ref" --platform "$platform"
xpu-release scan "$ref" --platform "$platform"  # the gate, early: the release job scans again
mkdir -p out/images
docker save -o "out/images/$slug.tar" "$image"
echo "saved $image ($platform) to out/images/$slug.tar"
