"""No import circles between the project's modules.

Every .py file of the project's packages (pyproject.toml's packages.find) is parsed with ast, and every
import in it counts: top-level, inside a function (a lazy import is still a circle), and under
`if TYPE_CHECKING:`. An import of a module's name (`from analysis import checks`) is an edge to that
module; an import of a name defined in a package's __init__ is an edge to the package.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def packages() -> list[str]:
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in include})


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the project's packages."""
    out = {}
    for pkg in packages():
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The project module that `name` is, or is defined in (its longest dotted prefix that is a module)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules that `module` imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_owner(a.name, mods) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for a in node.names:
                found.add(_owner(f"{source}.{a.name}", mods) if f"{source}.{a.name}" in mods else _owner(source, mods))
    found.discard(None)
    found.discard(module)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, mods) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one circle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return [_circle(g, set(c)) for c in comps]


def _circle(g: dict[str, set[str]], comp: set[str]) -> list[str]:
    """One circle inside a component, start module repeated at the end: a -> b -> ... -> a."""
    start = min(comp)
    # breadth-first from start's successors back to start, inside the component
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def test_the_graph_sees_the_project():
    g = graph()
    assert {"analysis.analyze", "ddbench.core.profile", "loadtests.__main__", "report.build", "refengine.engine",
            "ddbench.sweep"} <= set(g)
    # a package-relative import and a function-level import are both edges
    assert "analysis.trust.crosscheck" in g["analysis.analyze"]


def test_cycles_are_found():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_count(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from pkg import other\n")
    mods = {"pkg.m": f, "pkg.other": f, "pkg": f}
    assert imports("pkg.m", f, mods) == {"pkg.other"}


def test_no_import_circles():
    found = cycles(graph())
    if found:
        pytest.fail("import circles (give the shared concept one home):\n" +
                    "\n".join("  " + " -> ".join(c) for c in found))


def test_the_report_imports_no_torch():
    """Rendering a report reads tables: the model code (torch, the reference engine) stays out of its imports."""
    import subprocess
    import sys

    code = ("import sys, report.build, report.__main__; "
            "print(sorted(m for m in ('torch', 'refengine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
