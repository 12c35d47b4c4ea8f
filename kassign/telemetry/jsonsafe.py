"""Turning what a consumer hands the recorder into JSON that always serialises.

aiokafka's ``subscribe(pattern=...)`` passes a compiled regex, callbacks may carry sets, bytes or
enums: none is JSON. :func:`dumps_line` writes them as their closest JSON form (a regex as its
pattern string, a set as a sorted list, anything else as its ``repr``) instead of failing.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any

__all__ = ["json_default", "to_jsonable", "dumps_line"]

#: Nesting kept before a value is written as its repr (a cycle or a pathological object).
MAX_DEPTH = 32


def json_default(obj: Any) -> Any:
    """``json.dumps(default=...)``: the JSON form of an object json does not know."""
    if isinstance(obj, re.Pattern):
        return obj.pattern
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(v) for v in obj), key=repr)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "backslashreplace")
    return repr(obj)


def to_jsonable(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` made of JSON types only (dict keys become strings)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if depth >= MAX_DEPTH:
        return repr(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, depth + 1) for v in value]
    return to_jsonable(json_default(value), depth + 1)


def dumps_line(obj: Any) -> str:
    """One compact JSON line for ``obj``, whatever it holds."""
    try:
        return json.dumps(obj, separators=(",", ":"), default=json_default)
    except (TypeError, ValueError, RecursionError):  # non-str keys, a cycle, a deep structure
        return json.dumps(to_jsonable(obj), separators=(",", ":"))
