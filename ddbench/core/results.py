"""The results layout: where every stage reads and writes, and how.

    results/<profile>/<run-id>/
        manifest.json                 the profile as resolved, host, versions, seeds, times
        <arm>/server.log              the server's output while the arm was up
        <arm>/status.json             whether the arm came up
        <arm>/attempts/c<C>-r<R>.<N>/  a cell's earlier attempt, moved aside just before it ran again
        <arm>/warmup/c<C>.<N>/        unmeasured load after the N-th bring-up (load.warmup_s), laid out as a cell;
                                      until stable: windows w1, w2, ... and stable.json
        redo.json                     repetitions a resumed sweep is running again, while it runs
        <arm>/c<C>-r<R>/              one cell: concurrency C, repetition R
            requests-<worker>.jsonl   one RequestRecord per line, one file per Locust process
                                      (this, the scrapes, logs and telemetry end in .gz once
                                      `ddbench pack` has packed the run to commit it)
            flush.json                what the server answered when asked to drop its prefix cache
            metrics-before.prom       /metrics scraped before and after the cell
            metrics-after.prom
            telemetry.jsonl           GPU/host samples during the cell
            client-cpu.jsonl          CPU of every Locust process during the cell
            locust*.csv, locust.html, locust.log   Locust's own view, kept as sanity artifacts
            status.json               a CellStatus
        tables/                       analysis output
        report.pdf
        stale/tables/, stale/report.pdf   the above, set aside when analysis of data that has changed failed
        notes.md                      optional: a person's account written after the run, printed in the report

Every write is atomic (a temp file, then a rename), and every text written passes through
redact(): no value of an environment variable named like a secret ever lands on disk.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import secrets
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ddbench.core.profile import REPO_ROOT
from ddbench.core.records import RequestRecord

RESULTS_ROOT = REPO_ROOT / "results"
MANIFEST = "manifest.json"
REDO = "redo.json"
WARMUP = "warmup"
STATUS = "status.json"
STABLE = "stable.json"        # a warm-up until stable: each window's throughput, and when the server held still
WARMUP_LEVEL = "level"        # a warm-up's round of one whole request per user (load.warmup_levels)
FLUSH = "flush.json"          # a cell's prefix-cache flush: the path asked, the answer, or why none was asked
DIAGNOSTICS = "diagnostics"   # beside the cells, never read as one: RUN_DIR/diagnostics/<name>...
GPU_TIME = "gpu-time"         # the profiled round per C (ddbench/sweep.py time_kernels)
HOST_PROFILE = "host-profile"   # the host's share of a step, by frame (ddbench/sweep.py time_host)
OVERLAY_CHECK = "diagnostics/overlay-check.json"   # stock SGLang vs the build: ddbench/diagnostics/overlay_check.py
SERVER_INFO = "server_info.json"   # an external server's self-description, beside its arm's status
SERVER_LOG = "server.log"
TABLES = "tables"
ANALYSIS_RECORD = "tables/analysis.json"   # what the tables do not hold (analysis/saved.py)
# the T>0 lossless test's table under tables/ (analysis/sampling_law.py writes it as .csv and .parquet)
SAMPLING_LAW_TABLE = "lossless_sampling"
# the drafter diagnosis' tables under tables/ (analysis/headroom.py writes them, the report reads them)
HEADROOM_FILES = {"ranks": "headroom_ranks.csv", "first_mismatch": "headroom_first_mismatch.csv",
                  "after_sibling": "headroom_after_sibling.csv", "headroom": "headroom_trees.csv",
                  "setup": "headroom_setup.csv"}
STALE = "stale"    # tables and report.pdf of data that has since changed (RunDir.set_aside)
REPORT = "report.pdf"
NOTES = "notes.md"  # a person's account of a run, written after it (what is missing, and why): the report prints it
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
REDACTED = "<redacted>"


def secret_values() -> list[str]:
    """Values of environment variables whose names mark them as secrets (or that a profile declared secret),
    longest first."""
    vals = {v for k, v in os.environ.items() if _secret_name(k) and len(v) >= 4}
    return sorted(vals, key=len, reverse=True)


# names a profile declares secret whatever they look like (an external arm's api_key_env): the user picks
# the name, and 'VLLM_AUTH' would pass the name pattern
_DECLARED: set[str] = set()


def declare_secret_env(names) -> None:
    """From now on, the values of these environment variables are redacted from everything written."""
    _DECLARED.update(n for n in names if n)


def _secret_name(name: str) -> bool:
    return name in _DECLARED or _SECRET_NAME.search(name) is not None


def redact(text: str) -> str:
    for v in secret_values():
        text = text.replace(v, REDACTED)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if _secret_name(k) else redact(v)) for k, v in env.items()}


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, redact(text).encode())


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None


def record_files(cell: Path) -> list[Path]:
    """A cell's request-record files, plain or packed."""
    return sorted([*cell.glob("requests-*.jsonl"), *cell.glob("requests-*.jsonl.gz")])


