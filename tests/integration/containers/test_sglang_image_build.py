"""The whole no-registry SGLang+DDTree image, built for real and inspected (about 7 min here, and about 30 GB of
free disk at the peak: the wheelhouse in the context, the install stage, the image).

Skipped unless DDBENCH_SGLANG_IMAGE_TEST=1, DDTREE_FORK_GIT names a clone of the pin's fork and
`just wheelhouse sglang` has run: CI skips it. Run it with
    DDBENCH_SGLANG_IMAGE_TEST=1 DDTREE_FORK_GIT=DIR .venv/bin/pytest \
        tests/integration/containers/test_sglang_image_build.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from containers import images
from containers.sglang_pin import pin
from ddbench.core.profile import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]
FORK = os.environ.get("DDTREE_FORK_GIT")
WHEELS = REPO_ROOT / "wheelhouse" / "sglang" / "requirements.lock"


@pytest.mark.skipif(os.environ.get("DDBENCH_SGLANG_IMAGE_TEST") != "1" or not FORK or not WHEELS.is_file(),
                    reason="the full image build: DDBENCH_SGLANG_IMAGE_TEST=1, DDTREE_FORK_GIT and the wheelhouse")
def test_the_no_registry_image_builds_and_its_smoke_check_passes(tmp_path):
    images.build_base(images.BASE_PY312_TAG, cpython=images.cpython312())
    built = images.build_sglang("local", Path(FORK), evidence=tmp_path)
    labels = images.client().images.get(built.tag).labels
    p = pin()
    assert labels["ddbench.ddtree.commit"] == p.commit and labels["ddbench.sglang.version"] == p.sglang
    assert labels["ddbench.smoke.ok"] == "true" and labels["ddbench.sm"] == "90,100,120"
    [evidence] = tmp_path.glob("sglang-local/*/build.json")
    doc = json.loads(evidence.read_text())
    assert doc["smoke"]["ok"] and doc["smoke"]["failures"] == []
    assert len(doc["smoke"]["commands"]) == len(images.sglang_commands())
    assert doc["overlay"]["head"] == doc["source"]["head"]
    # the image's sglang is the fork's: its DDTree worker is there, and the stock package's version stays
    out = images.client().containers.run(built.tag, ["python3", "-c", (
        "import importlib.util as u, importlib.metadata as m; "
        "print(m.version('sglang'), bool(u.find_spec('sglang.srt.speculative.ddtree_worker')))")],
        remove=True, network_disabled=True)
    assert out.decode().split() == [p.sglang, "True"]
