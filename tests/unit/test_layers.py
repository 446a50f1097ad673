"""Imports run one way, down the floors (docs/architecture.md).

    ground         ddbench.core: the profile schema, results layout, records, manifest, formulas
    stages         containers, loadtests, analysis, report, refengine
    orchestration  ddbench (all but ddbench.core): the CLI, reproduce, init, verify

The ground imports no stage and no orchestration; no stage imports the orchestration; a stage imports
another stage only along an edge named in ALLOWED, with its reason. Every import counts, function-level
and TYPE_CHECKING ones included (the import graph of test_import_graph).
"""

from __future__ import annotations

import pytest
from test_import_graph import graph

STAGES = ("containers", "loadtests", "analysis", "report", "refengine")

# (importer, imported): a module or package on each side, and why the edge exists
ALLOWED = {
    ("report", "analysis"): "the report renders an analysis: its tables, checks and recommendation",
    ("analysis", "refengine"): "triage, headroom and the sampling law re-run the shipped pair on the reference engine",
    ("loadtests", "refengine.tokenizer"): "random-token prompts and the shared-prefix set are sized in the served "
                                          "pair's tokens, with the tokenizer the reference engine loads",
}


def floor(module: str) -> str:
    """'ground', 'orchestration' or the stage's name."""
    top = module.split(".")[0]
    if top == "ddbench":
        return "ground" if module == "ddbench.core" or module.startswith("ddbench.core.") else "orchestration"
    return top


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(g: dict[str, set[str]]) -> list[str]:
    out = []
    for m, deps in sorted(g.items()):
        for d in sorted(deps):
            a, b = floor(m), floor(d)
            if a == b or b == "ground" or a == "orchestration":
                continue
            if a == "ground":
                out.append(f"{m} -> {d}: the ground imports the {b}")
            elif b == "orchestration":
                out.append(f"{m} -> {d}: a stage imports the orchestration")
            elif not any(_under(m, x) and _under(d, y) for x, y in ALLOWED):
                out.append(f"{m} -> {d}: stage {a} imports stage {b} along no allowed edge")
    return out


def test_floors_are_told_apart():
    assert [floor(m) for m in ("ddbench.core.profile", "ddbench.core", "ddbench.cli", "ddbench", "analysis.analyze",
                               "refengine.engine")] == ["ground", "ground", "orchestration", "orchestration",
                                                        "analysis", "refengine"]


def test_a_planted_upward_import_is_named():
    g = {"ddbench.core.results": {"loadtests.cell"}, "analysis.analyze": {"ddbench.reproduce", "ddbench.core.results"},
         "report.build": {"containers.bringup"}, "ddbench.cli": {"containers.bringup", "report.build"},
         "loadtests.liveweb": {"containers.bringup"}}
    assert violations(g) == [
        "analysis.analyze -> ddbench.reproduce: a stage imports the orchestration",
        "ddbench.core.results -> loadtests.cell: the ground imports the loadtests",
        "loadtests.liveweb -> containers.bringup: stage loadtests imports stage containers along no allowed edge",
        "report.build -> containers.bringup: stage report imports stage containers along no allowed edge",
    ]


def test_imports_run_down_the_floors():
    found = violations(graph())
    if found:
        pytest.fail("imports against the floors (docs/architecture.md):\n" + "\n".join("  " + v for v in found))


def test_every_allowed_edge_is_used():
    # an edge no import takes any more is a stale allowance: remove it, and its reason from the docs
    g = graph()
    unused = [edge for edge in ALLOWED
              if not any(_under(m, edge[0]) and _under(d, edge[1]) for m, deps in g.items() for d in deps)]
    assert unused == []
