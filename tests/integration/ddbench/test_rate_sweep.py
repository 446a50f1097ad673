"""An open-loop rate sweep against a reference-engine server: one arm at three offered rates, each its own measured
arm (ar@q<rate>); the tables carry the offered and achieved rates, and the top rate, far past what two cores
serve, is where the arm saturates (achieved below 95% of offered) while the lowest is served in full."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[3]
RATES = [2, 5, 200]


def test_a_rate_sweep_finds_where_the_arm_saturates(refengine_servers, tmp_path):
    url = refengine_servers.start(tmp_path / "ar.log", "--max-running-requests", "8")
    profile = {"name": "rates", "backend": {"kind": "external"},
               "models": {"target": "models/qwen3-stdlib-13m"},
               "arms": [{"id": "ar", "kind": "ar", "url": url}],
               "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 32, "temperature": 0,
                            "ignore_eos": True},
               "load": {"mode": "open", "rate": RATES[0], "arrival": "constant", "concurrency": [8],
                        "warmup_requests": 0, "duration_s": 8, "repetitions": 1}}
    path = tmp_path / "rates.yaml"
    path.write_text(yaml.safe_dump(profile))
    p = subprocess.run([sys.executable, "-m", "ddbench", "reproduce", str(path), "--no-report", "--results-root",
                        str(tmp_path / "results"), "--set", f"load.rate={RATES}"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode in (0, 3), p.stdout + p.stderr
    run = next((tmp_path / "results" / "rates").iterdir())
    assert sorted(d.name for d in run.iterdir() if d.name.startswith("ar@")) == ["ar@q2", "ar@q200", "ar@q5"]
    s = pd.read_csv(run / "tables" / "summary.csv").set_index("arm")
    assert s.loc[["ar@q2", "ar@q5", "ar@q200"], "offered_rate"].tolist() == RATES
    served = s["achieved_rate"] / s["offered_rate"]
    assert served["ar@q2"] > 0.85 and served["ar@q5"] > 0.85, s[["offered_rate", "achieved_rate"]]
    assert served["ar@q200"] < 0.95 * 0.5, s[["offered_rate", "achieved_rate"]]   # saturated, by far
    cells = pd.read_csv(run / "tables" / "cells.csv")
    assert set(cells["offered_rate"]) == set(RATES)
