"""Read a results directory into tidy tables: one row per request, per content chunk, per cell,
per server-log line, per /metrics counter, per telemetry sample.

Request files are parsed by Arrow (fast, one pass in C++); a file Arrow cannot read, or whose
columns do not match ddbench.core.records.RequestRecord, is re-read line by line through the
pydantic model so that the error names the file, the line and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from pydantic import ValidationError

from analysis.read import serverlog
from analysis.read.manifest import Manifest, load_manifest
from ddbench.core import prom
from ddbench.core.records import CellStatus, RequestRecord
from ddbench.core.results import SERVER_LOG, STATUS, RunDir, read_run_text, record_files
from ddbench.core.validation import first_error

CELL = ["arm", "concurrency", "repetition"]
_REQUIRED = {"request_id", "arm", "concurrency", "repetition", "warmup", "prompt_id", "category", "worker",
             "user", "max_tokens", "temperature", "send_ns", "send_unix_ns"}
_KNOWN = set(RequestRecord.model_fields)
SPEC_SCALARS = ["spec_verify_ct", "spec_accept_length", "spec_accept_rate", "spec_num_correct_drafts",
                "spec_num_proposed_drafts", "spec_avg_tree_nodes"]
# SGLang's spec_correct_drafts_histogram (index i: steps that accepted i drafts), and ours:
# index d: steps whose deepest accepted node is at depth d; index L: steps that committed L tokens
SPEC_HISTOGRAMS = ["spec_correct_drafts_histogram", "spec_accepted_depth_histogram",
                   "spec_commit_length_histogram"]
SERVER_METRICS = [prom.GENERATED, prom.VERIFY_CALLS, "sglang:prompt_tokens_total", "sglang:num_requests_total"]


class IngestError(ValueError):
    """Input that cannot be analysed; the message names the file (and line, field)."""


@dataclass
class Run:
    path: Path
    manifest: Manifest
    requests: pd.DataFrame
    chunks: pd.DataFrame      # content chunks only: req (row of requests), t_ns, tokens, chars (of its text)
    cells: pd.DataFrame
    log: pd.DataFrame
    server: pd.DataFrame
    telemetry: pd.DataFrame
    cache: dict = field(default_factory=dict)

    @property
    def profile(self):
        """The run's profile as analysis reads it: arms are the measured arms (one per arm and sampling
        setting, when the profile sweeps several), so every per-arm table is per setting."""
        return self.manifest.profile.measured()


def load(path: str | Path) -> Run:
    try:
        rd = RunDir.open(path)
    except FileNotFoundError as e:
        raise IngestError(str(e)) from None
    manifest = load_manifest(rd.manifest_path)
    cells, tables, logs, server, telemetry = [], [], [], [], []
    arms = set()
    for arm, c, r, cdir in rd.cells():
        arms.add(arm)
        cells.append(_status(cdir, arm, c, r))
        try:
            tables += [t for f in record_files(cdir) if (t := _read_requests(f, arm, c, r)).num_rows]
        except ValueError as e:   # a damaged or misplaced record: the cell failed, and says where; the rest is read
            cells[-1].update(status="failed", reason=f"damaged record file: {e}")
        server.extend(_server_metrics(cdir, arm, c, r))
        telemetry.append(_telemetry(cdir / "telemetry.jsonl", arm, c, r))
    # one server serves every sampling setting of its arm: its log lies in the base arm's directory
    profile = manifest.profile.measured()
    servers = {a.id: a.server for a in profile.arms}
    for base in sorted({servers.get(a, a) for a in arms}):
        df = serverlog.read(rd.arm_dir(base) / SERVER_LOG)
        df.insert(0, "arm", base)
        logs.append(df)
    cells_df = pd.DataFrame(cells, columns=CELL + ["status", "reason", "started_unix", "ended_unix",
                                                   "window_start_ns", "window_end_ns", "status_requests",
                                                   "status_errors", "client_cpu_max", "busy_ns"])
    requests, chunks = _flatten(tables)
    log = pd.concat(logs, ignore_index=True) if logs else serverlog.parse("")
    if "arm" not in log:
        log.insert(0, "arm", pd.Series(dtype=str))
    log = _assign_cells(log, cells_df, servers)
    tel = pd.concat([t for t in telemetry if len(t)], ignore_index=True) if any(len(t) for t in telemetry) \
        else pd.DataFrame(columns=CELL + ["t_unix", "source"])
    srv = pd.DataFrame(server, columns=CELL + ["metric", "before", "after", "delta"])
    return Run(rd.path, manifest, requests, chunks, cells_df, log, srv, tel)


def _status(cdir: Path, arm: str, c: int, r: int) -> dict:
    path = cdir / STATUS
    if not path.is_file():
        return {"arm": arm, "concurrency": c, "repetition": r, "status": "missing",
                "reason": f"{path.name} not written: the cell did not finish"}
    try:
        st = CellStatus.model_validate_json(path.read_bytes())
    except ValidationError as e:
        raise IngestError(f"{path}: {first_error(e)}") from None
    if (st.arm, st.concurrency, st.repetition) != (arm, c, r):
        raise IngestError(f"{path}: says cell ({st.arm}, C={st.concurrency}, rep {st.repetition}) "
                          f"but lies in the directory of ({arm}, C={c}, rep {r})")
    d = st.model_dump()
    d.update(status_requests=d.pop("requests"), status_errors=d.pop("errors"))
    return d


def _read_requests(path: Path, arm: str, c: int, r: int) -> pa.Table:
    try:
        t = pajson.read_json(path)
        if _fits(t):
            _check_cell(path, t, arm, c, r)
            return t
    except (pa.ArrowInvalid, OSError):   # not records as Arrow reads them, or a packed file cut short
        pass
    return _read_requests_slow(path, arm, c, r)


_TYPES = {"request_id": pa.types.is_string, "arm": pa.types.is_string, "prompt_id": pa.types.is_string,
          "category": pa.types.is_string, "worker": pa.types.is_string, "warmup": pa.types.is_boolean,
          "concurrency": pa.types.is_integer, "repetition": pa.types.is_integer, "user": pa.types.is_integer,
          "max_tokens": pa.types.is_integer, "send_ns": pa.types.is_integer, "send_unix_ns": pa.types.is_integer,
          "temperature": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
          "end_ns": lambda t: pa.types.is_integer(t) or pa.types.is_null(t),
          "status": lambda t: pa.types.is_integer(t) or pa.types.is_null(t)}


def _fits(t: pa.Table) -> bool:
    """Whether Arrow's reading matches the record schema; if not, pydantic will say where it does not."""
    names = set(t.column_names)
    if not _REQUIRED <= names or not names <= _KNOWN:
        return False
    if any(n in names and not ok(t.schema.field(n).type) for n, ok in _TYPES.items()):
        return False
    return all(t.column(n).null_count == 0 for n in _REQUIRED)


