"""Lossless check at temperature 0: speculation must not change the output.

Outputs are compared as streamed text (records carry token ids only where the server returned
them, and none made before they were recorded): per request, exact match against the ar arm's
output for the same prompt, and the length of the shared prefix in characters. analysis.triage
compares tokens and judges each difference."""

from __future__ import annotations

import os

import pandas as pd

# at T>0 outputs differ by design: the law of the sampled tokens is tested offline (analysis.sampling_law)
T_ONLY = "every arm samples at temperature > 0: outputs may differ by design"
COLUMNS = ["arm", "compared", "exact", "match_rate", "prefix_chars_mean", "prefix_fraction_mean",
           "prompts", "mismatched_prompts", "first_mismatches"]


def lossless(run_profile, req: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Per arm measured at T=0: how many outputs equal ar's. Returns (table, why not applicable)."""
    greedy = greedy_arms(run_profile)
    if not greedy:
        return pd.DataFrame(columns=COLUMNS), T_ONLY
    ar = [a.id for a in greedy if a.kind == "ar"]
    if not ar:
        return pd.DataFrame(columns=COLUMNS), "the profile has no ar arm to compare against"
    ok = req[req["ok"].to_numpy(dtype=bool)]
    ok = ok[ok["arm"].isin([a.id for a in greedy])]
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS), "no request finished"
    if (ok["temperature"] != 0).any():
        return pd.DataFrame(columns=COLUMNS), "sampling at temperature > 0: outputs may differ by design"
    ref_rows = ok[ok["arm"] == ar[0]]
    # the reference is ar's most frequent output for a prompt; ar's own row shows if it varies
    reference = (ref_rows.groupby("prompt_id", observed=True)["text"]
                 .agg(lambda s: s.value_counts().index[0]).to_dict())
    rows = []
    for arm in greedy:
        mine = ok[(ok["arm"] == arm.id) & ok["prompt_id"].isin(list(reference))]
        if mine.empty:
            continue
        refs = mine["prompt_id"].astype(str).map(reference)
        texts = mine["text"].astype(str).tolist()
        exact = [a == b for a, b in zip(texts, refs, strict=True)]
        prefix = [len(b) if e else len(os.path.commonprefix([a, b]))
                  for a, b, e in zip(texts, refs, exact, strict=True)]
        frac = [p / max(len(b), 1) for p, b in zip(prefix, refs, strict=True)]
        bad = sorted({str(p) for p, e in zip(mine["prompt_id"], exact, strict=True) if not e})
        rows.append({"arm": arm.id, "compared": len(texts), "exact": sum(exact), "match_rate": sum(exact) / len(texts),
                     "prefix_chars_mean": sum(prefix) / len(prefix), "prefix_fraction_mean": sum(frac) / len(frac),
                     "prompts": mine["prompt_id"].nunique(), "mismatched_prompts": len(bad),
                     "first_mismatches": ", ".join(bad[:5])})
    return pd.DataFrame(rows, columns=COLUMNS), None


def greedy_arms(profile) -> list:
    """The (measured) arms sampled at T=0, whose outputs must equal ar's token for token."""
    return [a for a in profile.arms if profile.sampling_for(a.id).greedy]
