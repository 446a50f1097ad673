"""A cell's prefix-cache flush: asked where the profile allows it, SGLang's route first and vLLM's where that one
is missing, and recorded as answered; the cache check of an external server reads that record."""

import json
from types import SimpleNamespace

import httpx
import pytest

from analysis.trust import checks
from ddbench import reproduce
from ddbench.core.results import FLUSH


def answering(monkeypatch, codes: dict[str, int]):
    asked = []

    def post(url, timeout=None, headers=None):
        path = url.removeprefix("http://h:1")
        asked.append(path)
        return httpx.Response(codes.get(path, 404), text="ok" if codes.get(path) == 200 else "no",
                              request=httpx.Request("POST", url))

    monkeypatch.setattr(reproduce.httpx, "post", post)
    return asked


def test_sglang_flushes_at_its_own_route(monkeypatch):
    asked = answering(monkeypatch, {"/flush_cache": 200})
    rec = reproduce.flush("http://h:1", True)
    assert rec["flushed"] and rec["path"] == "/flush_cache" and asked == ["/flush_cache"]


def test_vllm_is_asked_at_its_route_where_sglangs_is_missing(monkeypatch):
    asked = answering(monkeypatch, {"/reset_prefix_cache": 200})
    rec = reproduce.flush("http://h:1", True)
    assert rec["flushed"] and rec["path"] == "/reset_prefix_cache"
    assert asked == ["/flush_cache", "/reset_prefix_cache"] and rec["tried"] == [{"path": "/flush_cache",
                                                                                   "status": 404}]


def test_a_refusal_is_recorded_and_no_other_route_is_tried(monkeypatch):
    asked = answering(monkeypatch, {"/flush_cache": 401})
    rec = reproduce.flush("http://h:1", True)
    assert not rec["flushed"] and asked == ["/flush_cache"] and rec["tried"][0]["status"] == 401


def test_switched_off_nothing_is_asked(monkeypatch):
    asked = answering(monkeypatch, {"/flush_cache": 200})
    assert reproduce.flush("http://h:1", False) == {"flushed": False, "why": "load.flush_cache is off"}
    assert asked == []


@pytest.mark.parametrize("record, status, words", [
    ({"flushed": True, "path": "/flush_cache", "status": 200}, "pass", "POST /flush_cache answered 200"),
    ({"flushed": False, "why": "load.flush_cache is off"}, "fail", "load.flush_cache is off"),
    ({"flushed": False, "why": "no flush route answered 200",
      "tried": [{"path": "/flush_cache", "status": 404}, {"path": "/reset_prefix_cache", "status": 404}]}, "fail",
     "/reset_prefix_cache HTTP 404"),
    (None, "n/a", "recorded no flush.json"),
])
def test_the_cache_check_of_an_external_server_reads_the_cells_record(tmp_path, record, status, words):
    cell = {"arm": "ar", "concurrency": 1, "repetition": 2}
    (tmp_path / "ar" / "c1-r2").mkdir(parents=True)
    if record is not None:
        (tmp_path / "ar" / "c1-r2" / FLUSH).write_text(json.dumps(record))
    got = checks._flush_answer(SimpleNamespace(path=tmp_path), cell, "ar C=1 r2", "cache flushed or server restarted")
    assert got.status == status and words in got.evidence
