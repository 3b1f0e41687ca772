#!/usr/bin/env bash
# Run by CI on a tag push, in the job that runs once every platform's job has passed
# (ci/release-platform.sh): map the tag to NAME:VERSION and release it. The platform jobs' images
# (out/images/*.tar, their artifacts) are loaded first, so the release's build finds each one up to
# date (the same inputs) instead of building it again; an image missing, or of other inputs (another
# commit), is built here, reproducibly. Each is smoke-tested and scanned again here (the job that
# publishes tests what it publishes), then one index of them all is published, or nothing.
# Registry credentials come from the environment (XPU_RELEASE_USERNAME / XPU_RELEASE_PASSWORD,
# set from CI secrets) and are never echoed; artifact tokens from XPU_RELEASE_ARTIFACT_TOKEN.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:?usage: ci/release-tag.sh TAG}"

ref="$(xpu-release from-tag "$tag")"
shopt -s nullglob
for image in out/images/*.tar; do
  docker load -i "$image"
done
mkdir -p out
xpu-release release "$ref" --json > out/release-summary.json
xpu-release status "$ref"
