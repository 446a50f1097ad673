"""Per-process record files: requests-<worker>.jsonl in the cell directory, one line per request.

Each Locust process appends to its own file and flushes every record, so a crash loses only
the requests in flight. Lines pass the secret redaction of ddbench.core.results like every other
write into a results directory.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from ddbench.core.records import RequestRecord
from ddbench.core.results import REDACTED, read_records, secret_values  # noqa: F401  (read_records: its readers import it here)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def record_path(directory: Path, worker: str) -> Path:
    return Path(directory) / f"requests-{re.sub(r'[^A-Za-z0-9._-]', '-', worker)}.jsonl"


class RecordFile:
    def __init__(self, directory: str | Path, worker: str):
        self.path = record_path(Path(directory), worker)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._secrets = secret_values()  # looked up once: the environment does not change mid-cell
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, record: RequestRecord | str) -> None:
        line = record if isinstance(record, str) else record.model_dump_json()
        for s in self._secrets:
            line = line.replace(s, REDACTED)
        self._f.write(line + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()
