#!/bin/sh
# Overlay the pinned DDTree source (an export: SRC/sglang + SRC/source.json, made by
# `python -m containers.sglang_source export`) onto the installed stock SGLang of the same release:
# the fork's files replace the stock ones, files only the stock package has (its generated
# _version.py, the compiled gRPC _core) stay, and the compiled parts (sglang-kernel, flashinfer)
# stay the pinned wheels'. Reads nothing from the network.
#   overlay.sh SRC [RECORD]      RECORD: where overlay.json goes (default /opt/ddbench-sglang/overlay.json)
# PYTHON picks the interpreter whose sglang is overlaid (default python3).
set -eu
src=$1
record=${2:-/opt/ddbench-sglang/overlay.json}
py=${PYTHON:-python3}
[ -d "$src/sglang" ] && [ -f "$src/source.json" ] \
  || { echo "overlay: $src is not an export of the DDTree source (no sglang/ or source.json)" >&2; exit 1; }
# located without importing sglang (its import initialises CUDA-side modules)
pkg=$("$py" -c 'import importlib.util as u; s = u.find_spec("sglang"); print(s.submodule_search_locations[0] if s else "")')
[ -n "$pkg" ] || { echo "overlay: $py has no sglang installed to overlay" >&2; exit 1; }
before=$("$py" -c 'import importlib.metadata as m; print(m.version("sglang"))' 2>/dev/null || echo unknown)
changed=$(cd "$src/sglang" && find . -name '*.py' | while read -r f; do cmp -s "$f" "$pkg/$f" || echo "$f"; done | wc -l)
cp -R "$src/sglang/." "$pkg/"
find "$pkg" -name '__pycache__' -type d -prune -exec rm -rf {} +
mkdir -p "$(dirname "$record")"
"$py" - "$src/source.json" "$pkg" "$before" "$changed" "$record" <<'PY'
import json, sys
source, pkg, before, changed, record = sys.argv[1:]
doc = {**json.load(open(source)), "package_dir": pkg, "sglang_before": before, "python_files_changed": int(changed)}
open(record, "w").write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
print(json.dumps({k: doc[k] for k in ("repo", "commit", "head", "package_dir", "python_files_changed")}))
PY
