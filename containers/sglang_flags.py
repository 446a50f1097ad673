"""Check generated SGLang command lines against SGLang's own flag set, at the pinned version.

SGLang's parser cannot be imported on a CPU without triton (about 1 GB) and a matching
torchvision, so its flag definitions are read instead: `ast` over server_args.py (the
`A[T, Arg(...)]` dataclass fields that add_cli_args_from_dataclass turns into flags, and the
explicit parser.add_argument calls in ServerArgs.add_cli_args), argparse_actions.py (which
custom actions take no value) and spec_info.py (the builtin speculative algorithms). The
result is a flag table (containers/sglang/flags/*.json, data only, no SGLang code), and an
argparse parser rebuilt from it with allow_abbrev on, as SGLang's is, so an unknown flag, a
value outside its choices, a non-integer int or an ambiguous prefix (e.g. --cuda-graph-max-bs
on 0.5.15) fails here instead of in the container.

    python -m containers.sglang_flags extract --version 0.5.15          # from the PyPI wheel
    python -m containers.sglang_flags extract-git REPO_DIR COMMIT --name NAME
    python -m containers.sglang_flags extract-git REPO_DIR --pin     # the pinned DDTree fork's table
    python -m containers.sglang_flags check PROFILE...
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from containers.launch import sglang_command
from ddbench.core.profile import Profile, ProfileError, load_profile

FLAGS_DIR = Path(__file__).resolve().parent / "sglang" / "flags"
DEFAULT_VERSION = "0.5.15"
# the retired DDTree PR's additions over the release: what a recorded run of it is checked against
DDTREE_OVERLAY = "ddtree-pr29907"
ZERO_ARG_ACTIONS = {"store_true", "store_false", "store_const", "count", "append_const", "help", "version"}
SERVER_ARGS = "sglang/srt/server_args.py"
ACTIONS = "sglang/srt/arg_groups/argparse_actions.py"
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
FIELDS_DIR = "sglang/srt/arg_groups/fields/"
CHOICES = "sglang/srt/arg_groups/choices.py"


class FlagError(ValueError):
    """A command line SGLang would reject; the message names the flag."""


# ---------------------------------------------------------------- reading SGLang's definitions


def _literal(node: ast.AST, consts: dict[str, object]):
    """A constant expression's value, resolving module-level names; None when not static."""
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, consts), _literal(node.right, consts)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return sorted(value, key=str) if isinstance(value, set) else value


def module_constants(tree: ast.Module) -> dict[str, object]:
    consts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal(node.value, consts)
            if isinstance(value, (list, tuple, str, int, float)):
                consts[node.targets[0].id] = list(value) if isinstance(value, tuple) else value
    return consts


def zero_arg_actions(actions_src: str | None) -> set[str]:
    """Custom argparse.Action classes whose __init__ defaults nargs to 0 (deprecated switches)."""
    out = set(ZERO_ARG_ACTIONS)
    if not actions_src:
        return out
    for node in ast.parse(actions_src).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args.args[-len(item.args.defaults):] if item.args.defaults else []
                for arg, default in zip(args, item.args.defaults, strict=True):
                    if arg.arg == "nargs" and isinstance(default, ast.Constant) and default.value == 0:
                        out.add(node.name)
    return out


def _name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _flag(names: list[str], *, nargs, choices, kind: str | None, required: bool = False) -> dict:
    return {"names": names, "nargs": nargs, "choices": [str(c) for c in choices] if choices else None,
            "type": kind, "required": required}


def _type_name(node: ast.AST | None) -> str | None:
    name = _name(node)
    return name if name in ("int", "float", "str") else None


def _add_argument(call: ast.Call, consts: dict, zero: set[str]) -> dict | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not all(n.startswith("-") for n in names):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = _name(kw.get("action"))
    nargs = _literal(kw["nargs"], consts) if "nargs" in kw else None
    if action == "BooleanOptionalAction":
        negated = [f"--no-{n[2:]}" for n in names if n.startswith("--")]
        return _flag(names + negated, nargs=0, choices=None, kind=None)
    if nargs is None:
        nargs = 0 if action in zero else 1
    choices = _literal(kw["choices"], consts) if "choices" in kw else None
    return _flag(names, nargs=nargs, choices=choices if isinstance(choices, list) else None,
                 kind=_type_name(kw.get("type")), required=_literal(kw.get("required"), consts) is True)