def _check_cell(path: Path, t: pa.Table, arm: str, c: int, r: int) -> None:
    for col, want in (("arm", arm), ("concurrency", c), ("repetition", r)):
        bad = pc.not_equal(t.column(col), pa.scalar(want))
        if pc.any(bad).as_py():
            line = int(pc.index(bad, True).as_py()) + 1
            raise IngestError(f"{path}:{line}: {col} is {t.column(col)[line - 1].as_py()!r} but the file lies in "
                              f"the cell directory of ({arm}, C={c}, rep {r})")


def _read_requests_slow(path: Path, arm: str, c: int, r: int) -> pa.Table:
    rows = []
    for n, line in enumerate(read_run_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = RequestRecord.model_validate_json(line)
        except ValidationError as e:
            raise IngestError(f"{path}:{n}: {first_error(e, '<record>')}") from None
        if (rec.arm, rec.concurrency, rec.repetition) != (arm, c, r):
            raise IngestError(f"{path}:{n}: request {rec.request_id} belongs to ({rec.arm}, C={rec.concurrency}, "
                              f"rep {rec.repetition}) but lies in the cell directory of ({arm}, C={c}, rep {r})")
        rows.append(rec.model_dump())
    for row in rows:    # Arrow needs one type per column: a spec dict of the fields it knows
        if row["spec"] is not None:
            row["spec"] = {k: v for k, v in row["spec"].items() if k in SPEC_SCALARS + SPEC_HISTOGRAMS}
    return pa.Table.from_pylist(rows) if rows else pa.table({})


def _flatten(tables: list[pa.Table]) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not tables:
        return _empty_requests(), pd.DataFrame({"req": pd.Series(dtype=np.int64), "t_ns": pd.Series(dtype=np.int64),
                                                 "tokens": pd.Series(dtype=float), "chars": pd.Series(dtype=np.int64)})
    t = pa.concat_tables(tables, promote_options="permissive")
    t = t.combine_chunks()     # one chunk per column: struct fields are then read without copies
    n = t.num_rows
    out = {}
    out["request_id"] = _strings(t.column("request_id"))
    for name in ["arm", "prompt_id", "category", "worker"]:
        out[name] = t.column(name).combine_chunks().dictionary_encode().to_pandas()
    for name in ["concurrency", "repetition", "warmup", "user", "max_tokens", "temperature", "send_ns",
                 "send_unix_ns"]:
        out[name] = t.column(name).to_numpy()
    # target_*: the lengths asked for (NaN: none targeted), to hold against usage's prompt/completion tokens
    for name in ["intended_send_ns", "headers_ns", "end_ns", "status", "top_p", "top_k", "seed",
                 "target_input_tokens", "target_output_tokens", "round"]:
        out[name] = _num(t, name, n)
    for name in ["error", "finish_reason"]:
        out[name] = (t.column(name).cast(pa.string()).to_numpy(zero_copy_only=False) if name in t.column_names
                     else np.full(n, None, dtype=object))
    for name in ("prompt_tokens", "completion_tokens"):
        out[name] = _num(t, name, n, parent="usage")
    for name in SPEC_SCALARS:
        out[name] = _num(t, name, n, parent="spec")
    for name in SPEC_HISTOGRAMS:    # kept in Arrow; dense() turns them into a matrix when needed
        col = _field(t, "spec", name)
        col = col if col is not None and pa.types.is_list(col.type) else pa.nulls(n, pa.list_(pa.int64()))
        out[name] = pd.Series(pd.arrays.ArrowExtensionArray(col.cast(pa.list_(pa.int64()))))
    # the generated ids where the server returned them (None: it did not, or a record from before the field)
    col = t.column("output_token_ids").combine_chunks() if "output_token_ids" in t.column_names else None
    col = col if col is not None and pa.types.is_list(col.type) else pa.nulls(n, pa.list_(pa.int64()))
    out["output_token_ids"] = pd.Series(pd.arrays.ArrowExtensionArray(col.cast(pa.list_(pa.int64()))))
    flat_req, flat_t, flat_tok, flat_chars, text = _content_chunks(t, n)
    first = np.full(n, np.nan)
    nchunks = np.zeros(n, dtype=np.int64)
    if len(flat_req):
        idx, pos, counts = np.unique(flat_req, return_index=True, return_counts=True)
        first[idx] = flat_t[pos]
        nchunks[idx] = counts
    out["first_content_ns"] = first
    out["content_chunks"] = nchunks
    out["text"] = _strings(pc.fill_null(text, ""))
    req = pd.DataFrame(out)
    req["ok"] = req["error"].isna() & (req["status"] == 200)
    chunk_df = pd.DataFrame({"req": flat_req.astype(np.int64), "t_ns": flat_t.astype(np.int64), "tokens": flat_tok,
                             "chars": flat_chars.astype(np.int64)})
    return req, chunk_df


def _content_chunks(t: pa.Table, n: int):
    """The chunks with content (the first one times TTFT), flat: each one's request row, time, tokens and
    characters; and each request's whole text."""
    chunks = t.column("chunks").combine_chunks() if "chunks" in t.column_names else None
    if chunks is None or pa.types.is_null(chunks.type):
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
                pa.nulls(n, pa.string()))
    parents = pc.list_parent_indices(chunks).to_numpy()
    flat = pc.list_flatten(chunks)
    chars = pc.fill_null(pc.utf8_length(flat.field("text")), 0).to_numpy(zero_copy_only=False)
    content = chars > 0
    tok = flat.field("tokens") if "tokens" in [f.name for f in flat.type] else pa.nulls(len(flat))
    return (parents[content], flat.field("t_ns").to_numpy(zero_copy_only=False)[content],
            tok.cast(pa.float64()).to_numpy(zero_copy_only=False)[content], chars[content],
            pc.binary_join(_texts(chunks), ""))


