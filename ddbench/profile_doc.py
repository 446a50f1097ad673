"""docs/profile.md: every profile field, generated from the pydantic schema in ddbench/core/profile.py.

    python -m ddbench.profile_doc > docs/profile.md      # or: python -m ddbench.profile_doc --write
    python -m ddbench.profile_doc --check                # exit 1 when docs/profile.md is not current

A unit test (tests/unit/ddbench/test_profile_doc.py) fails while the page differs from what this
module writes, so a field added to the schema is a field documented.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ddbench.core import profile as P

DOC_PATH = P.REPO_ROOT / "docs" / "profile.md"
COMMAND = "python -m ddbench.profile_doc --write"

# (model, where it sits in a profile), in the order a profile reads
SECTIONS: list[tuple[type[BaseModel], str]] = [
    (P.Profile, "the file's top level"),
    (P.Backend, "`backend`"),
    (P.Models, "`models`"),
    (P.Placement, "`placement`"),
    (P.Runtime, "`runtime`"),
    (P.Arm, "each item of `arms`"),
    (P.Workload, "`workload`"),
    (P.Sampling, "each item of `workload.sampling`"),
    (P.Load, "`load`"),
]
DOCUMENTED = {m for m, _ in SECTIONS}

HEAD = f"""# Profile reference

<!-- Generated from ddbench/core/profile.py by `{COMMAND}`; do not edit by hand. -->

A profile is one YAML file that describes a whole experiment: the server and its build, the model
pair, the arms compared, the workload and the load. The shipped ones are in
[containers/profiles/](../containers/profiles/); `just check PROFILE` validates one and prints its
plan, and every error names the file and the field. Strings may use `${{VAR}}` and `${{VAR:-default}}`
(an unset variable without a default is an error). Paths are relative to the repository root unless
absolute. An unknown key is an error.

This page is generated from the schema (`ddbench/core/profile.py`); a unit test fails when it is stale.
Regenerate it with `{COMMAND}`.

## Overriding fields from the command line

`just check` and `just reproduce` take `--set PATH=VALUE`, repeatable, applied in order to the file's
mapping before it is validated, exactly as if the file said so:

```sh
just reproduce cpu-tiny --set load.concurrency=[1,8,32] --set workload.max_tokens=256
just check cpu-tiny --set arms.tree-b15-k8.topk=4 --set runtime.env.OMP_NUM_THREADS=2
```

- PATH is a field's dotted path, as in the tables below. An item of a list is named by its index
  (`arms.0.topk`) or, in `arms`, by its id (`arms.tree-b15-k8.topk`); a segment with a dot in it
  goes in brackets (`arms[tree-b1.5].topk`). A field the schema does not have is an error, never
  added; an open mapping (`runtime.env`, an arm's `env`, `load.requests_per_user`) takes new keys.
- VALUE is read as YAML: `[1,8,32]` is a list, `256` a number, `false` a bool, `null` (or nothing
  after `=`) unsets a field, `'1'` a string of digits. Quote it for the shell where needed.
- A value the schema refuses is reported like an error in the file, with the `--set` that caused it.
- The run's `manifest.json` records the overrides as given (`overrides`) and the resolved profile;
  the profile digest is of the resolved profile, so an override changes it (`load.budget_s` aside: a
  run control, not a condition of any cell, which no digest holds). `--resume` takes the same
  overrides as the run was made with (or only more repetitions), as it takes the same profile.
"""


def _escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _is_list(annotation) -> bool:
    return any(typing.get_origin(a) is list for a in (annotation, *typing.get_args(annotation)))


def _constraints(metadata: list, items: bool = False) -> list[str]:
    """Constraints for a reader; `items`: they bound a list (a length is then a count of items)."""
    out = []
    for m in metadata:
        if isinstance(m, FieldInfo):
            out += _constraints(m.metadata, items)
        elif isinstance(m, at.Ge):
            out.append(f">= {m.ge}")
        elif isinstance(m, at.Gt):
            out.append(f"> {m.gt}")
        elif isinstance(m, at.Le):
            out.append(f"<= {m.le}")
        elif isinstance(m, at.Lt):
            out.append(f"< {m.lt}")
        elif isinstance(m, at.MinLen):
            out.append(f"at least {m.min_length} item{'s' * (m.min_length != 1)}" if items
                       else "non-empty" if m.min_length == 1 else f"length >= {m.min_length}")
        elif isinstance(m, at.MaxLen):
            out.append(f"at most {m.max_length} items" if items else f"length <= {m.max_length}")
        elif getattr(m, "pattern", None):
            out.append(f"matching `{m.pattern}`")
    return out


def type_text(annotation) -> str:
    """A field's type for a reader: `int >= 1`, list of `str`, `'closed'` or `'open'`, [Arm](#arm)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Annotated:
        rules = _constraints(list(args[1:]), items=_is_list(args[0]))
        if rules and typing.get_origin(args[0]) is list:
            return f"list ({', '.join(rules)}) of {type_text(typing.get_args(args[0])[0])}"
        return type_text(args[0]) + (f" ({', '.join(rules)})" if rules else "")
    if origin is typing.Literal:
        return " or ".join(f"`{json.dumps(a) if not isinstance(a, str) else repr(a)}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of {type_text(args[0])} to {type_text(args[1])}"
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})" if annotation in DOCUMENTED \
            else annotation.__name__
    if inspect.isclass(annotation):
        return f"`{annotation.__name__}`"
    return f"`{annotation}`"


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    d = field.get_default(call_default_factory=True)
    if d is None:
        return "unset"
    if isinstance(d, BaseModel):
        return "its defaults"
    return f"`{json.dumps(d)}`"


def section(model: type[BaseModel], where: str) -> str:
    doc = inspect.cleandoc(model.__doc__ or "")
    lines = [f"## {model.__name__}", "", f"Where: {where}." + (f" {' '.join(doc.split())}" if doc else ""), "",
             "| field | type | default | description |", "|---|---|---|---|"]
    for name, f in model.model_fields.items():
        rules = _constraints(f.metadata, items=_is_list(f.annotation))
        kind = type_text(f.annotation) + (f"; {', '.join(rules)}" if rules else "")
        text = re.sub(r"<(?=[A-Za-z/])", "&lt;", f.description or "")   # <name> is no HTML tag
        lines.append(f"| `{name}` | {_escape(kind)} | {_escape(default_text(f))} | {_escape(text)} |")
    return "\n".join(lines)


def render() -> str:
    return "\n\n".join([HEAD.rstrip(), *(section(m, w) for m, w in SECTIONS)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddbench.profile_doc", description=__doc__.split("\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {DOC_PATH.relative_to(P.REPO_ROOT)}")
    group.add_argument("--check", action="store_true", help="exit 1 when the page is not current")
    a = ap.parse_args(argv)
    text = render()
    if a.write:
        DOC_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {DOC_PATH.relative_to(P.REPO_ROOT)}", file=sys.stderr)
    elif a.check:
        current = DOC_PATH.is_file() and DOC_PATH.read_text(encoding="utf-8") == text
        if not current:
            print(f"{DOC_PATH.relative_to(P.REPO_ROOT)} is not current; run: {COMMAND}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
