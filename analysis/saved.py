"""The analysis of a run as saved: its tables (RUN/tables/NAME.parquet, with a .csv beside each for a human) and
RUN/tables/analysis.json for the rest (notes, refusals, the bootstrap's settings, the triage's and cross-check's
scalars). `write` saves an Analysis; `read` gives it back without recomputing anything, for the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.outcome import TABLE_NAMES, Analysis, CrossCheck
from analysis.read import ingest
from analysis.read.manifest import load_manifest
from analysis.triage import Triage
from ddbench.core.results import ANALYSIS_RECORD, TABLES, RunDir, write_bytes_atomic, write_json_atomic

SCHEMA = 2

# table name -> the Analysis field it holds (the run's own frames are Run fields: see RUN_TABLES)
FIELDS = {"cells": "cells", "summary": "summary", "speedups": "speedups", "decomposition": "decomposition",
          "categories": "categories", "lossless": "lossless", "checks": "checks", "drift": "drift",
          "gpu_band": "gpu_band", "host_cpu": "host_cpu", "stage_cost": "stage_cost",
          "between_runs": "between_runs", "stationarity": "stationarity", "rounds": "rounds",
          "gpu_time": "gpu_time", "host_profile": "host_profile", "rates": "rates", "rate_wins": "rate_wins",
          "recommendation": "recommendation", "acceptance_by_position": "by_position", "goodput": "goodput",
          "goodput_ratios": "goodput_ratios", "warmups": "warmups", "pairs": "pairs",
          "targets": "targets"}
RUN_TABLES = {"server_log": "log", "server_metrics": "server", "telemetry": "telemetry"}


class NoSavedAnalysis(FileNotFoundError):
    """The run has no analysis saved by this version of ddbench; the message says what to run."""


def write(a: Analysis) -> list[Path]:
    """Every table as parquet (typed, for the report) and csv (for a human), then analysis.json, atomically.
    analysis.json goes last: a run whose saving was cut short has none, and the report says so."""
    tables = {"requests": a.requests.drop(columns=["text", "output_token_ids"], errors="ignore"),
              **{name: getattr(a, f) for name, f in FIELDS.items()},
              **{name: getattr(a.run, f) for name, f in RUN_TABLES.items()}}
    if a.triage is not None:
        tables.update(triage=a.triage.divergences, triage_counts=a.triage.counts,
                      triage_gaps=pd.DataFrame({"gap": np.asarray(a.triage.position_gaps, dtype=float)}))
    if a.crosscheck is not None:
        tables.update(a.crosscheck.tables())
    else:    # a cross-check table left by an earlier analysis would describe a comparison not made now
        for name in TABLE_NAMES:
            for suffix in (".parquet", ".csv"):
                (a.run.path / TABLES / f"{name}{suffix}").unlink(missing_ok=True)
    out = []
    for name, df in tables.items():
        df = _plain(df)
        pq = a.run.path / TABLES / f"{name}.parquet"
        write_bytes_atomic(pq, df.to_parquet(index=False))
        if name not in ("requests", "triage_gaps"):
            write_bytes_atomic(pq.with_suffix(".csv"), df.to_csv(index=False).encode())
        out.append(pq)
    t = a.triage
    write_json_atomic(a.run.path / ANALYSIS_RECORD, {
        "schema": SCHEMA, "tables": sorted(tables), "bootstrap": a.bootstrap, "seconds": round(a.seconds, 3),
        "lossless_note": a.lossless_note, "slo_text": a.slo_text, "refusals": a.refusals,
        "triage": None if t is None else {"note": t.note, "threshold": t.threshold, "source": t.source},
        "crosscheck": None if a.crosscheck is None else {"twin": a.crosscheck.twin}})
    return out


def read(run_dir: str | Path) -> Analysis:
    """The run's saved analysis, as write left it: nothing is recomputed, and no record file is read."""
    rd = RunDir.open(run_dir)
    path = rd.path / ANALYSIS_RECORD
    if not path.is_file():
        raise NoSavedAnalysis(f"{path}: no saved analysis (python -m analysis {rd.path} writes it)")
    doc = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise NoSavedAnalysis(f"{path}: saved by another version of ddbench (schema {doc.get('schema')}, this one "
                              f"reads {SCHEMA}): analyse the run again (python -m analysis {rd.path})")
    have = set(doc["tables"])

    def table(name: str) -> pd.DataFrame:
        return pd.read_parquet(rd.path / TABLES / f"{name}.parquet") if name in have else pd.DataFrame()

    requests = table("requests")
    run = ingest.Run(rd.path, load_manifest(rd.manifest_path), requests, pd.DataFrame(), table("cells"),
                     **{f: table(name) for name, f in RUN_TABLES.items()})
    a = Analysis(run, requests, lossless_note=doc["lossless_note"], slo_text=doc["slo_text"],
                 refusals=list(doc["refusals"]), seconds=float(doc["seconds"]), bootstrap=int(doc["bootstrap"]),
                 **{f: table(name) for name, f in FIELDS.items()})
    if (t := doc.get("triage")) is not None:
        a.triage = Triage(table("triage_counts"), table("triage"), table("triage_gaps")["gap"].to_numpy(float),
                          t["note"], t["threshold"], t["source"])
    if (x := doc.get("crosscheck")) is not None:
        a.crosscheck = CrossCheck(table("crosscheck_sides"), table("crosscheck"), table("crosscheck_throughput"),
                                  table("crosscheck_notes")["note"].tolist(), x["twin"], table("crosscheck_verdicts"))
    return a


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Mixed-type object columns (lists beside None, bools beside NaN) as strings Arrow can store."""
    df = df.copy()
    for col in df.columns:
        if isinstance(df[col].dtype, pd.ArrowDtype) and pa.types.is_list(df[col].dtype.pyarrow_dtype):
            # pandas cannot read back the Arrow list dtype it writes in the file's metadata; Python lists
            # store as the same Arrow list column and read back as lists
            df[col] = pd.Series(df[col].tolist(), index=df.index, dtype=object)
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col].dropna()}
            if len(kinds) > 1 or (kinds and kinds <= {list, tuple, dict} and col not in ingest.SPEC_HISTOGRAMS):
                df[col] = df[col].map(lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v))
    return df
