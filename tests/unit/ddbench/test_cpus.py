import os
import subprocess
import sys

import pytest

from containers.docker_runtime import run_kwargs
from containers.spec import build_spec
from ddbench.core.cpus import parse, pinner, usable
from ddbench.core.profile import ProfileError, load_profile

pytestmark = pytest.mark.unit


def test_parse_reads_lists_and_ranges():
    assert parse("1") == {1} and parse("0,2-4") == {0, 2, 3, 4}
    for bad in ("", "a", "1-", "3-1", "1,,2"):
        with pytest.raises(ValueError):
            parse(bad)


def test_usable_names_the_field_and_the_missing_cpu():
    top = max(os.sched_getaffinity(0))
    assert usable(str(top), "load.cpus") == {top}
    with pytest.raises(ValueError, match=rf"placement.cpus '{top + 1}' names CPU\(s\) \[{top + 1}\]"):
        usable(str(top + 1), "placement.cpus")


def test_a_pinned_child_runs_only_on_its_cpus():
    cpu = min(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, preexec_fn=pinner(frozenset({cpu})), check=True)
    assert out.stdout.strip() == f"[{cpu}]"
    assert pinner(None) is None


def test_profile_cpus_are_checked_and_kept_apart(write_profile):
    p = load_profile(write_profile(lambda d: (d["placement"].update(cpus="1"), d["load"].update(cpus="0"))))
    assert p.placement.cpus == "1" and p.load.cpus == "0"
    with pytest.raises(ProfileError, match="share CPU"):
        load_profile(write_profile(lambda d: (d["placement"].update(cpus="0-1"), d["load"].update(cpus="1"))))
    with pytest.raises(ProfileError, match="placement.cpus"):
        load_profile(write_profile(lambda d: d["placement"].update(cpus="one")))


def test_unpinned_profiles_keep_their_digest(write_profile):
    # runs recorded before the fields existed must still match their profiles
    plain = load_profile(write_profile())
    assert "cpus" not in plain.model_dump()["placement"] and "cpus" not in plain.model_dump()["load"]


def test_a_container_gets_the_servers_cpus(write_profile, monkeypatch):
    edit = lambda d: (d["backend"].update(runtime="docker", image="img", ddtree="fork"),  # noqa: E731
                      d["placement"].update(cpus="2-3"), d.update(arms=d["arms"][:2]))
    p = load_profile(write_profile(edit))
    spec = build_spec(p, p.arm("ar"), run_id="r1", host_port=31000)
    assert spec.cpuset == "2-3" and run_kwargs(spec)["cpuset_cpus"] == "2-3"
