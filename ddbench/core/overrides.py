"""`--set PATH=VALUE`: change one field of a profile from the command line, as if the file said so.

    just check cpu-tiny --set load.concurrency=[1,8,32] --set workload.max_tokens=256
    just reproduce cpu-tiny --set arms.tree-b15-k8.topk=8 --set 'runtime.env.FOO=bar'

PATH is the field's dotted path in the profile (docs/profile.md lists every field). A list
element is named by its index (`arms.0.topk`), or, in `arms`, by the arm's id
(`arms.tree-b15-k8.topk`); a segment with a dot in it goes in brackets (`arms[tree-b1.5].topk`).
VALUE is read as YAML: `[1,8,32]` is a list, `256` a number, `true` a bool, `null` (or nothing)
unsets the field, `{kind: ar, id: ar}` a mapping.

Overrides are applied in order to the profile file's mapping, before ${VARS} are expanded, and
the result is validated exactly as a file is: an error names the --set at fault and the field.
A PATH that the schema has no field for is an error, never added silently; a mapping the schema
leaves open (`runtime.env`, `arms.<id>.env`, `load.requests_per_user`) takes new keys.
The profile a run records (and its digest) is the resolved one, so overrides change the digest.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from dataclasses import dataclass

import yaml
from pydantic import BaseModel


class OverrideError(ValueError):
    """A --set that cannot be applied: the message names it."""


@dataclass(frozen=True)
class Override:
    text: str          # as given: what the manifest records
    path: tuple[str, ...]
    value: object
    where: str = ""    # the field it set, as validation errors name fields: arms[3].topk

    def covers(self, field: str) -> bool:
        """Whether an error at `field` may come from this override: one path lies within the other."""
        if not field:
            return False
        a, b = sorted((self.where, field), key=len)
        return b == a or b.startswith(a + ".") or b.startswith(a + "[")


def parse(text: str) -> Override:
    """'load.concurrency=[1,8,32]' -> Override(path=('load', 'concurrency'), value=[1, 8, 32])."""
    path, eq, raw = text.partition("=")
    if not eq or not path.strip():
        raise OverrideError(f"--set {text}: give PATH=VALUE, e.g. --set load.concurrency=[1,8,32]")
    path = path.strip()
    segments = _segments(path)
    if segments is None:
        raise OverrideError(f"--set {text}: '{path}' is not a dotted path (a.b.c, arms.<id>.topk, arms[0])")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise OverrideError(f"--set {text}: the value is not valid YAML: {e}") from None
    return Override(text, tuple(segments), value)


def _segments(path: str) -> list[str] | None:
    """'arms[tree-b1.5].topk' -> ['arms', 'tree-b1.5', 'topk']; None when it is not a path."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "[":
            j = path.find("]", i)
            if j < 0:
                return None
            seg, i = path[i + 1:j], j + 1
        else:
            m = re.match(r"[^.\[\]]+", path[i:])
            if not m:
                return None
            seg = m.group()
            i += len(seg)
        if not seg.strip():
            return None
        out.append(seg.strip())
        if i < len(path):
            if path[i] == ".":
                i += 1
                if i == len(path):
                    return None
            elif path[i] != "[":
                return None
    return out or None


def _args(annotation) -> tuple:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _args(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return tuple(a for x in typing.get_args(annotation) for a in _args(x))
    return (annotation,)


def _model_in(annotation) -> type[BaseModel] | None:
    """The pydantic model a field holds, directly or as list items (Arm for list[Arm]); None for plain values."""
    for a in _args(annotation):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        if typing.get_origin(a) is list:
            inner = _model_in(typing.get_args(a)[0])
            if inner is not None:
                return inner
    return None


def _is_open_mapping(annotation) -> bool:
    return any(typing.get_origin(a) is dict for a in _args(annotation))


def apply(raw: dict, texts: list[str] | tuple[str, ...], model: type[BaseModel]) -> tuple[dict, list[Override]]:
    """The profile mapping with every override applied in order (the input is not changed)."""
    data, done = copy.deepcopy(raw), []
    for text in texts:
        o = parse(text)
        done.append(_apply_one(data, o, model))
    return data, done


def _apply_one(data: dict, o: Override, model: type[BaseModel]) -> Override:
    node: dict | list = data
    where = ""
    current: type[BaseModel] | None = model    # the model `node` is an instance of (None: an open mapping)
    annotation = None
    for i, seg in enumerate(o.path):
        last = i == len(o.path) - 1
        if isinstance(node, list):
            idx = _index(node, seg, o, where)
            where += f"[{idx}]"
            if last:
                node[idx] = o.value
                break
            node = node[idx]
            if not isinstance(node, dict):
                raise OverrideError(f"--set {o.text}: {where} is {node!r}, not a mapping; "
                                    f"'{o.path[i + 1]}' is no field of it")
            continue
        annotation = _field_annotation(current, annotation, seg, o, where)
        key = next((k for k in node if str(k) == seg), seg)
        where += f".{seg}" if where else seg
        if last:
            node[key] = o.value
            break
        child = node.get(key)
        nxt = _model_in(annotation) if current is not None else None
        if child is None:
            if nxt is None and not _is_open_mapping(annotation):
                raise OverrideError(f"--set {o.text}: {where} is not a mapping; '{o.path[i + 1]}' has no fields")
            if nxt is not None and typing.get_origin(_args(annotation)[0]) is list:
                raise OverrideError(f"--set {o.text}: {where} is not set in the profile; give the whole list "
                                    f"(--set {where}=[...])")
            child = node[key] = {}
        if not isinstance(child, (dict, list)):
            raise OverrideError(f"--set {o.text}: {where} is {child!r}, not a mapping or a list")
        node, current = child, nxt   # current None: an open mapping (any key) or a list of plain values
    return Override(o.text, o.path, o.value, where)


def _field_annotation(current: type[BaseModel] | None, annotation, seg: str, o: Override, where: str):
    """The type of field seg of the model at where (current), or the open mapping's annotation as it was;
    an error naming the fields there when seg is none of them."""
    if current is not None:
        fields = current.model_fields
        if seg not in fields:
            raise OverrideError(f"--set {o.text}: {where or 'the profile'} has no field '{seg}' (fields: "
                                f"{', '.join(fields)}; docs/profile.md)")
        return fields[seg].annotation
    if not _is_open_mapping(annotation):
        raise OverrideError(f"--set {o.text}: {where} is not a mapping; '{seg}' has no fields")
    return annotation


def _index(items: list, seg: str, o: Override, where: str) -> int:
    if re.fullmatch(r"-?\d+", seg):
        idx = int(seg)
        if not -len(items) <= idx < len(items):
            raise OverrideError(f"--set {o.text}: {where} has {len(items)} item(s); there is no [{idx}]")
        return idx % len(items)
    ids = [x.get("id") for x in items if isinstance(x, dict)]
    if seg in ids:
        return ids.index(seg)
    raise OverrideError(f"--set {o.text}: {where} has no item with id '{seg}' (ids: {ids}); "
                        f"or name it by index, {where}.0")


def blame(field: str, overrides: list[Override]) -> str:
    """' (from --set X)' for an error at `field` that an override may have caused; '' otherwise. An error
    of the whole profile (a cross-field check) may come from any of them."""
    hit = [o.text for o in overrides if o.covers(field)] or ([o.text for o in overrides] if not field else [])
    return f" (from {', '.join('--set ' + t for t in hit)})" if hit else ""
