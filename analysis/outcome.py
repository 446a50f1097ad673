"""What the analysis of one run holds (Analysis), and the cross-check against another run it may carry.

One home for these result types: analysis.analyze builds an Analysis, analysis.trust.crosscheck reads two of
them and builds a CrossCheck, and the report reads both; none of them needs the others' code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis import triage
from analysis.read import ingest

TABLE_NAMES = ("crosscheck", "crosscheck_throughput", "crosscheck_sides", "crosscheck_notes", "crosscheck_verdicts")


@dataclass
class CrossCheck:
    sides: pd.DataFrame          # two rows, 'this' and 'other': which backend, version, run
    arms: pd.DataFrame           # per arm present in both: τ at C=1, output agreement at C=1
    throughput: pd.DataFrame     # per arm and concurrency both runs have
    notes: list[str] = field(default_factory=list)
    # between a twin and the pair it was built from: which side is the twin ('this' or 'other'), and each
    # tree's verdict (the tree-gain decomposition) on both sides at every C both ran
    twin: str | None = None
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"crosscheck": self.arms, "crosscheck_throughput": self.throughput, "crosscheck_sides": self.sides,
                "crosscheck_notes": pd.DataFrame({"note": self.notes}, dtype=object),
                "crosscheck_verdicts": self.verdicts}

    def label(self, side: str) -> str:
        return str(self.sides.set_index("side").loc[side, "label"])


@dataclass
class Analysis:
    run: ingest.Run
    requests: pd.DataFrame
    cells: pd.DataFrame
    summary: pd.DataFrame          # per (arm, C) across repetitions
    speedups: pd.DataFrame
    decomposition: pd.DataFrame
    categories: pd.DataFrame
    lossless: pd.DataFrame
    lossless_note: str | None
    checks: pd.DataFrame
    drift: pd.DataFrame = field(default_factory=pd.DataFrame)      # the run's drift rate (analysis.trust.stability)
    gpu_band: pd.DataFrame = field(default_factory=pd.DataFrame)   # per cell: SM clock and power vs the run's band
    host_cpu: pd.DataFrame = field(default_factory=pd.DataFrame)   # per cell: other work on the host, in cores
    stage_cost: pd.DataFrame = field(default_factory=pd.DataFrame)  # SGLang DDTree's step split (a diagnostic)
    between_runs: pd.DataFrame = field(default_factory=pd.DataFrame)  # each ratio against this plan's other runs
    stationarity: pd.DataFrame = field(default_factory=pd.DataFrame)  # each ratio's step or trend over the run
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)     # each ratio from the rounds (estimate.rounds)
    gpu_time: pd.DataFrame = field(default_factory=pd.DataFrame)   # GPU vs wall time per token (diagnose.gpu_time)
    rates: pd.DataFrame = field(default_factory=pd.DataFrame)        # a rate sweep across its rates (estimate.rates)
    rate_wins: pd.DataFrame = field(default_factory=pd.DataFrame)    # up to which rate each arm beats AR
    host_profile: pd.DataFrame = field(default_factory=pd.DataFrame)   # GPU idle time by frame (diagnose.host_profile)
    recommendation: pd.DataFrame = field(default_factory=pd.DataFrame)  # what to deploy (analysis.recommend)
    by_position: pd.DataFrame = field(default_factory=pd.DataFrame)  # acceptance per draft position (diagnose)
    goodput: pd.DataFrame = field(default_factory=pd.DataFrame)       # per cell, under the profile's slo
    slo_text: str = ""      # the SLO in ms as goodput applied it, and how it was set (estimate.goodput.resolve)
    goodput_ratios: pd.DataFrame = field(default_factory=pd.DataFrame)  # X over Y, paired by repetition
    warmups: pd.DataFrame = field(default_factory=pd.DataFrame)     # warm-ups until stable (trust.stability)
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)       # every two arms' ratio (estimate.standings)
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)     # the profile's targets, met or open
    boots: dict = field(default_factory=dict)
    bootstrap: int = 0       # resamples of the pooled request bootstrap (0: nothing resampled)
    refusals: list[str] = field(default_factory=list)
    seconds: float = 0.0
    crosscheck: CrossCheck | None = None   # against the run named by compare_with (analysis.trust.crosscheck)
    triage: triage.Triage | None = None    # T=0 divergences: numerical ties or failures (analysis.triage)

    @property
    def kinds(self) -> dict[str, str]:
        return {a.id: a.kind for a in self.run.profile.arms}
