#!/usr/bin/env bash
# Run by CI on a tag push: map the tag to NAME:VERSION and release it. Registry credentials
# come from the environment (XPU_RELEASE_USERNAME / XPU_RELEASE_PASSWORD, set from CI secrets)
# and are never echoed; artifact tokens from XPU_RELEASE_ARTIFACT_TOKEN.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:?usage: ci/release-tag.sh TAG}"

ref="$(xpu-release from-tag "$tag")"
mkdir -p out
xpu-release release "$ref" --json > out/release-summary.json
xpu-release status "$ref"
