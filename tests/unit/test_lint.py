"""The tree passes `just lint`'s ruff (pyproject.toml's rules), so a change that breaks them fails the tests too."""

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
