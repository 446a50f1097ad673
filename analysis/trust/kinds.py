"""What a trust check is, typed: its kind (label, threshold, whether a failure bars the arm it names) and its
scope (the run, an arm, an arm at C, one cell, a ratio, one side of an arm's requests) as fields. The checks table
(tables/checks) carries both as columns, so that the recommendation, the exit status and page 1 read fields, never
the printed text. Light on purpose: the report imports it without the analysis.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from enum import Enum

import pandas as pd

PASS, FAIL, NA = "pass", "fail", "n/a"
MIN_REQUESTS = 20          # below this even a median is not printed
MAX_ERROR_RATE = 0.01
OUTPUT_TOLERANCE = 0.10
MAX_CLIENT_CPU = 90.0
TAU_TOLERANCE = 0.05
LOG_ROUNDING = 0.011       # DDTree log averages carry two decimals each
CLOCK_SPREAD = 0.10


class Kind(Enum):
    """Every kind of check. A failure bars the arm it names where it says the arm's measurement is wrong: its
    outputs, its cells, its shape or its counts (a server whose τ disagrees with the client's, or whose outputs
    are not the lengths asked for, is miscounted or misconfigured). A condition of the host (drift, other work,
    a GPU out of its band) warns and bars nothing. The member's name is the key in tables/checks."""

    PROFILE_DIGEST = ("profile digest", False)
    OVERLAY = ("DDTree build's DFLASH = stock DFLASH (overlay check)", False)
    COMMIT_STEPS = ("commit = depth + 1 (steps diagnostic)", False)
    MIN_REQUESTS = ("minimum requests", True, MIN_REQUESTS)
    DRIFT = ("drift below the smallest effect claimed", False)
    STATIONARY = ("ratio stationary over the run", False)
    GPU_BAND = ("GPU clock and power inside the run's band", False)
    WARMUP_STABLE = ("warm-up stable", False)
    HOST_QUIET = ("host quiet (no other work beside the sweep)", False)
    CELL_FINISHED = ("cell finished", True)
    ERRORS = (f"errors <= {MAX_ERROR_RATE:.0%}", True, MAX_ERROR_RATE)
    CLIENT_CPU = (f"client CPU < {MAX_CLIENT_CPU:.0f}%", False, MAX_CLIENT_CPU)
    WARMUP_EXCLUDED = ("warmup excluded", False)
    TAU = ("tau server vs client", True, TAU_TOLERANCE)
    CLEAN_START = ("cache flushed or server restarted", False)
    GPU_STABLE = ("GPU clocks and temperature stable", False, CLOCK_SPREAD)
    OUTPUT_LENGTH = (f"output length within {OUTPUT_TOLERANCE:.0%} of ar", False, OUTPUT_TOLERANCE)
    REQUESTED_LENGTHS = ("requested lengths honoured", True)
    COMMIT_REQUESTS = ("commit = depth + 1 (requests)", True)
    COMMIT_LOG = ("commit = depth + 1 (server log)", True, LOG_ROUNDING)
    HISTOGRAMS = ("spec histograms sum to verify steps", False)
    LOSSLESS = ("lossless at T=0", True)
    CHAIN_EQUALS_LINEAR = ("chain equals linear at T=0", False)
    CHAIN_STEPS = ("chain takes linear's verify steps", False)
    SERVER_MATCHES = ("server matches its arm", True)

    def __init__(self, label: str, bars: bool, threshold: float | None = None):
        self.label, self.bars, self.threshold = label, bars, threshold


# commit length against accepted depth, from each of its sources
COMMIT = (Kind.COMMIT_REQUESTS, Kind.COMMIT_LOG, Kind.COMMIT_STEPS)


@dataclass(frozen=True)
class Scope:
    """What a check covers: the run (no field set), an arm, an arm at C, one cell (a repetition too), a ratio
    (arm over baseline at C), or one part (input, output) of an arm's requests."""
    arm: str | None = None
    concurrency: int | None = None
    repetition: int | None = None
    baseline: str | None = None
    part: str | None = None

    def __str__(self) -> str:
        if self.arm is None:
            return "run"
        text = self.arm + (f"/{self.baseline}" if self.baseline else "")
        text += f" C={self.concurrency}" if self.concurrency is not None else ""
        text += f" rep {self.repetition}" if self.repetition is not None else ""
        return text + (f" {self.part}" if self.part else "")


RUN = Scope()


@dataclass
class Check:
    kind: Kind
    scope: Scope
    status: str
    evidence: str


SCOPE_COLUMNS = [f.name for f in fields(Scope)]
COLUMNS = ["check", "key", "bars", "scope", *SCOPE_COLUMNS, "status", "evidence"]


def frame(checks: list[Check]) -> pd.DataFrame:
    """The checks table: the kind's label, key and bars; the scope as text and as fields; status, evidence."""
    rows = [(c.kind.label, c.kind.name, c.kind.bars, str(c.scope), *astuple(c.scope), c.status, c.evidence)
            for c in checks]
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("concurrency", "repetition"):
        df[col] = df[col].astype("Int64")
    return df


def barring(checks: pd.DataFrame) -> pd.DataFrame:
    """The failed checks that bar the arm they name from the recommendation."""
    if checks is None or checks.empty:
        return pd.DataFrame(columns=COLUMNS)
    return checks[(checks["status"] == FAIL) & checks["bars"].astype(bool)]


def of(checks: pd.DataFrame, *kinds: Kind) -> pd.DataFrame:
    """The rows of the given kinds."""
    if checks is None or checks.empty:
        return pd.DataFrame(columns=COLUMNS)
    return checks[checks["key"].isin([k.name for k in kinds])]
