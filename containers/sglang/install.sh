#!/bin/sh
# SGLang+DDTree of the one pin on a GPU host without Docker: a CPython 3.12 venv with the pinned
# closure (every wheel by sha256), the DDTree source overlaid, and the image's smoke check run.
#   containers/sglang/install.sh VENV FORK_GIT [WHEELHOUSE]
# FORK_GIT: a clone of the fork holding the pin (git clone https://github.com/Rancy-Wang/sglang).
# WHEELHOUSE: a folder made by `python -m containers.wheelhouse --variant sglang` (offline);
# without it pip downloads the same wheels from PyPI, checked against the same hashes.
# PYTHON312 picks the interpreter (default python3.12). Run from the repository root.
set -eu
venv=${1:?usage: install.sh VENV FORK_GIT [WHEELHOUSE]}
fork=${2:?usage: install.sh VENV FORK_GIT [WHEELHOUSE]}
wheels=${3:-}
py=${PYTHON312:-python3.12}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
"$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' \
  || { echo "install: $py is not CPython 3.12 (SGLang 0.5.15 ships cp312 wheels only); set PYTHON312" >&2; exit 1; }
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
if [ -n "$wheels" ]; then
  cmp -s "$wheels/requirements.lock" "$here/requirements.lock" \
    || { echo "install: $wheels/requirements.lock is not containers/sglang/requirements.lock" >&2; exit 1; }
  set -- --no-index --find-links "$wheels"
else
  set --
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --require-hashes --no-deps "$@" \
  -r "$here/requirements.lock"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$repo"
python3 -m containers.sglang_source export "$fork" "$work/ddtree"
PYTHON="$venv/bin/python" sh "$here/overlay.sh" "$work/ddtree" "$venv/ddbench-sglang/overlay.json"
python3 -c 'import json; from containers.images import sglang_commands; print(json.dumps(sglang_commands()))' \
  > "$work/commands.json"
expect=$(python3 -c 'from containers.sglang_pin import pin; print(pin().expect)')
"$venv/bin/python" "$here/smoke.py" "$work/commands.json" "$venv/ddbench-sglang/smoke.json" \
  --need-sm "${NEED_SM:-90,100,120}" --expect "$expect"
echo "install: $venv serves SGLang+DDTree: $venv/bin/python -m sglang.launch_server ..."