def _unwrap(node: ast.AST) -> tuple[ast.AST, bool]:
    """Optional[X] / X | None -> X."""
    if isinstance(node, ast.Subscript) and _name(node.value) == "Optional":
        return node.slice, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        if len(sides) == 1:
            return sides[0], True
    return node, False


def _field(node: ast.AnnAssign, consts: dict, zero: set[str]) -> dict | None:
    """One `name: A[T, "help" | Arg(...)] = default` field, as add_cli_args_from_dataclass sees it."""
    ann = node.annotation
    if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated")):
        return None
    parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    inner, meta = parts[0], parts[1:]
    arg = next((m for m in meta if isinstance(m, ast.Call) and _name(m.func) == "Arg"), None)
    if arg is None and not any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
        return None
    kw = {k.arg: k.value for k in arg.keywords if k.arg} if arg is not None else {}
    if _literal(kw.get("no_cli"), consts) is True:
        return None
    field = node.target.id
    names = [_literal(kw["cli_name"], consts) if "cli_name" in kw else "--" + field.replace("_", "-")]
    names += _literal(kw["aliases"], consts) or [] if "aliases" in kw else []
    choices = _literal(kw["choices"], consts) if "choices" in kw else None
    choices = choices if isinstance(choices, list) else None
    action_kwargs = _literal(kw["action_kwargs"], consts) if "action_kwargs" in kw else None
    nargs = _literal(kw["nargs"], consts) if "nargs" in kw else None
    if isinstance(action_kwargs, dict) and "nargs" in action_kwargs:
        nargs = action_kwargs["nargs"]
    if "action" in kw:
        action = _name(kw["action"])
        return _flag(names, nargs=nargs if nargs is not None else (0 if action in zero else 1),
                     choices=choices, kind=None)
    inner, _ = _unwrap(inner)
    head = _name(inner.value) if isinstance(inner, ast.Subscript) else _name(inner)
    if head == "Literal":
        values = _literal(inner.slice, consts)
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        kind = type(values[0]).__name__ if values and values[0] is not None else "str"
        return _flag(names, nargs=1 if nargs is None else nargs, choices=choices or values,
                     kind=kind if kind in ("int", "float", "str") else None)
    if head in ("List", "list") and "type_parser" not in kw:
        return _flag(names, nargs=nargs or "+", choices=choices, kind=None)
    if head == "bool":
        return _flag(names, nargs=0, choices=None, kind=None)
    required = node.value is None and _literal(kw.get("required"), consts) is not False
    kind = head if head in ("int", "float") and "type_parser" not in kw else None
    return _flag(names, nargs=1 if nargs is None else nargs, choices=choices, kind=kind, required=required)


def algorithms(spec_info_src: str | None) -> list[str]:
    """Builtin speculative algorithms: the members of enum SpeculativeAlgorithm, NONE excluded."""
    if not spec_info_src:
        return []
    for node in ast.walk(ast.parse(spec_info_src)):
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
            return [t.id for item in node.body if isinstance(item, ast.Assign)
                    for t in item.targets if isinstance(t, ast.Name) and t.id.isupper() and t.id != "NONE"]
    return []


