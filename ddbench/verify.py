"""`ddbench verify RUN_DIR`: re-run a committed run's C=1 cells here and compare.

The CPU fp32 engine is deterministic, so per arm and per prompt the output text and tau must
be identical to the committed run's; any difference is reported by arm and prompt and makes
the exit code non-zero. At T>0 too: every request carries its sampling seed (recorded), and a
request at C=1 draws from its own generator alone. Throughput is compared as a ratio and
reported, never asserted: it depends on the machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddbench.core import formulas
from ddbench.core.manifest import finish_run, start_run
from ddbench.core.profile import Profile
from ddbench.core.results import RESULTS_ROOT, RunDir, cell_name
from ddbench.preflight import problems
from ddbench.reproduce import EXIT_INTERRUPTED, console, sweep

EXIT_DIFFERENT = 3


class Unseeded(ValueError):
    pass


def measured(cell_dir: Path) -> dict[str, tuple[str, float | None]]:
    """prompt id -> (output text, tau) of the measured requests of a cell (first one per prompt)."""
    from loadtests.recorder import read_records

    out: dict[str, tuple[str, float | None]] = {}
    for r in sorted(read_records(cell_dir), key=lambda r: r.send_ns):
        if r.warmup or not r.ok or r.prompt_id in out:
            continue
        if r.temperature > 0 and r.seed is None:
            raise Unseeded(f"{cell_dir}: request {r.request_id} sampled at T={r.temperature:g} without a "
                           "recorded seed (a run from before seeds were recorded): it cannot be re-run exactly")
        text = "".join(c.text for c in r.chunks)
        steps = (r.spec or {}).get("spec_verify_ct")
        tau = r.usage.completion_tokens / steps if r.usage and steps else None
        out[r.prompt_id] = (text, tau)
    return out


def throughput(cell_dir: Path) -> float | None:
    import json

    from loadtests.recorder import read_records

    status = json.loads((cell_dir / "status.json").read_text())
    start, end = status.get("window_start_ns"), status.get("window_end_ns")
    if not start or not end or end <= start:
        return None
    tokens = sum(r.usage.completion_tokens for r in read_records(cell_dir)
                 if not r.warmup and r.ok and r.usage and r.end_ns and formulas.inside(r.end_ns, start, end))
    return formulas.throughput(tokens, formulas.window_s(start, end))


def compare(old: RunDir, new: RunDir, arms: list[str]) -> list[str]:
    diffs = []
    for arm in arms:
        a, b = old.cell_dir(arm, 1, 1), new.cell_dir(arm, 1, 1)
        try:
            before, after = measured(a), measured(b)
        except Unseeded as e:
            diffs.append(f"{arm}: {e}")
            continue
        # a duration-bound cell measures as many prompts as the machine's speed allows: the
        # prompts both runs measured are compared; a run that shares none with the other is a fault
        both = sorted(set(before) & set(after))
        if not both:
            diffs.append(f"{arm}: no prompt was measured in both runs")
        for pid in both:
            (t0, tau0), (t1, tau1) = before[pid], after[pid]
            if t0 != t1:
                at = next((i for i, (x, y) in enumerate(zip(t0, t1, strict=False)) if x != y), min(len(t0), len(t1)))
                diffs.append(f"{arm} / {pid}: output differs from character {at}: "
                             f"{t0[at:at + 30]!r} vs {t1[at:at + 30]!r}")
            if tau0 != tau1:
                diffs.append(f"{arm} / {pid}: tau {tau0} vs {tau1}")
        x, y = throughput(a), throughput(b)
        ratio = f"{y / x:.2f}x" if x and y else "n/a"
        only = len(set(before) ^ set(after))
        print(f"{arm:>16}: {len(both)} prompts compared ({only} measured in one run only), "
              f"throughput here / committed = {ratio}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ddbench verify", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--results-root", default=str(RESULTS_ROOT), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    old = RunDir.open(a.run_dir)
    committed = Profile.model_validate(old.manifest()["profile"])
    if 1 not in committed.load.concurrency:
        console.print(f"verify: {old.path} has no C=1 cells to re-run", highlight=False)
        return 1
    load = committed.load.model_copy(update={"concurrency": [1], "repetitions": 1})
    profile = committed.model_copy(update={"load": load})
    issues = problems(profile, report=False)
    if issues:
        console.print("verify: cannot start:\n" + "\n".join(f"  - {p}" for p in issues), highlight=False)
        return 1
    new = RunDir.create(profile.name, root=Path(a.results_root))
    start_run(profile, f"verify of {old.path}", new)
    try:
        sweep(profile, new)
    except KeyboardInterrupt:
        finish_run(new, interrupted=True)
        return EXIT_INTERRUPTED
    finish_run(new, interrupted=False, verify_of=str(old.path))
    arms = [arm.id for arm in profile.measured_arms() if (old.cell_dir(arm.id, 1, 1)).is_dir()]
    missing = [arm.id for arm in profile.measured_arms() if arm.id not in arms]
    diffs = compare(old, new, arms) + [f"{m}: no committed {cell_name(1, 1)} cell" for m in missing]
    for d in diffs:
        print(f"DIFFERENT  {d}")
    print(f"verify: {'identical' if not diffs else f'{len(diffs)} difference(s)'}; re-run in {new.path}")
    return EXIT_DIFFERENT if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