# what `pack` gzips: the request records, the /metrics scrapes (SGLang's run to ~20 KB each), the
# server logs, the telemetry and Locust's HTML view (~1 MB each, mostly its bundled script); readers take
# either form (record_files, read_run_text)
PACKED = ("requests-*.jsonl", "metrics-*.prom", SERVER_LOG, "telemetry.jsonl", "locust.html")


def read_records(directory: str | Path) -> list[RequestRecord]:
    """Every record of a cell directory; a malformed line is an error naming file and line."""
    out = []
    for path in record_files(Path(directory)):  # plain, or packed by `ddbench pack`
        for n, line in enumerate((read_run_text(path) or "").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append(RequestRecord.model_validate_json(line))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not a request record: {str(e).splitlines()[0]}") from None
    return out


def read_run_text(path: Path, errors: str = "strict") -> str | None:
    """A run file's text: its packed form path + '.gz' followed by `path` itself (a run resumed after it
    was packed has both: the packed part is the older), or either alone; None when it is in neither form."""
    parts = []
    for p in (path.with_name(path.name + ".gz"), path):
        if p.is_file():
            data = p.read_bytes()
            try:
                parts.append(gzip.decompress(data) if p.suffix == ".gz" else data)
            except (OSError, EOFError, zlib.error) as e:   # a copy cut short: name the file, as a bad line does
                raise ValueError(f"{p}: not a whole gzip file (truncated or corrupt): {e}") from None
    return b"".join(parts).decode(errors=errors) if parts else None


def pack(run: RunDir) -> tuple[int, int]:
    """Gzip a finished run's bulky text files in place (deterministic bytes); return (bytes before, after).

    Packed, a GPU run fits beside the models in a commit, and the tree still leaves room in a
    device call for the bundles.
    """
    before = after = 0
    for f in sorted(p for pattern in PACKED for p in run.path.rglob(pattern)):  # retired attempts too
        data = f.read_bytes()
        gz = f.with_name(f.name + ".gz")
        if gz.is_file():  # packed before, then resumed: the server log of the first slice comes first
            data = gzip.decompress(gz.read_bytes()) + data
        packed = gzip.compress(data, compresslevel=9, mtime=0)
        write_bytes_atomic(gz, packed)
        f.unlink()
        before, after = before + len(data), after + len(packed)
    return before, after


def cell_name(concurrency: int, repetition: int) -> str:
    return f"c{concurrency}-r{repetition}"


def parse_cell_name(name: str) -> tuple[int, int]:
    m = re.fullmatch(r"c(\d+)-r(\d+)", name)
    if not m:
        raise ValueError(f"'{name}' is not a cell directory name (c<C>-r<R>)")
    return int(m.group(1)), int(m.group(2))


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class RunDir:
    path: Path

    @classmethod
    def create(cls, profile_name: str, root: Path = RESULTS_ROOT, run_id: str | None = None) -> RunDir:
        """A new run directory; an existing one is never reused or overwritten."""
        path = root / profile_name / (run_id or new_run_id())
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
        except FileExistsError:
            raise FileExistsError(f"{path}: a run with this id exists; runs are never overwritten") from None
        return cls(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> RunDir:
        p = Path(path)
        if not (p / MANIFEST).is_file():
            raise FileNotFoundError(f"{p}: not a run directory (no {MANIFEST})")
        return cls(p)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def manifest(self) -> dict:
        return read_json(self.manifest_path)

    def arm_dir(self, arm: str) -> Path:
        return self.path / arm

    def cell_dir(self, arm: str, concurrency: int, repetition: int) -> Path:
        return self.arm_dir(arm) / cell_name(concurrency, repetition)

    def cells(self):
        """(arm, concurrency, repetition, directory) of every cell present on disk."""
        for arm in sorted(p for p in self.path.iterdir() if p.is_dir() and p.name not in (TABLES, STALE)):
            for cell in sorted(arm.iterdir()):
                if cell.is_dir() and re.fullmatch(r"c\d+-r\d+", cell.name):
                    c, r = parse_cell_name(cell.name)
                    yield arm.name, c, r, cell

    @property
    def tables(self) -> Path:
        return self.path / TABLES

    def set_aside(self) -> list[Path]:
        """Move the tables and report.pdf out of the run's way when analysis of its data failed: made from the
        data as it was, they no longer describe it. Kept, not deleted, under stale/; returns where they went."""
        moved = []
        for p in (self.tables, self.report):
            if p.exists():
                (self.path / STALE).mkdir(exist_ok=True)
                dest = self.path / STALE / p.name
                shutil.rmtree(dest) if dest.is_dir() else dest.unlink(missing_ok=True)
                moved.append(p.rename(dest))
        return moved

    @property
    def report(self) -> Path:
        return self.path / REPORT