def _namespace_fields(sources: list[str], consts: dict, zero: set[str]) -> list[dict]:
    """Fields of the namespace classes (those with _NS_PATH) that newer SGLang assembles ServerArgs from."""
    out = []
    for src in sources:
        tree = ast.parse(src)
        local = {**consts, **module_constants(tree)}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            names = {t.id for n in cls.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            if "_NS_PATH" in names:
                out += [f for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                        for f in [_field(n, local, zero)] if f]
    return out


def extract(server_args_src: str, actions_src: str | None = None, spec_info_src: str | None = None,
            field_srcs: list[str] = (), const_srcs: list[str] = ()) -> dict:
    """The flag table of one SGLang source tree (field_srcs: arg_groups/fields/*.py, where they exist)."""
    tree = ast.parse(server_args_src)
    consts = {k: v for src in const_srcs for k, v in module_constants(ast.parse(src)).items()}
    consts.update(module_constants(tree))
    zero = zero_arg_actions(actions_src)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None)
    if cls is None:
        raise FlagError("server_args.py has no class ServerArgs")
    add = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args"), None)
    if add is None:
        raise FlagError("ServerArgs has no add_cli_args")
    calls = [n for n in ast.walk(add) if isinstance(n, ast.Call)]
    flags = []
    if any(_name(c.func) == "add_cli_args_from_dataclass" for c in calls):
        # a field declared twice is one dataclass field, with the later annotation
        fields = {n.target.id: n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        flags += [f for n in fields.values() for f in [_field(n, consts, zero)] if f]
        flags += _namespace_fields(list(field_srcs), consts, zero)
    flags += [f for c in calls if _name(c.func) == "add_argument" for f in [_add_argument(c, consts, zero)] if f]
    return {"flags": flags, "speculative_algorithms": algorithms(spec_info_src)}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def extract_wheel(version: str, cache: Path | None = None) -> dict:
    """The table of sglang==version from its PyPI wheel (downloaded, read as a zip, never imported)."""
    with tempfile.TemporaryDirectory() as tmp:
        dest = cache or Path(tmp)
        wheels = sorted(dest.glob(f"sglang-{version}-*.whl"))
        if not wheels:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                   f"sglang=={version}", "--dest", str(dest)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise FlagError(f"pip download sglang=={version} failed:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
            wheels = sorted(dest.glob(f"sglang-{version}-*.whl"))
        wheel = wheels[0]
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            read = lambda p: z.read(p).decode() if p in names else None  # noqa: E731
            fields = [read(n) for n in sorted(names) if n.startswith(FIELDS_DIR) and n.endswith(".py")]
            table = extract(read(SERVER_ARGS), read(ACTIONS), read(SPEC_INFO), fields,
                            [c for c in [read(CHOICES)] if c])
            digest = _sha256(wheel.read_bytes())
    table["source"] = {"kind": "pypi", "package": f"sglang=={version}", "file": wheel.name, "sha256": digest}
    return table


def extract_git(repo: Path, commit: str) -> dict:
    """The table of an SGLang source tree at a commit of a local git repository."""
    def show(path: str) -> str | None:
        proc = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:python/{path}"], capture_output=True,
                              text=True)
        return proc.stdout if proc.returncode == 0 else None

    src = show(SERVER_ARGS)
    if src is None:
        raise FlagError(f"{repo}: no python/{SERVER_ARGS} at {commit}")
    table = extract(src, show(ACTIONS), show(SPEC_INFO))
    table["source"] = {"kind": "git", "commit": commit, "file": f"python/{SERVER_ARGS}",
                       "sha256": _sha256(src.encode())}
    return table


def extract_pin(repo: Path) -> dict:
    """The table of the one pin as it is built: its commit with the cherry-picks and ddbench's patches."""
    import tempfile

    from containers.offline.archive import BundleError
    from containers.offline.fork import checkout
    from containers.sglang_pin import pin

    p = pin()
    with tempfile.TemporaryDirectory(prefix="ddbench-flags-") as tmp:
        try:
            picks, patches = checkout(repo, p, Path(tmp) / "fork")
        except BundleError as e:
            raise FlagError(str(e)) from None
        table = extract_git(Path(tmp) / "fork", "HEAD")
        head = subprocess.run(["git", "-C", str(Path(tmp) / "fork"), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    table["source"].update(commit=p.commit, head=head, cherry_picks=[c["commit"] for c in picks],
                           patches=[{"file": q["file"], "sha256": q["sha256"]} for q in patches])
    return table


# ---------------------------------------------------------------- checking command lines


def load_table(name: str) -> dict:
    """A stored table; an overlay ({"base": ..., "add_flags": ..., "add_algorithms": ...}) is merged."""
    path = FLAGS_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in FLAGS_DIR.glob("*.json")))
        raise FlagError(f"no SGLang flag table '{name}' in {FLAGS_DIR} (have: {known}); make it with "
                        f"`python -m containers.sglang_flags extract --version ...`")
    table = json.loads(path.read_text())
    if "base" not in table:
        return table
    base = load_table(table["base"])
    return {"flags": base["flags"] + table.get("add_flags", []),
            "speculative_algorithms": base["speculative_algorithms"] + table.get("add_algorithms", []),
            "source": {"base": base.get("source"), "overlay": table.get("source")}}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print and exit; we want the message
        raise FlagError(message)


def parser(table: dict) -> argparse.ArgumentParser:
    """An argparse parser with SGLang's flags, arities and choices (allow_abbrev, as SGLang's)."""
    p = _Parser(prog="sglang.launch_server", add_help=False, allow_abbrev=True)
    for i, f in enumerate(table["flags"]):
        dest = f"f{i}"
        if f["nargs"] == 0:
            p.add_argument(*f["names"], dest=dest, action="store_true")
            continue
        kind = {"int": int, "float": float}.get(f["type"]) if not f["choices"] else str
        kw = dict(dest=dest, type=kind or str, required=f.get("required", False))
        if f["nargs"] != 1:
            kw["nargs"] = f["nargs"]
        if f["choices"]:
            kw["choices"] = f["choices"]
        p.add_argument(*f["names"], **kw)
    return p


def server_argv(argv: list[str]) -> list[str]:
    """The flags after `python -m sglang.launch_server` (or `sglang serve`)."""
    for i, a in enumerate(argv):
        if a == "sglang.launch_server" or (a == "serve" and i and argv[i - 1].endswith("sglang")):
            return argv[i + 1:]
    raise FlagError(f"not an SGLang launch command: {argv[:4]}")


def validate(argv: list[str], table: dict) -> None:
    """Raise FlagError when SGLang's parser would reject these flags, or an algorithm it does not know."""
    flags = server_argv(argv)
    ns = parser(table).parse_args(flags)
    algos = {a.upper() for a in table["speculative_algorithms"]}
    for i, f in enumerate(table["flags"]):
        if "--speculative-algorithm" in f["names"]:
            value = getattr(ns, f"f{i}")
            if value is not None and algos and value.upper() not in algos:
                raise FlagError(f"--speculative-algorithm {value}: not a registered algorithm "
                                f"(known: {', '.join(sorted(algos))})")


def table_for(profile: Profile, kind: str) -> str:
    """The flag table an arm's command meets: the pinned fork's for every arm of a backend.ddtree
    'fork' profile (they all run on it); otherwise the release's, and for DDTree arms the retired PR
    overlay's (recorded runs only: no build ddbench ships serves it)."""
    if profile.backend.ddtree == "fork":
        from containers.sglang_pin import pin

        return pin().flags_table
    version = profile.backend.version or DEFAULT_VERSION
    return DDTREE_OVERLAY if kind in ("chain", "tree") else f"sglang-{version}"


def check_profile(profile: Profile) -> list[str]:
    """Every arm's generated command line against the flags it will meet; one message per bad arm."""
    if profile.backend.kind != "sglang":
        return []
    problems = []
    for arm in profile.arms:
        name = table_for(profile, arm.kind)
        try:
            validate(sglang_command(profile, arm).argv, load_table(name))
        except FlagError as e:
            problems.append(f"arm '{arm.id}': SGLang ({name}) would reject its command line: {e}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m containers.sglang_flags", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="write flags/sglang-VERSION.json from the PyPI wheel")
    e.add_argument("--version", default=DEFAULT_VERSION)
    g = sub.add_parser("extract-git", help="write flags/NAME.json from a git checkout at a commit")
    g.add_argument("repo", type=Path)
    g.add_argument("commit", nargs="?")
    g.add_argument("--name")
    g.add_argument("--pin", action="store_true",
                   help="the commit and name of the one pin (containers/sglang/pin.toml): ddtree-fork-<sha8>")
    c = sub.add_parser("check", help="check every SGLang arm of profiles")
    c.add_argument("profiles", nargs="+")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            bad = 0
            for name in a.profiles:
                problems = check_profile(load_profile(name))
                for p in problems:
                    print(f"{name}: {p}", file=sys.stderr)
                bad += len(problems)
            return 1 if bad else 0
        if a.cmd == "extract-git" and a.pin:
            from containers.sglang_pin import pin

            table, a.name = extract_pin(a.repo), pin().flags_table
        elif a.cmd == "extract-git":
            if not (a.commit and a.name):
                raise FlagError("extract-git needs COMMIT and --name NAME, or --pin")
            table = extract_git(a.repo, a.commit)
        else:
            table = extract_wheel(a.version)
        out = FLAGS_DIR / (f"sglang-{a.version}.json" if a.cmd == "extract" else f"{a.name}.json")
    except (FlagError, ProfileError) as err:
        print(f"sglang_flags: {err}", file=sys.stderr)
        return 1
    FLAGS_DIR.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{out}: {len(table['flags'])} flags, algorithms {table['speculative_algorithms']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
