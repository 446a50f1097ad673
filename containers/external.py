"""Servers the user already runs (backend 'external'): ddbench checks each answers, records what it says of
itself, and starts and stops nothing.

    servers, down = check_all(profile, arms, run_dir)

An arm whose server answers /v1/models gets a handle (.url, .exited(), .stop(), as a started server's); one
that does not is in `down` with a reason naming the arm and the URL, and the sweep fails only its cells.
Each arm's <arm>/status.json says which, and <arm>/server_info.json holds what the server reported: SGLang's
/get_server_info (or /server_info, older SGLang and the reference engine), vLLM's /version, /v1/models, and
the metric family names /metrics exposes, with a summary (model, version, speculative algorithm) the report
prints. The API key is read from the variable the arm names, sent, and kept out of every file.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from containers.ready import BringUpError
from ddbench.core.answers import refused
from ddbench.core.profile import Profile
from ddbench.core.results import SERVER_INFO, STATUS, declare_secret_env, write_json_atomic

PROBE_TIMEOUT_S = 10.0
INFO_PATHS = ("/get_server_info", "/server_info")   # SGLang now, SGLang before 0.4 and the reference engine
NOT_STARTED = "external server: ddbench did not start it"
# fields of a self-description that may hold a credential (SGLang echoes its --api-key in server_info)
# a credential's field: one of these words in its name (api_key, hf_token, adminPassword), never a count or a
# path that merely contains one (speculative_num_draft_tokens, max_total_num_tokens, tokenizer_path)
_SECRET_WORDS = frozenset({"key", "keys", "apikey", "keyfile", "token", "secret", "secrets", "password", "passwd",
                           "credential", "credentials"})
_FAMILY = re.compile(r"^# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) ")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{\s]")


def headers(api_key_env: str | None) -> dict[str, str]:
    """The Authorization header for an arm's server; none when the arm names no key (or it is unset:
    the preflight refuses that run before anything is sent)."""
    key = os.environ.get(api_key_env) if api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


@dataclass
class ExternalServer:
    """The handle the sweep uses for a server it did not start: it cannot exit, only stop answering."""

    arm: str
    url: str
    model: str
    api_key_env: str | None = None

    @property
    def ident(self) -> str:
        return f"external server {self.url}"

    def exited(self) -> str | None:
        """None while the server answers /v1/models; else why not (the sweep fails the cell with it)."""
        why = unreachable(self.url, headers(self.api_key_env))
        return None if why is None else f"at {self.url} (external arm '{self.arm}') stopped answering: {why}"

    def logs(self) -> str:
        return ""   # its log is the user's; ddbench never saw it

    def stop(self) -> None:
        pass        # not ours to stop


def _get(client: httpx.Client, url: str) -> httpx.Response | str:
    try:
        return client.get(url)
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"


def unreachable(url: str, hdrs: dict[str, str]) -> str | None:
    """Why the server at url cannot be measured, in one line; None when /v1/models answers."""
    with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=hdrs) as client:
        r = _get(client, url + "/v1/models")
    if isinstance(r, str):
        return f"no server answers at {url} ({r})"
    return None if r.status_code == 200 else refused(url + "/v1/models", r.status_code, r.text)


def metric_families(text: str) -> list[str]:
    """The metric family names a /metrics text declares (# TYPE lines), else the sample names it holds."""
    declared = {m.group(1) for line in text.splitlines() if (m := _FAMILY.match(line))}
    if declared:
        return sorted(declared)
    return sorted({m.group(1) for line in text.splitlines() if not line.startswith("#") and (m := _SAMPLE.match(line))})


def secret_field(name: str, value) -> bool:
    """A field that holds a credential: a credential word in its name and text in its value (a number is a size)."""
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower())
    text = isinstance(value, str) and value != "" or isinstance(value, list) and any(isinstance(v, str) for v in value)
    return text and not _SECRET_WORDS.isdisjoint(words)


