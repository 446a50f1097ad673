"""backend 'external': each arm names its server's url (refused for backends ddbench starts), the models are
informational, and every error names the field and the arm at fault."""

import pytest

from containers.launch import server_command
from ddbench.core.profile import ProfileError, load_profile
from ddbench.core.results import declare_secret_env, redact, redact_env


def external(d, drop_models=True):
    d["backend"] = {"kind": "external"}
    d["placement"] = {"device": "cpu"}
    d["runtime"] = {}
    d["arms"] = [{"id": "ar", "kind": "ar", "url": "http://127.0.0.1:30000"},
                 {"id": "linear-b16", "kind": "linear", "block_size": 16, "url": "http://127.0.0.1:30001/",
                  "model": "Qwen/Qwen3-8B", "api_key_env": "MY_SERVER_AUTH"}]
    if drop_models:
        del d["models"]


def error_of(path) -> str:
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    return str(e.value)


def test_an_external_profile_loads_without_models(write_profile):
    p = load_profile(write_profile(external))
    assert p.backend.kind == "external" and p.models.target is None
    assert [a.url for a in p.arms] == ["http://127.0.0.1:30000", "http://127.0.0.1:30001/"]
    assert p.arm("linear-b16").api_key_env == "MY_SERVER_AUTH"
    assert "external server at http://127.0.0.1:30000" in server_command(p, p.arm("ar")).notes[0]


def test_url_is_required_for_external_and_named(write_profile):
    msg = error_of(write_profile(lambda d: (external(d), d["arms"][1].pop("url"))))
    assert "arms[1].url (arm 'linear-b16')" in msg and "needs each arm's server URL" in msg


@pytest.mark.parametrize("field, value", [("url", "http://127.0.0.1:30000"), ("model", "m"),
                                          ("api_key_env", "KEY")])
def test_external_fields_are_refused_for_started_backends(write_profile, field, value):
    msg = error_of(write_profile(lambda d: d["arms"][2].update({field: value})))
    assert f"arms[2].{field} (arm 'chain-b15')" in msg and "only backend 'external'" in msg


def test_a_started_backend_still_needs_the_target(write_profile):
    assert "models.target" in error_of(write_profile(lambda d: d["models"].pop("target")))


@pytest.mark.parametrize("edit, words", [
    (lambda a: a.update(url="127.0.0.1:30000"), "arms[0].url"),                  # no scheme
    (lambda a: a.update(api_key_env="not a name"), "arms[0].api_key_env"),
    (lambda a: a.update(extra_args=["--x"]), "arms[0].extra_args (arm 'ar')"),   # nothing is launched
    (lambda a: a.update(url="http://127.0.0.1:30001"), "share a server URL"),
])
def test_bad_external_arms_are_named(write_profile, edit, words):
    msg = error_of(write_profile(lambda d: (external(d), edit(d["arms"][0]))))
    assert words in msg


def test_external_takes_no_image(write_profile):
    msg = error_of(write_profile(lambda d: (external(d), d["backend"].update(runtime="docker", image="x:1"))))
    assert "backend" in msg and "no image" in msg


def test_the_digest_of_a_started_profile_is_unchanged_by_the_new_fields(write_profile):
    dumped = load_profile(write_profile()).model_dump(mode="json")
    assert all(k not in arm for arm in dumped["arms"] for k in ("url", "model", "api_key_env"))


def test_a_declared_key_variable_is_redacted_whatever_its_name(monkeypatch):
    monkeypatch.setenv("MY_SERVER_AUTH", "sk-live-0123456789")
    assert redact("key sk-live-0123456789") == "key sk-live-0123456789"   # the name does not look secret
    declare_secret_env(["MY_SERVER_AUTH"])
    assert "sk-live" not in redact("key sk-live-0123456789")
    assert redact_env({"MY_SERVER_AUTH": "sk-live-0123456789"}) == {"MY_SERVER_AUTH": "<redacted>"}
