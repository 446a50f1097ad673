"""A resumed run may grow by repetitions, and by nothing else."""

import pytest

from ddbench.core.manifest import start_run
from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.results import RunDir
from ddbench.reproduce import extension, open_resumed, pending_cells


def reps(n):
    return lambda d: d["load"].update(repetitions=n)


def test_extension_only_for_more_repetitions(write_profile):
    made = load_profile(write_profile(reps(4))).model_dump(mode="json")
    assert extension(made, load_profile(write_profile(reps(6)))) == 4
    assert extension(made, load_profile(write_profile(reps(4)))) is None
    assert extension(made, load_profile(write_profile(reps(3)))) is None
    other = load_profile(write_profile(lambda d: (d["load"].update(repetitions=6),
                                                  d["workload"].update(max_tokens=64))))
    assert extension(made, other) is None


def test_resume_grows_the_manifest(write_profile, tmp_path):
    small = load_profile(write_profile(reps(2)))
    run = RunDir.create("t", root=tmp_path / "results")
    start_run(small, "profile.yaml", run)
    big = load_profile(write_profile(reps(3)))
    grown = open_resumed(str(run.path), big)
    m = grown.manifest()
    assert m["profile_digest"] == big.digest() and m["profile"]["load"]["repetitions"] == 3
    assert m["extended"] == [{"repetitions": [2, 3], "profile_digest_before": small.digest()}]
    assert len(m["schedule"]["planned"]) == len(big.cells())
    assert {r for _, _, r in pending_cells(big, grown)} == {1, 2, 3}


def test_resume_refuses_other_changes(write_profile, tmp_path):
    run = RunDir.create("t", root=tmp_path / "results")
    start_run(load_profile(write_profile(reps(2))), "profile.yaml", run)
    changed = load_profile(write_profile(lambda d: (d["load"].update(repetitions=3), d["load"].update(seed=7))))
    with pytest.raises(ProfileError, match="different profile"):
        open_resumed(str(run.path), changed)
