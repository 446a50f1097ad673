"""The report package's modules import each other in one direction only: no circle (report/figures.py and
report/triage.py used to import each other; the triage figure now lives with the other figures)."""

import ast
from pathlib import Path

import report

PACKAGE = Path(report.__file__).parent


def _imports(path: Path) -> set[str]:
    """The report modules a file imports, at module level or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "report":
                out |= {f"report.{a.name}" for a in node.names}
            elif node.module.startswith("report."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("report.")}
    return out


def graph() -> dict[str, set[str]]:
    mods = {f"report.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return {m: _imports(p) & set(mods) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(g.get(m, ())):
            if state.get(n) == "open":
                found.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    return found


def test_the_report_package_has_no_import_circle():
    assert cycles(graph()) == []


def test_the_finder_finds_a_planted_circle():
    assert cycles({"report.a": {"report.b"}, "report.b": {"report.a"}}) == [["report.a", "report.b", "report.a"]]


def test_the_triage_figure_has_one_home():
    g = graph()
    assert "report.figures" not in g["report.triage"] and "report.triage" not in g["report.figures"]