def scrub(obj, secrets: list[str]):
    """A server's answer without credentials: fields that hold one redacted, known secret values replaced."""
    if isinstance(obj, dict):
        return {k: ("<redacted>" if secret_field(k, v) else scrub(v, secrets)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, str):
        for s in secrets:
            obj = obj.replace(s, "<redacted>")
    return obj


def describe(url: str, hdrs: dict[str, str]) -> dict:
    """What the server says of itself, endpoint by endpoint (an endpoint it lacks is recorded as such)."""
    out: dict = {"url": url, "endpoints": {}}
    with httpx.Client(timeout=PROBE_TIMEOUT_S, headers=hdrs) as client:
        for path in ("/v1/models", *INFO_PATHS, "/version", "/metrics"):
            r = _get(client, url + path)
            if isinstance(r, str) or r.status_code != 200:
                out["endpoints"][path] = {"error": r if isinstance(r, str) else f"HTTP {r.status_code}"}
                continue
            if path == "/metrics":
                out["endpoints"][path] = {"families": metric_families(r.text)}
                continue
            try:
                out["endpoints"][path] = r.json()
            except ValueError:
                out["endpoints"][path] = {"text": r.text[:2000]}
    out["summary"] = summarize(out["endpoints"])
    return out


def summarize(ep: dict) -> dict:
    """Model, engine, version and speculative algorithm, as far as the server reported them (None: it did not)."""
    info = next((ep[p] for p in INFO_PATHS if isinstance(ep.get(p), dict) and "error" not in ep[p]), {})
    models = ep.get("/v1/models") or {}
    listed = models.get("data") if isinstance(models.get("data"), list) else []
    first = listed[0] if listed and isinstance(listed[0], dict) else {}
    families = (ep.get("/metrics") or {}).get("families") or []
    version = (ep.get("/version") or {}).get("version") or info.get("version")
    if any(f.startswith("vllm:") for f in families):
        engine = "vLLM"
    elif info or any(f.startswith("sglang:") for f in families):
        owner = first.get("owned_by")   # the reference engine names itself there
        engine = "SGLang-compatible" + (f" ({owner})" if owner not in (None, "sglang") else "")
    else:
        engine = None
    spec = info.get("speculative_algorithm")
    if spec is None and any(f.startswith("vllm:spec_decode") for f in families):
        spec = "on (vLLM spec_decode counters; method not reported)"
    return {"engine": engine, "version": version, "models": [m.get("id") for m in listed if isinstance(m, dict)],
            "model_path": info.get("model_path") or first.get("root"), "speculative_algorithm": spec,
            "draft_model": info.get("speculative_draft_model_path"),
            "spec_counters": sorted(f for f in families if "spec" in f)}


def check(profile: Profile, arm_id: str, run_dir: Path) -> ExternalServer:
    """The arm's server, answering; or a BringUpError whose summary names the arm and the URL."""
    arm = profile.arm(arm_id)
    url = arm.url.rstrip("/")
    arm_dir = Path(run_dir) / arm.id
    hdrs = headers(arm.api_key_env)
    status = {"arm": arm.id, "profile": profile.name, "backend": "external", "url": url,
              "api_key_env": arm.api_key_env, "started_unix": time.time(), "notes": [NOT_STARTED]}

    def fail(reason: str):
        write_json_atomic(arm_dir / STATUS, {**status, "status": "failed", "reason": reason,
                                             "ended_unix": time.time()})
        raise BringUpError(reason)

    why = unreachable(url, hdrs)
    if why is not None:
        fail(f"external arm '{arm.id}': {why}; ddbench starts nothing for it")
    key = hdrs.get("Authorization", "").removeprefix("Bearer ")
    info = scrub(describe(url, hdrs), [key] if key else [])
    write_json_atomic(arm_dir / SERVER_INFO, info)
    listed = info["summary"]["models"]
    model = arm.model or (listed[0] if listed else None)
    if model is None:
        fail(f"external arm '{arm.id}': {url}/v1/models lists no model, and the arm names none (arms[].model)")
    if arm.model and listed and arm.model not in listed:
        status["notes"].append(f"model '{arm.model}' is not among those /v1/models lists ({listed}); sent as named")
    write_json_atomic(arm_dir / STATUS, {**status, "status": "up", "model": model, "ready_s": 0.0})
    return ExternalServer(arm.id, url, model, arm.api_key_env)


def check_all(profile: Profile, arms: list[str], run_dir: Path) -> tuple[dict, dict[str, str]]:
    """(servers, why each other arm's server is not answering), as containers.bringup.up_together returns."""
    declare_secret_env(a.api_key_env for a in profile.arms)
    servers, down = {}, {}
    for arm in arms:
        try:
            servers[arm] = check(profile, arm, run_dir)
        except BringUpError as e:
            down[arm] = e.summary
    return servers, down
