"""A run on a twin (refengine/twin.py) records the twin's recipe beside its checkpoints' digests."""

import json

from ddbench.core.manifest import start_run
from ddbench.core.profile import load_profile
from ddbench.core.results import RunDir

TWIN = {"version": 1, "shape": "qwen3-8b", "numbers": {"hidden_size": 4096}, "seed": 3, "dtype": "bf16",
        "files": {"target/config.json": "aa", "drafter/config.json": "bb"},
        "pair": {"target": {"path": "/x/t", "files": {"model.safetensors": "cc"}},
                 "drafter": {"path": "/x/d", "files": {"model.safetensors": "dd"}}}}


def _checkpoint(d, weights=b"w"):
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(weights)
    return d


def _models(tmp_path, write_profile, target, drafter):
    profile = load_profile(write_profile(lambda d: d["models"].update(target=str(target), drafter=str(drafter))))
    return start_run(profile, "src.yaml", RunDir.create(profile.name, root=tmp_path / "runs"))["models"]


def test_a_twin_run_records_the_twin(tmp_path, write_profile):
    twin = tmp_path / "twins" / "qwen3-8b-s3"
    t, d = _checkpoint(twin / "target"), _checkpoint(twin / "drafter", b"d")
    (twin / "twin.json").write_text(json.dumps(TWIN))
    m = _models(tmp_path, write_profile, t, d)
    rec = m["twin"]
    assert (rec["shape"], rec["seed"], rec["dtype"], rec["roles"]) == ("qwen3-8b", 3, "bf16", ["target", "drafter"])
    assert rec["files"] == TWIN["files"] and rec["path"] == str(twin)
    assert rec["pair"] == {"target": {"model.safetensors": "cc"}, "drafter": {"model.safetensors": "dd"}}
    assert len(rec["twin_json_sha256"]) == 64
    assert m["target"]["sha256"] and m["drafter"]["sha256"]   # the checkpoints' own digests stay


def test_a_plain_pair_records_no_twin(tmp_path, write_profile):
    t, d = _checkpoint(tmp_path / "m" / "target"), _checkpoint(tmp_path / "m" / "drafter")
    (tmp_path / "m" / "twin.json").write_text("not json")   # unreadable: not a twin
    assert set(_models(tmp_path, write_profile, t, d)) == {"target", "drafter"}


def test_two_twins_are_recorded_apart(tmp_path, write_profile):
    a, b = tmp_path / "a", tmp_path / "b"
    t, d = _checkpoint(a / "target"), _checkpoint(b / "drafter")
    (a / "twin.json").write_text(json.dumps(TWIN))
    (b / "twin.json").write_text(json.dumps({**TWIN, "seed": 4}))
    recs = _models(tmp_path, write_profile, t, d)["twin"]
    assert [(r["seed"], r["roles"]) for r in recs] == [(3, ["target"]), (4, ["drafter"])]
