"""`--set PATH=VALUE` on `check` and `reproduce`: validated as the file is, recorded, and part of the digest."""

import pytest

from ddbench import cli, reproduce
from ddbench.core.manifest import start_run
from ddbench.core.overrides import OverrideError, parse
from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.results import RunDir


def test_values_are_yaml_and_paths_dotted():
    assert parse("load.concurrency=[1,8,32]").value == [1, 8, 32]
    assert parse("workload.max_tokens=256").value == 256
    assert parse("runtime.cuda_graphs=false").value is False
    assert parse("backend.ddtree=").value is None
    assert parse("arms[tree-b1.5].topk=8").path == ("arms", "tree-b1.5", "topk")
    assert parse("runtime.env.X=a=b").value == "a=b"   # the first '=' splits
    for bad in ("load.concurrency", "=3", "a..b=1", "load.concurrency=[1,"):
        with pytest.raises(OverrideError, match="--set"):
            parse(bad)


def test_valid_overrides_apply(write_profile):
    path = write_profile()
    p = load_profile(path, ["load.concurrency=[1,8,32]", "workload.max_tokens=256",
                            "arms.tree-b15-k8.topk=4", "arms.1.block_size=8", "runtime.env.FOO=bar",
                            "load.requests_per_user=3"])
    assert p.load.concurrency == [1, 8, 32] and p.workload.max_tokens == 256
    assert p.arm("tree-b15-k8").topk == 4 and p.arm("linear-b16").block_size == 8
    assert p.runtime.env == {"FOO": "bar"} and p.load.requests_per_user == 3
    assert load_profile(path).load.concurrency == [1, 64]   # the file is untouched
    # a section the file leaves out is made; later overrides win
    assert load_profile(path, ["load.seed=1", "load.seed=2"]).load.seed == 2
    assert load_profile(path, ["placement.cpus='1'"]).placement.cpus == "1"   # YAML: quote a string of digits
    no_runtime = write_profile(lambda d: d.pop("runtime"), name="bare.yaml")
    assert load_profile(no_runtime).runtime.overlap_scheduler is True
    assert load_profile(no_runtime, ["runtime.overlap_scheduler=false"]).runtime.overlap_scheduler is False


def test_invalid_value_names_the_set_and_the_field(write_profile):
    with pytest.raises(ProfileError) as e:
        load_profile(write_profile(), ["workload.max_tokens=256", "load.concurrency=[0,8]"])
    assert "load.concurrency[0]" in str(e.value) and "--set load.concurrency=[0,8]" in str(e.value)
    assert "max_tokens=256" not in str(e.value)
    with pytest.raises(ProfileError, match=r"arms\[3\] \(arm 'tree-b15-k8'\): .*topk.*--set arms.tree-b15-k8.topk=99"):
        load_profile(write_profile(), ["arms.tree-b15-k8.topk=99"])
    with pytest.raises(ProfileError, match=r"workload.max_tokens: .*integer.*--set workload.max_tokens=lots"):
        load_profile(write_profile(), ["workload.max_tokens=lots"])


def test_unknown_path_is_an_error_not_added(write_profile):
    for bad, said in [("load.concurency=[1]", "load has no field 'concurency'"),
                      ("nope=1", "the profile has no field 'nope'"),
                      ("arms.tree-b99.topk=2", "arms has no item with id 'tree-b99'"),
                      ("arms.7.topk=2", "there is no \\[7\\]"),
                      ("workload.max_tokens.x=1", "workload.max_tokens is 32, not a mapping"),
                      ("arms.ar.speed=1", "arms\\[0\\] has no field 'speed'")]:
        with pytest.raises(ProfileError, match=f"--set {bad.split('=')[0]}.*{said}"):
            load_profile(write_profile(), [bad])


def test_digest_is_of_the_resolved_profile(write_profile):
    path = write_profile()
    plain = load_profile(path)
    changed = load_profile(path, ["load.concurrency=[1,8,32]"])
    assert changed.digest() != plain.digest()
    assert load_profile(path, ["load.concurrency=[1, 64]"]).digest() == plain.digest()   # the same profile
    written = load_profile(write_profile(lambda d: d["load"].update(concurrency=[1, 8, 32]), name="b.yaml"))
    assert written.digest() == changed.digest()


