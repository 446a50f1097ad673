#!/bin/sh
# Overlay the Python sources of SGLang at one commit (the DDTree PR) onto the image's installed
# SGLang: files of the commit replace the image's, files only the image has (its generated
# _version.py) stay, and compiled kernels (sgl-kernel, flashinfer) stay the image's.
#   overlay.sh REPO_URL COMMIT_SHA
set -eu
repo=$1
commit=$2
case "$commit" in
  *[!0-9a-f]*|"") echo "overlay: DDTREE_COMMIT must be a full 40-hex commit SHA, got '$commit'" >&2; exit 1 ;;
esac
[ "${#commit}" -eq 40 ] || { echo "overlay: DDTREE_COMMIT must be 40 hex digits, got '$commit'" >&2; exit 1; }

# located without importing sglang (its import initialises CUDA-side modules)
pkg=$(python3 -c 'import importlib.util as u; print(u.find_spec("sglang").submodule_search_locations[0])')
before=$(python3 -c 'import importlib.metadata as m; print(m.version("sglang"))' 2>/dev/null || echo unknown)
work=$(mktemp -d)
git init -q "$work"
# GitHub serves any reachable commit by SHA, so the PR head needs no branch name
git -C "$work" fetch -q --depth 1 "$repo" "$commit"
git -C "$work" -c advice.detachedHead=false checkout -q FETCH_HEAD
got=$(git -C "$work" rev-parse HEAD)
[ "$got" = "$commit" ] || { echo "overlay: fetched $got, not $commit" >&2; exit 1; }
[ -d "$work/python/sglang" ] || { echo "overlay: $repo@$commit has no python/sglang" >&2; exit 1; }
changed=$(cd "$work/python/sglang" && find . -name '*.py' | while read -r f; do cmp -s "$f" "$pkg/$f" || echo "$f"; done | wc -l)
cp -a "$work/python/sglang/." "$pkg/"
find "$pkg" -name '__pycache__' -type d -prune -exec rm -rf {} +
printf '{"repo": "%s", "commit": "%s", "package_dir": "%s", "sglang_before": "%s", "python_files_changed": %s}\n' \
  "$repo" "$commit" "$pkg" "$before" "$changed" > /opt/ddbench-sglang/overlay.json
rm -rf "$work"
cat /opt/ddbench-sglang/overlay.json
