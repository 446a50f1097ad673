"""Fixtures: a hand-computed run, and a synthetic run shared by the session."""

import pytest
from handrun import write_hand_run


@pytest.fixture
def hand_run(tmp_path):
    return write_hand_run(tmp_path)


@pytest.fixture(scope="session")
def synth_run(tmp_path_factory):
    from analysis.synth import Plan, write_run
    return write_run(tmp_path_factory.mktemp("synth"), Plan(requests_per_user=20, repetitions=3))


@pytest.fixture(scope="session")
def synth_analysis(synth_run):
    from analysis.analyze import analyze
    return analyze(synth_run, bootstrap=300)


