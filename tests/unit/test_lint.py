"""The tree passes `just lint`: ruff (pyproject.toml's rules) everywhere, and mypy on the typed ground and estimators
(pyproject.toml [tool.mypy]), so a change that breaks them fails the tests too."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_passes_on_the_whole_tree():
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert exe, "ruff is a dev dependency (pyproject.toml): ./setup installs it"
    proc = subprocess.run([exe, "check", ".", "--no-cache", "--output-format", "concise"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_passes_on_the_typed_packages():
    exe = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert exe, "mypy is a dev dependency (pyproject.toml): ./setup installs it"
    # its cache under the tmp dir, never in the checkout
    proc = subprocess.run([exe, "--cache-dir", "/dev/null"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
