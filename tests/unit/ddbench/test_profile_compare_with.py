"""The optional compare_with field: loaded as written, checked where it is wrong, and absent from the
dump (so from the digest and the manifest) when unset, which keeps committed runs' digests valid."""

import json
from pathlib import Path

import pytest

from ddbench.core.profile import REPO_ROOT, Profile, ProfileError, load_profile


def test_compare_with_loads_as_written(write_profile):
    p = load_profile(write_profile(lambda d: d.update(compare_with="results/h200-tiny")))
    assert p.compare_with == "results/h200-tiny"
    assert p.model_dump(mode="json")["compare_with"] == "results/h200-tiny"


@pytest.mark.parametrize("value, msg", [("", "compare_with: String should have at least 1 character"),
                                        (["a"], "compare_with: Input should be a valid string")])
def test_bad_compare_with_names_file_and_field(write_profile, value, msg):
    path = write_profile(lambda d: d.update(compare_with=value))
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert str(path) in str(e.value) and msg in str(e.value)


def test_unset_compare_with_leaves_dump_and_digest_alone(write_profile):
    p = load_profile(write_profile())
    assert p.compare_with is None and "compare_with" not in p.model_dump(mode="json")
    q = load_profile(write_profile(lambda d: d.update(compare_with="results/x"), name="q.yaml"))
    assert q.digest() != p.digest()


def test_committed_runs_keep_their_digest():
    manifests = sorted((REPO_ROOT / "results").glob("*/*/manifest.json"))
    if not manifests:
        pytest.skip("no committed run")
    for m in manifests:
        data = json.loads(Path(m).read_text())
        assert Profile.model_validate(data["profile"]).digest() == data["profile_digest"], m
