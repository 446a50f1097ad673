"""The overlay check end to end through the project's bring-up, with the stand-in server on both sides
(the real check runs SGLang on the H200): two servers up and down, prompts sent, JSON written."""

import json

import pytest

from containers.offline import device
from ddbench.core.profile import load_profile
from ddbench.diagnostics.overlay_check import overlay_check

pytestmark = pytest.mark.integration

STAND_IN = ["python3", "-m", "loadtests.nullserver", "--host", "127.0.0.1", "--port", "{port}",
            "--ttft-ms", "5", "--itl-ms", "1", "--tokens", "8"]


def test_overlay_check_with_a_stand_in(tmp_path, monkeypatch):
    stock, shadow = tmp_path / "site-sglang", tmp_path / "site-sglang-ddtree"
    for site, layer in ((stock, "sglang"), (shadow, "sglang-ddtree")):
        site.mkdir()
        (site / device.MARKER).write_text(json.dumps({"layer": layer, "source": {"commit": "c" * 40}}))
    monkeypatch.setenv("PYTHONPATH", f"{shadow}:{stock}")
    run = tmp_path / "run"
    doc = overlay_check(run, load_profile("h200-sglang-ddtree"), "t", None, 2, timeout_s=60,
                                    command=STAND_IN)
    assert doc["passed"] and doc["same_outputs"] and doc["steps_from"] == "spec_verify_ct"  # no /metrics counter
    for side in ("stock", "fork"):
        s = doc["sides"][side]
        assert s["status"] == "ok" and s["completion_tokens"] == 16 and len(s["requests"]) == 2
        assert (run / s["server_log"]).is_file()
        assert json.loads((run / "diagnostics" / "overlay-check" / side / "linear-b16" / "status.json").read_text())[
            "status"] == "up"
    assert json.loads((run / "diagnostics" / "overlay-check.json").read_text())["passed"] is True
