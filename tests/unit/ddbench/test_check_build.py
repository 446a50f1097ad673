"""reproduce's overlay check: run once the sweep is done, once per run, and never a reason to stop the analysis."""

import sys
from types import SimpleNamespace

from ddbench import reproduce
from ddbench.core.profile import load_profile
from ddbench.core.results import OVERLAY_CHECK


def calls(monkeypatch, rc=0) -> list:
    seen = []
    monkeypatch.setattr(reproduce.subprocess, "run",
                        lambda argv, **kw: seen.append(argv) or SimpleNamespace(returncode=rc))
    return seen


def test_the_build_is_checked_once_when_the_profile_asks(tmp_path, monkeypatch):
    run = SimpleNamespace(path=tmp_path)
    seen = calls(monkeypatch, rc=3)       # the build failed the check: the trust check says so, reproduce goes on
    reproduce.check_build(load_profile("gpu-sglang-checks"), run)
    assert seen == [[sys.executable, "-m", "ddbench.diagnostics", "overlay-check", str(tmp_path)]]
    (tmp_path / OVERLAY_CHECK).parent.mkdir(parents=True)
    (tmp_path / OVERLAY_CHECK).write_text("{}")     # a resumed run that holds its check: not again
    reproduce.check_build(load_profile("gpu-sglang-checks"), run)
    assert len(seen) == 1


def test_no_check_where_the_profile_does_not_ask(tmp_path, monkeypatch):
    seen = calls(monkeypatch)
    reproduce.check_build(load_profile("cpu-tiny"), SimpleNamespace(path=tmp_path))
    assert seen == []
