import sys
import types

import pytest

from ddbench.core.manifest import image_records
from ddbench.core.profile import load_profile

pytestmark = pytest.mark.unit


class FakeImage:
    id = "sha256:" + "a" * 64
    labels = {"ddbench.ddtree.commit": "c" * 40, "ddbench.smoke.ok": "true", "maintainer": "x",
              "org.opencontainers.image.revision": "r"}
    attrs = {"RepoDigests": ["ddbench/sglang@sha256:" + "b" * 64]}


def fake_docker(get):
    client = types.SimpleNamespace(images=types.SimpleNamespace(get=get))
    return types.SimpleNamespace(from_env=lambda: client)


def docker_profile(write_profile):
    edit = lambda d: (d["backend"].update(runtime="docker", image="ddbench/sglang:t", ddtree="fork"),  # noqa: E731
                      d.update(arms=d["arms"][:2]))
    return load_profile(write_profile(edit))


def test_a_docker_run_records_its_images_id_digests_and_ddbench_labels(write_profile, monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", fake_docker(lambda tag: FakeImage()))
    rec = image_records(docker_profile(write_profile))["ddbench/sglang:t"]
    assert rec["id"] == FakeImage.id and rec["repo_digests"] == FakeImage.attrs["RepoDigests"]
    assert rec["labels"] == {k: v for k, v in FakeImage.labels.items() if k != "maintainer"}


def test_an_image_the_daemon_cannot_give_is_recorded_as_an_error(write_profile, monkeypatch):
    def missing(tag):
        raise LookupError(f"no such image: {tag}")
    monkeypatch.setitem(sys.modules, "docker", fake_docker(missing))
    assert image_records(docker_profile(write_profile)) == {
        "ddbench/sglang:t": {"error": "LookupError: no such image: ddbench/sglang:t"}}


def test_a_local_run_has_no_image(write_profile):
    assert image_records(load_profile(write_profile())) == {}