def _strings(col) -> pd.Series:
    return (col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col).to_pandas()


def dense(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column of integer lists (histograms) as an n × width matrix, zero-padded, and which rows had one."""
    arr = pa.array(col.array if hasattr(col, "array") else col, type=pa.list_(pa.int64()))
    n = len(arr)
    present = ~arr.is_null().to_numpy(zero_copy_only=False)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy().astype(np.int64)
    width = int(lengths.max()) if n else 0
    out = np.zeros((n, width))
    values = pc.list_flatten(arr).to_numpy(zero_copy_only=False)
    if len(values):
        rows = np.repeat(np.arange(n), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[rows, np.arange(len(values)) - starts] = values
    return out, present


def _texts(chunks: pa.ListArray) -> pa.ListArray:
    """The list of chunk texts of each request (a list<string> view of list<struct>)."""
    return pa.ListArray.from_arrays(chunks.offsets, chunks.values.field("text"), mask=chunks.is_null())


def _num(t: pa.Table, name: str, n: int, parent: str | None = None) -> np.ndarray:
    col = _field(t, parent, name) if parent else (t.column(name) if name in t.column_names else None)
    if col is None or pa.types.is_null(col.type):
        return np.full(n, np.nan)
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False)


def _field(t: pa.Table, parent: str, name: str):
    if parent not in t.column_names:
        return None
    col = t.column(parent)
    col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if not pa.types.is_struct(col.type) or col.type.get_field_index(name) < 0:
        return None
    return pc.struct_field(col, name)


def _empty_requests() -> pd.DataFrame:
    cols = ["request_id", "arm", "concurrency", "repetition", "warmup", "prompt_id", "category", "worker", "user",
            "max_tokens", "temperature", "top_p", "top_k", "seed", "target_input_tokens", "target_output_tokens",
            "send_ns", "send_unix_ns", "intended_send_ns", "round",
            "headers_ns", "end_ns", "status", "error", "finish_reason", "prompt_tokens", "completion_tokens",
            *SPEC_SCALARS,
            *SPEC_HISTOGRAMS, "output_token_ids", "first_content_ns", "content_chunks", "text", "ok"]
    return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})


def _server_metrics(cdir: Path, arm: str, c: int, r: int) -> list[dict]:
    before, after = prom.read(cdir / "metrics-before.prom"), prom.read(cdir / "metrics-after.prom")
    if before is None or after is None:
        return []
    rows = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        # counters since boot are only usable as a difference over the cell
        delta = a - b if (a is not None and b is not None and name.endswith(("_total", "_sum", "_count"))) else None
        rows.append({"arm": arm, "concurrency": c, "repetition": r, "metric": name, "before": b, "after": a,
                     "delta": delta})
    return rows


def _telemetry(path: Path, arm: str, c: int, r: int) -> pd.DataFrame:
    """containers/telemetry.py's lines, one tidy row per GPU per sample and one per host sample:
    {"kind": "source", "gpu": "nvml" | "nvidia-smi" | "absent", "reason"?} then
    {"kind": "sample", "t_unix", "t_ns", "host": {...}, "gpus": [{"index", "sm_clock_mhz", ...}]}."""
    text = read_run_text(path)
    if text is None:
        return pd.DataFrame()
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise IngestError(f"{path}:{n}: not valid JSON: {e.msg}") from None
        if not isinstance(obj, dict):
            raise IngestError(f"{path}:{n}: a telemetry line is a JSON object")
        base = {"arm": arm, "concurrency": c, "repetition": r, "t_unix": obj.get("t_unix"), "t_ns": obj.get("t_ns")}
        rows += _telemetry_rows(obj, base, f"{path}:{n}")
    return pd.DataFrame(rows)


def _telemetry_rows(obj: dict, base: dict, where: str) -> list[dict]:
    """One telemetry line's rows: its source, or its host sample, each GPU's, and a GPU read error."""
    if obj.get("kind") == "source":
        return [{**base, "source": "source", "detail": f"{obj.get('gpu')}: {obj.get('reason') or ''}"}]
    rows = [{**base, "source": "host", **obj["host"]}] if isinstance(obj.get("host"), dict) else []
    for g in obj.get("gpus") or []:
        if not isinstance(g, dict):
            raise IngestError(f"{where}: gpus holds {g!r}, not an object")
        g = dict(g)
        g["throttle"] = ",".join(map(str, g.get("throttle") or []))
        rows.append({**base, "source": "gpu", "gpu": g.pop("index", None), **g})
    if obj.get("gpu_error"):
        rows.append({**base, "source": "gpu_error", "detail": str(obj["gpu_error"])})
    return rows


def _assign_cells(log: pd.DataFrame, cells: pd.DataFrame, servers: dict[str, str]) -> pd.DataFrame:
    """A log line belongs to the cell of its server whose wall-clock span holds it (second resolution), and
    takes that cell's (measured) arm; servers maps a measured arm to the arm whose server it ran against."""
    log = log.copy()
    server = log["arm"].copy()
    log["concurrency"] = np.nan
    log["repetition"] = np.nan
    for row in cells.itertuples():
        if pd.isna(row.started_unix) or pd.isna(row.ended_unix):
            continue
        inside = ((server == servers.get(row.arm, row.arm)) & (log["t_unix"] >= np.floor(row.started_unix))
                  & (log["t_unix"] <= np.ceil(row.ended_unix)) & log["kind"].isin(["decode", "ddtree"]))
        log.loc[inside, ["arm", "concurrency", "repetition"]] = (row.arm, row.concurrency, row.repetition)
    return log
