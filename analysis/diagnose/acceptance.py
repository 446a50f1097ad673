"""Acceptance per draft position: how deep each verify step's accepted path reached, and the chance that draft
position i is accepted once position i-1 was.

A speculative arm's records carry, per request, its verify steps counted by the depth of the deepest accepted
node (the reference engine's spec_accepted_depth_histogram; SGLang's spec_correct_drafts_histogram where its
step-stats patch records one: for a chain or a linear block, accepted drafts = depth). Summed over an arm's
measured requests at one C, s_d steps stopped at depth d. A step reaches position i when its depth is at
least i - 1, so position i's conditional acceptance is S_i / S_(i-1), with S_i = sum over d >= i of s_d.
The mean depth plus one is the tokens a step accepts; tau differs from it a little, as it also counts the
prefill's token and loses what max_tokens cuts from a request's last step. Where the curve falls at a
block's last positions, a longer block would not pay; beside the chain's, a tree's curve shows what its
width buys at each depth. AR, whose steps all stop at depth 0, has no curve.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.read.ingest import dense

COLUMNS = ["arm", "concurrency", "position", "steps_stopped", "share_stopped", "reached", "accepted", "p_accept",
           "source"]
SOURCES = ("spec_accepted_depth_histogram", "spec_correct_drafts_histogram")


def steps_by_depth(req: pd.DataFrame) -> tuple[np.ndarray, str] | None:
    """The summed histogram of verify steps by accepted depth over these requests, and its column; None: none."""
    for col in SOURCES:
        if col not in req:
            continue
        h, present = dense(req[col])
        if present.any() and h[present].sum() > 0:
            return h[present].sum(axis=0), col
    return None


def by_position(req: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, C) with histograms: one row per position 0..deepest (position 0: steps that accepted nothing)."""
    if req.empty:
        return pd.DataFrame(columns=COLUMNS)
    measured = req[req["ok"].astype(bool) & ~req["warmup"].astype(bool)]
    rows = []
    for (arm, c), g in measured.groupby(["arm", "concurrency"], observed=True, sort=True):
        found = steps_by_depth(g)
        if found is None or len(found[0]) < 2:
            continue
        s, source = found
        reach = np.cumsum(s[::-1])[::-1]          # reach[i]: steps whose depth is at least i
        total = reach[0]
        for i, stopped in enumerate(s):
            before = reach[i - 1] if i else total
            rows.append({"arm": str(arm), "concurrency": int(c), "position": i, "steps_stopped": int(stopped),
                         "share_stopped": stopped / total, "reached": int(before), "accepted": int(reach[i]),
                         "p_accept": reach[i] / before if i and before else float("nan"), "source": source})
    return pd.DataFrame(rows, columns=COLUMNS)

