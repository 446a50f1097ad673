"""Servers ddbench did not start (backend 'external'): what each said of itself, for page 1 of the report.

The sweep writes <arm>/server_info.json (containers/external.py: the server's own endpoints and a summary) and
<arm>/status.json (whether it answered); this reads them back. A field the server did not report is printed
as such, never filled in from the profile."""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from ddbench.core.results import SERVER_INFO, STATUS
from report.tex import breakable, escape, url

UNREPORTED = "not reported"


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def rows(run_path: Path, profile) -> list[dict]:
    """One row per arm of the profile (its server): url, model, engine and version, speculative algorithm."""
    out = []
    for arm in profile.arms:   # the profile as written: one arm per server, whatever the sampling settings
        base = arm.id
        status, info = _read(run_path / base / STATUS), _read(run_path / base / SERVER_INFO)
        s = info.get("summary") or {}
        cell = lambda v: Markup(breakable(str(v))) if v not in (None, "", []) else Markup(UNREPORTED)  # noqa: E731
        if status.get("status") == "failed":
            answered = Markup(escape(f"did not answer: {status.get('reason', 'no reason recorded')}"))
            out.append({"arm": base, "url": url(arm.url), "model": answered, "engine": Markup("-"),
                        "spec": Markup("-")})
            continue
        engine = f"{s['engine']}, {s.get('version') or 'version not reported'}" if s.get("engine") else s.get("version")
        model = status.get("model") or (s.get("models") or [None])[0]
        path = s.get("model_path")
        out.append({"arm": base, "url": url(arm.url),
                    "model": cell(f"{model} ({path})" if model and path and path != model else model),
                    "engine": cell(engine), "spec": cell(s.get("speculative_algorithm"))})
    return out


def context(a) -> dict | None:
    """None unless the run measured external servers."""
    p = a.run.manifest.profile
    if p.backend.kind != "external":
        return None
    return {"rows": rows(a.run.path, p)}
