"""`ddbench check` asks reproduce's preflight: an unset api_key_env variable or a server that does not answer at
an arm's url (unless --no-probe) fails the check; what the host lacks is listed without failing it."""

import yaml

from ddbench import cli, preflight
from ddbench.core.profile import load_profile


def external(tmp_path, **arm):
    data = {"name": "mine", "backend": {"kind": "external"},
            "arms": [{"id": "ar", "kind": "ar", "url": "http://127.0.0.1:9", **arm}],
            "workload": {"prompt_set": "loadtests/prompts/chat.jsonl", "max_tokens": 8},
            "load": {"concurrency": [1], "requests_per_user": 2}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_unset_key_variable_fails_check_as_it_stops_reproduce(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MINE_KEY", raising=False)
    path = external(tmp_path, api_key_env="MINE_KEY")
    assert cli.check([str(path)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "arms[0].api_key_env (arm 'ar'): environment variable MINE_KEY is not set" in err
    assert preflight.problems(load_profile(str(path)), report=False) == [
        "arms[0].api_key_env (arm 'ar'): environment variable MINE_KEY is not set"]
    monkeypatch.setenv("MINE_KEY", "k")
    assert cli.check([str(path), "--no-probe"]) == 0


def test_check_asks_each_url_unless_told_not_to(tmp_path, capsys):
    path = external(tmp_path)
    assert cli.check([str(path)]) == cli.EXIT_ERROR
    assert "arms[0].url (arm 'ar'): no server answers at http://127.0.0.1:9" in capsys.readouterr().err
    assert cli.check([str(path), "--no-probe"]) == 0          # a profile for servers on another host


def test_what_the_host_lacks_is_listed_and_check_passes(monkeypatch, capsys):
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    assert cli.check(["cpu-tiny"]) == 0
    out = capsys.readouterr().out
    assert "not ready on this host" in out and "latexmk is not installed" in out
