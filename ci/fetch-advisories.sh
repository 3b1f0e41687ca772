#!/usr/bin/env bash
# Run by CI before a release: bring osv.dev's PyPI and Debian exports into DIR (default
# .cache/osv), for the vulnerability gate, which never fetches anything itself. A download that
# fails keeps the archive an earlier job left (CI caches DIR), and says how old it is; with no
# archive at all, the job fails.
#
#   ci/fetch-advisories.sh [DIR]        then: XPU_RELEASE_ADVISORIES=DIR xpu-release release …
set -euo pipefail
dir="${1:-.cache/osv}"
# assumed: osv.dev's public export bucket (its documentation names this address); a mirror or
# a file:// copy can stand in (OSV_BASE_URL), as the pipeline tests do.
base="${OSV_BASE_URL:-https://osv-vulnerabilities.storage.googleapis.com}"
for ecosystem in PyPI Debian; do
  mkdir -p "$dir/$ecosystem"
  target="$dir/$ecosystem/all.zip"
  if curl -fsSL --retry 3 -o "$target.part" "$base/$ecosystem/all.zip"; then
    mv "$target.part" "$target"
    echo "advisories: $ecosystem/all.zip fetched ($(du -h "$target" | cut -f1))"
  elif [[ -f "$target" ]]; then
    rm -f "$target.part"
    echo "advisories: could not fetch $ecosystem/all.zip; using the cached one of $(date -r "$target" -u +%Y-%m-%dT%H:%MZ)" >&2
  else
    rm -f "$target.part"
    echo "advisories: could not fetch $base/$ecosystem/all.zip and none is cached" >&2
    exit 1
  fi
done
