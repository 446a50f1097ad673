import copy
import json

import pytest
import yaml

BASE = {
    "name": "t",
    "backend": {"kind": "sglang", "runtime": "local"},
    "models": {"target": "/m/target", "drafter": "/m/drafter"},
    "placement": {"device": "cuda", "gpus": [0], "tp_size": 1},
    "runtime": {"overlap_scheduler": False},
    "arms": [
        {"id": "ar", "kind": "ar"},
        {"id": "linear-b16", "kind": "linear", "block_size": 16},
        {"id": "chain-b15", "kind": "chain", "block_size": 16},
        {"id": "tree-b15-k8", "kind": "tree", "block_size": 16, "budget": 15, "topk": 8},
    ],
    "workload": {"prompt_set": "PROMPTS", "max_tokens": 32},
    "load": {"concurrency": [1, 64], "requests_per_user": 2},
}


@pytest.fixture
def prompt_file(tmp_path):
    p = tmp_path / "prompts.jsonl"
    p.write_text(json.dumps({"id": "a", "category": "code",
                             "messages": [{"role": "user", "content": "Write quicksort."}]}) + "\n")
    return p


@pytest.fixture
def write_profile(tmp_path, prompt_file):
    """Write BASE, changed by `edit(dict)`, to a YAML file; returns its path."""

    def write(edit=None, name="profile.yaml"):
        data = copy.deepcopy(BASE)
        data["workload"]["prompt_set"] = str(prompt_file)
        if edit:
            edit(data)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