def fork(d):   # BASE has a chain arm: only the fork's build serves it, and check says so otherwise
    d["backend"]["ddtree"] = "fork"


def test_check_takes_set(write_profile, capsys):
    path = str(write_profile(fork))
    assert cli.main(["check", path, "--set", "load.concurrency=[1,8]", "--set", "workload.max_tokens=256"]) == 0
    out = capsys.readouterr().out
    assert "concurrency [1, 8]" in out and "max_tokens 256" in out and "--set 'load.concurrency=[1,8]'" in out
    assert cli.main(["check", path, "--set", "load.concurrency=[0]"]) == 1
    assert "--set load.concurrency=[0]" in capsys.readouterr().err


def _quiet_run(monkeypatch):
    """reproduce.main without servers, TeX or later stages."""
    monkeypatch.setattr(reproduce, "problems", lambda *a, **k: [])
    monkeypatch.setattr(reproduce, "sweep", lambda *a, **k: None)
    monkeypatch.setattr(reproduce, "stage", lambda *a, **k: 0)
    monkeypatch.setattr(reproduce, "outcome", lambda *a, **k: (0, None))


def test_reproduce_records_overrides(write_profile, tmp_path, monkeypatch):
    _quiet_run(monkeypatch)
    root = tmp_path / "results"
    sets = ["load.concurrency=[1,8,32]", "workload.max_tokens=256"]
    args = [str(write_profile()), "--no-report", "--results-root", str(root)]
    assert reproduce.main([*args, *[x for s in sets for x in ("--set", s)]]) == 0
    run = RunDir.open(str(next(root.glob("t/*"))))
    m = run.manifest()
    assert m["overrides"] == sets
    assert m["profile"]["load"]["concurrency"] == [1, 8, 32] and m["profile"]["workload"]["max_tokens"] == 256
    assert m["profile_digest"] == load_profile(args[0], sets).digest() != load_profile(args[0]).digest()


def test_manifest_without_overrides_records_none(write_profile, tmp_path):
    run = RunDir.create("t", root=tmp_path / "results")
    assert start_run(load_profile(write_profile()), "profile.yaml", run)["overrides"] == []


def test_resume_refuses_other_overrides(write_profile, tmp_path, monkeypatch, capsys):
    _quiet_run(monkeypatch)
    path = str(write_profile())
    sets = ["load.concurrency=[1,8]"]
    run = RunDir.create("t", root=tmp_path / "results")
    start_run(load_profile(path, sets), path, run, overrides=sets)
    before = run.manifest()
    base = [path, "--no-report", "--resume", str(run.path)]
    for other in ([], ["--set", "load.concurrency=[1,16]"],
                  ["--set", "load.concurrency=[1,8]", "--set", "load.seed=3"]):
        assert reproduce.main([*base, *other]) == 1
        assert "different profile" in capsys.readouterr().err
        assert run.manifest() == before
    # the same overrides resume; more repetitions (by --set too) grow the run, and the manifest says so
    assert reproduce.main([*base, "--set", "load.concurrency=[1,8]"]) == 0
    assert reproduce.main([*base, "--set", "load.concurrency=[1,8]", "--set", "load.repetitions=2"]) == 0
    m = run.manifest()
    assert m["overrides"] == ["load.concurrency=[1,8]", "load.repetitions=2"]
    assert m["overrides_before"] == [sets] and m["profile"]["load"]["repetitions"] == 2


def test_just_check_passes_set_through(write_profile):
    """The `check` recipe takes ARGS after PROFILE, so `just check P --set ...` reaches `ddbench check`."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    just = shutil.which("just", path=str(Path(sys.executable).parent)) or shutil.which("just")
    if just is None:
        pytest.skip("just is not installed (./setup installs it)")
    repo = Path(__file__).resolve().parents[3]
    out = subprocess.run([just, "check", str(write_profile(fork)), "--set", "load.concurrency=[1,8]"], cwd=repo,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "concurrency [1, 8]" in out.stdout
