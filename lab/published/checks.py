"""The value checks a fetched published file must pass besides the schema (lab.resultfiles.schema):
every score within range, `aggregate.steps`/`tasks` equal to what `per_step` holds, and each step
within sane sizes (units per side, characters per unit), so that a hostile file can neither store
numbers no harness writes nor make the equiv fill's cost unbounded. Limits: assets/published/fetch.yaml."""
from __future__ import annotations

from typing import Any

from lab.errors import LabError
from lab.resultfiles.schema import describe_loc
from lab.resultfiles.units import coerce_units

STEP_FRACTIONS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")
AGGREGATE_FRACTIONS = ("avg_command_f1", "avg_command_precision", "avg_command_recall")
UNIT_SIDES = ("ref_command_units", "pred_command_units")


def _refuse(path: str, data: dict, loc: tuple, what: str) -> LabError:
    return LabError(f"{path}: {describe_loc(data, loc)} {what}; the download was discarded")


def _in_range(path: str, data: dict, loc: tuple, value: Any, low: float, high: float) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not low <= value <= high:
        raise _refuse(path, data, loc, f"is {value!r}, outside {low}..{high}")


def check_values(path: str, data: dict, limits: dict) -> None:
    """LabError (one line naming the file and the field) unless every score of `data` is in range and
    its aggregate counts match its rows."""
    low, high = (float(x) for x in limits["score_range"])
    p_low, p_high = (float(x) for x in limits["percent_range"])
    rows = data["per_step"]
    for i, row in enumerate(rows):
        for key in STEP_FRACTIONS:
            _in_range(path, data, ("per_step", i, key), row.get(key), low, high)
    aggregate = data.get("aggregate")
    if not isinstance(aggregate, dict):
        return
    for key in AGGREGATE_FRACTIONS:
        _in_range(path, data, ("aggregate", key), aggregate.get(key), low, high)
    for key, value in aggregate.items():
        if key.endswith("_pct"):
            _in_range(path, data, ("aggregate", key), value, p_low, p_high)
    counts = {"steps": len(rows), "tasks": len({r.get("task_id") for r in rows})}
    for key, want in counts.items():
        got = aggregate.get(key)
        if got is not None and got != want:
            raise _refuse(path, data, ("aggregate", key), f"is {got!r} but per_step holds {want}")


def check_step_sizes(path: str, data: dict, limits: dict) -> None:
    """LabError naming the step unless each side of every step has at most `max_units_per_step` units
    of at most `max_unit_chars` characters."""
    max_units, max_chars = int(limits["max_units_per_step"]), int(limits["max_unit_chars"])
    for i, row in enumerate(data["per_step"]):
        for side in UNIT_SIDES:
            units = row.get(side)
            units = coerce_units(units) if units is None or isinstance(units, str) else units
            if len(units) > max_units:
                raise _refuse(path, data, ("per_step", i, side),
                              f"has {len(units):,} units, over the limit of {max_units:,} (max_units_per_step)")
            longest = max((len(u) for u in units if isinstance(u, str)), default=0)
            if longest > max_chars:
                raise _refuse(path, data, ("per_step", i, side),
                              f"has a unit of {longest:,} characters, over the limit of {max_chars:,} "
                              "(max_unit_chars)")
