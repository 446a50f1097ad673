"""`ddbench bench`: arms from ids and URLs, the external profile it writes (which reproduce repeats), and clear
errors for what it cannot read."""

import pytest
import yaml

from ddbench import bench
from ddbench.core.profile import load_profile


def test_an_arms_kind_and_shape_come_from_its_id():
    assert bench.arm("ar=http://h:1", 16, None, None) == {"id": "ar", "url": "http://h:1", "kind": "ar"}
    assert bench.arm("linear-b8=http://h:2", 16, None, None)["block_size"] == 8
    assert bench.arm("chain-b15=http://h:3", 16, None, None)["block_size"] == 16
    assert bench.arm("tree-b31-k8=http://h:4", 16, "KEY", "m") == {
        "id": "tree-b31-k8", "url": "http://h:4", "kind": "tree", "block_size": 16, "budget": 31, "topk": 8,
        "api_key_env": "KEY", "model": "m"}
    assert bench.arm("ar-vllm=https://h", 16, None, None)["kind"] == "ar"


@pytest.mark.parametrize("spec", ["ar", "ar=h:1", "medusa=http://h:1", "tree-b15=http://h:1"])
def test_an_arm_it_cannot_read_is_named(spec):
    with pytest.raises(bench.BenchError, match=f"--arm {spec}: give ID=URL"):
        bench.arm(spec, 16, None, None)


def test_it_writes_the_profile_it_would_run(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(bench.reproduce, "main", lambda argv: ran.append(argv) or 0)
    out = tmp_path / "mine.yaml"
    rc = bench.main(["--arm", "ar=http://h:1", "--arm", "linear-b16=http://h:2", "--concurrency", "1,8,32",
                     "--slo", "ttft_ms=200,tpot_ms=30", "-o", str(out)])
    assert rc == 0 and ran == [[str(out)]]
    p = load_profile(str(out))
    assert p.name == "mine" and p.backend.kind == "external" and [a.id for a in p.arms] == ["ar", "linear-b16"]
    assert p.load.concurrency == [1, 8, 32] and p.slo.text == "TTFT <= 200 ms, TPOT <= 30 ms"
    assert p.workload.api == "chat"
    assert yaml.safe_load(out.read_text())["arms"][1]["url"] == "http://h:2"
    # an existing profile is kept; --slo that is not key=value is refused before anything runs
    assert bench.main(["--arm", "ar=http://h:1", "-o", str(out)]) == 1
    assert "exists already" in capsys.readouterr().err
    assert bench.main(["--arm", "ar=http://h:1", "-o", str(tmp_path / "b.yaml"), "--slo", "fast"]) == 1
    assert "--slo fast: give key=value pairs" in capsys.readouterr().err and len(ran) == 1


def test_rates_make_an_open_loop_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench.reproduce, "main", lambda argv: 0)
    out = tmp_path / "rates.yaml"
    assert bench.main(["--arm", "ar=http://h:1", "--arm", "tree-b15-k8=http://h:2", "--rate", "2,4.5,8",
                       "--duration", "20", "-o", str(out)]) == 0
    p = load_profile(str(out))
    assert (p.load.mode, p.load.rates(), p.load.concurrency, p.load.duration_s) == ("open", [2, 4.5, 8], [64], 20)
    assert [a.id for a in p.measured_arms()][:2] == ["ar@q2", "tree-b15-k8@q2"]
    assert bench.main(["--arm", "ar=http://h:1", "--rate", "fast", "-o", str(tmp_path / "x.yaml")]) == 1
    assert "--rate fast: give requests/s" in capsys.readouterr().err


def test_api_completions_measures_the_completions_endpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.reproduce, "main", lambda argv: 0)
    out = tmp_path / "plain.yaml"
    assert bench.main(["--arm", "ar=http://h:1", "--api", "completions", "-o", str(out)]) == 0
    assert load_profile(str(out)).workload.api == "completions"
