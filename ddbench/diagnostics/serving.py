"""What the diagnostics share: the run's profile and prompts, the bundle layers on PYTHONPATH, and a
server brought up and sent the prompts one at a time, as the load generator's client sends them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from containers.bringup import up
from containers.ready import BringUpError
from ddbench.core import prom
from ddbench.core.manifest import bundle_marker, now_iso
from ddbench.core.profile import REPO_ROOT, Arm, Profile, load_profile
from ddbench.core.prompts import Prompt, load_prompt_set, prompt_set_digest
from loadtests.cell import probe
from loadtests.client import chat_body, stream

FORK_LAYER = "sglang-ddtree"
SCHEMA = 1
REQUEST_TIMEOUT_S = 600.0


class DiagnosticError(RuntimeError):
    pass


# ---------------------------------------------------------------- inputs


def run_profile(run_dir: Path, name: str | None) -> tuple[Profile, str]:
    if name:
        return load_profile(name), name
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        raise DiagnosticError(f"{manifest} is missing: name the profile with --profile")
    doc = json.loads(manifest.read_text())
    return Profile.model_validate(doc["profile"]), f"{manifest} ({doc.get('profile_source')})"


def first_prompts(profile: Profile, n: int) -> list[Prompt]:
    wl = profile.workload
    return load_prompt_set(wl.prompt_set, wl.categories or None)[:n]


def prompts_record(profile: Profile, prompts: list[Prompt]) -> dict:
    wl = profile.workload
    return {"set": wl.prompt_set, "sha256": prompt_set_digest(wl.prompt_set),
            "ids": [p.id for p in prompts], "max_tokens": wl.max_tokens, "temperature": wl.temperature,
            "ignore_eos": wl.ignore_eos}


def split_pythonpath(pythonpath: str) -> tuple[list[str], list[str]]:
    """(stock, fork) PYTHONPATH entries: stock is the set-up path without the sglang-ddtree site."""
    entries = [e for e in pythonpath.split(os.pathsep) if e]
    fork_sites = [e for e in entries if (bundle_marker(e) or {}).get("layer") == FORK_LAYER]
    if not fork_sites:
        raise DiagnosticError(f"no {FORK_LAYER} site on PYTHONPATH ({pythonpath or 'unset'}): "
                              f"e=$(sh containers/offline/setup.sh harness sglang {FORK_LAYER}) && eval \"$e\"")
    return [e for e in entries if e not in fork_sites], entries


def resolve_sglang(pythonpath: list[str]) -> dict | None:
    """Where `sglang` resolves with this PYTHONPATH (asked of a fresh interpreter, as a server would)."""
    code = "import json; from ddbench.core.manifest import sglang_source; print(json.dumps(sglang_source()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pythonpath, str(REPO_ROOT)])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


@contextmanager
def pythonpath(entries: list[str]):
    """Servers started inside see this PYTHONPATH (local_runtime passes os.environ on)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(entries)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


# ---------------------------------------------------------------- talking to a server


def counter(text: str, name: str = prom.VERIFY_CALLS) -> float | None:
    """The sum over labels of a Prometheus counter in /metrics text (ddbench.core.prom); None when absent or the
    text is not Prometheus exposition."""
    try:
        return prom.parse(text).get(name)
    except prom.PromError:
        return None


def scrape(url: str) -> float | None:
    try:
        r = httpx.get(url + "/metrics", timeout=10)
    except httpx.HTTPError:
        return None
    return counter(r.text) if r.status_code == 200 else None


def chat(url: str, model: str, prompt: Prompt, profile: Profile, token_ids: bool = True) -> dict:
    """One streamed chat completion, the load generator's body and client; text, usage and SGLang's spec details
    (token_ids=False: the body asks for no token ids)."""
    wl = profile.workload
    body = chat_body(prompt, model=model, max_tokens=wl.max_tokens, temperature=wl.temperature, top_p=wl.top_p,
                     top_k=wl.top_k, ignore_eos=wl.ignore_eos, token_ids=token_ids)
    with httpx.Client(base_url=url) as client:
        return stream(client, body, f"check-{prompt.id}", timeout_s=REQUEST_TIMEOUT_S)


def send_all(url: str, prompts: list[Prompt], profile: Profile, token_ids: bool = True) -> list[dict]:
    """The prompts one at a time (C = 1); per request the /metrics verify-step delta and the outputs."""
    model = probe(url)
    rows = []
    for prompt in prompts:
        before = scrape(url)
        got = chat(url, model, prompt, profile, token_ids)
        after = scrape(url)
        text = "".join(c.text for c in got["chunks"])
        usage = got["usage"] or {}
        rows.append({"id": prompt.id,
                     "verify_steps": after - before if before is not None and after is not None else None,
                     "spec_verify_ct": (got["spec"] or {}).get("spec_verify_ct"),
                     "completion_tokens": usage.get("completion_tokens"), "finish_reason": got["finish_reason"],
                     "error": got["error"], "text_sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text,
                     "token_ids": got.get("output_token_ids")})
    return rows


def _total(rows: list[dict], key: str):
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else sum(values)


def serve(profile: Profile, arm_id: str, run_dir: Path, prompts: list[Prompt], timeout_s: float | None,
          command: list[str] | None = None, token_ids: bool = True) -> dict:
    """Bring the arm up in run_dir (its own arm dir there), send the prompts, stop it.
    `command` replaces the server command (bringup.up's stand-in), for tests."""
    t0 = time.time()
    try:
        server = up(profile, arm_id, run_dir, timeout_s=timeout_s, command=command)
    except BringUpError as e:
        return {"status": "failed", "reason": e.summary, "requests": []}
    try:
        return measure(server, prompts, profile, t0, token_ids)
    finally:
        server.stop()


def measure(server, prompts: list[Prompt], profile: Profile, t0: float, token_ids: bool = True) -> dict:
    """The prompts through a server that is up (since t0); totals and per-request rows."""
    ready_s = time.time() - t0
    rows = send_all(server.url, prompts, profile, token_ids)
    steps, tokens = _total(rows, "verify_steps"), _total(rows, "completion_tokens")
    failed = [r for r in rows if r["error"]]
    why = f"requests failed: {[r['id'] for r in failed]}; the first: {failed[0]['error']}" if failed else None
    return {"status": "failed" if failed else "ok", "reason": why,
            "ready_s": round(ready_s, 1), "wall_s": round(time.time() - t0, 1), "verify_steps": steps,
            "spec_verify_ct": _total(rows, "spec_verify_ct"), "completion_tokens": tokens,
            "tau": round(tokens / steps, 4) if steps and tokens else None, "requests": rows}


def fork_build(entries: list[str]) -> dict | None:
    for e in entries:
        m = bundle_marker(e)
        if m and m.get("layer") == FORK_LAYER:
            return m.get("source")
    return None


def head(diagnostic: str, label: str, profile: Profile, source: str, prompts: list[Prompt]) -> dict:
    """What every diagnostic record starts with: what it is, from which profile, on which prompts, when."""
    return {"diagnostic": diagnostic, "schema": SCHEMA, "label": label,
            "profile": {"name": profile.name, "digest": profile.digest(), "source": source},
            "prompts": prompts_record(profile, prompts), "started": now_iso()}



def with_flags(profile: Profile, arm: Arm, flags: list[str]) -> Profile:
    """The profile with one arm's command extended by flags (nothing else changes)."""
    changed = arm.model_copy(update={"extra_args": [*arm.extra_args, *flags]})
    return profile.model_copy(update={"arms": [changed if a.id == arm.id else a for a in profile.arms]})

