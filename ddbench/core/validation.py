"""A pydantic ValidationError as the one line ddbench's errors give: the first failing field's dotted path and
why, so an error names the field at fault (`where` when the whole object is)."""

from __future__ import annotations

from pydantic import ValidationError


def first_error(e: ValidationError, whole: str = "") -> str:
    first = e.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or whole
    return f"{where}: {first['msg']}" if where else first["msg"]
