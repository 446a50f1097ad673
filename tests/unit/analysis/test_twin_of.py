"""A twin run and a run of the pair it was built from cross-check (analysis.trust.crosscheck.twin_of): by every
file digest the pair run recorded, never by path; any other pair of model sets is refused as before."""

from types import SimpleNamespace

from analysis.trust.crosscheck import MODEL_KEYS, VARY, twin_of

PAIR = {"target": {"config.json": "a1", "model.safetensors": "a2"},
        "drafter": {"config.json": "b1", "model.safetensors": "b2"}}


def run(models):
    return SimpleNamespace(manifest=SimpleNamespace(models=models))


def pair_run(target=PAIR["target"], drafter=PAIR["drafter"]):
    return run({"target": {"path": "models/t", "files": dict(target)}, "drafter": {"path": "models/d",
                                                                                  "files": dict(drafter)}})


def twin_run(pair=PAIR):
    twin = {"shape": "qwen3-8b", "pair": {r: {**f, "README.md": "r"} for r, f in pair.items()}}
    return run({"target": {"path": ".twins/t", "files": {"x": "1"}}, "drafter": {"path": ".twins/d"}, "twin": twin})


def test_a_twin_is_paired_with_the_run_of_its_own_pair_only():
    assert twin_of(twin_run(), pair_run())
    assert not twin_of(pair_run(), twin_run())          # the other way round is asked separately
    assert not twin_of(twin_run(), pair_run(target={"config.json": "a1", "model.safetensors": "other"}))
    assert not twin_of(twin_run(), run({"target": {"path": "hub/id"}, "drafter": {"path": "hub/d"}}))
    assert not twin_of(pair_run(), pair_run())
    assert set(MODEL_KEYS).isdisjoint(VARY)   # only a twin and its pair let the models differ
