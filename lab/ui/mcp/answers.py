"""What the tools answer: plain JSON text (NaN and missing values as null, arrays as lists, long text cut), and
a refusal as `{"error": "…"}` in one line, the way the CLI prints one."""
from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

MAX_TEXT = 4000  # characters of one raw answer in a tool's reply


def plain(value: Any) -> Any:
    """`value` as JSON takes it: NaN/NaT as None, numpy scalars and arrays as Python values and lists."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str):
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NaT or (not isinstance(value, (str, bytes, list, dict)) and pd.isna(value) is True):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as JSON-ready dicts."""
    return [plain(row) for row in frame.to_dict("records")]


def cut(text: Any, limit: int = MAX_TEXT) -> Any:
    """Text cut to `limit` characters, saying how much was left out."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def answer(data: dict[str, Any]) -> str:
    return json.dumps(plain(data), ensure_ascii=False, allow_nan=False)


def refusal(message: str) -> str:
    return json.dumps({"error": " ".join(str(message).split())[:600]}, ensure_ascii=False)
