"""Triage's filter widgets and pickers: the choices read from the store, and the mapping between the
widgets' values and a SliceSpec."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from lab.triage import SliceSpec, list_slices, refresh_step_flags, tags_in_use
from lab.triage.db import query_df
from lab.workspace import LabContext

ANY = "any"


@dataclass
class Choices:
    """Picker choices read from the store."""

    runs: list[tuple[str, str]]
    source_groups: list[str]
    task_ids: list[str]
    tags: list[str]
    slices: list[str]


def load_choices(ctx: LabContext) -> Choices:
    """Runs (label, run_id), groups, tasks, tags and saved slices; step_flags refreshed first."""
    store = ctx.store
    if store is None:
        return Choices([], [], [], [], [])
    with store.derived_writes():  # derived from the runs, so allowed on a read-only public store too
        refresh_step_flags(store)
    runs = query_df(store, "SELECT run_id, display_name, steps, total_steps, coverage, partial, selected_steps "
                           "FROM runs ORDER BY display_name, run_id")
    labels = [(run_label(r), r.run_id) for r in runs.itertuples()]
    groups = list(query_df(store, "SELECT DISTINCT source_group FROM steps ORDER BY 1")["source_group"].dropna())
    tasks = list(query_df(store, "SELECT DISTINCT task_id FROM steps ORDER BY 1")["task_id"])
    return Choices(labels, groups, tasks, tags_in_use(store), list_slices(store))


def run_label(r: Any) -> str:
    """"name · run_id · n/N steps" (with "partial" when the run answered part of its selection), or "name · run_id ·
    limited to n steps" for a whole run of a selection limited on purpose (--limit)."""
    total = r.total_steps if r.total_steps == r.total_steps and r.total_steps is not None else r.steps
    selected = getattr(r, "selected_steps", None)
    if not bool(r.partial) and selected is not None and pd.notna(selected):
        n = int(selected)
        return f"{r.display_name} · {r.run_id} · limited to {n} step{'' if n == 1 else 's'}"
    partial = " partial" if bool(r.partial) else ""
    return f"{r.display_name} · {r.run_id} · {int(r.steps)}/{int(total)} steps{partial}"


def _tri(value: str) -> bool | None:
    return None if value in (None, ANY) else value == "yes"


def _untri(value: bool | None) -> str:
    return ANY if value is None else ("yes" if value else "no")


def _num(value: Any) -> float | None:
    return None if value is None or value == "" or (isinstance(value, float) and pd.isna(value)) else float(value)


# The filter widgets in order; spec_from_inputs / inputs_from_spec map them to SliceSpec fields.
FILTER_FIELDS = (
    "run_ids", "f1_min", "f1_max", "first_cmd_exact", "valid_json", "failure_kinds", "task_complete", "buckets",
    "source_groups", "task_ids", "ref_units_min", "ref_units_max", "text", "text_regex", "text_in", "flags",
    "risk_names", "tags", "order_by", "descending", "equiv_f1_min", "equiv_f1_max", "spelling_gap_min",
    "ref_nll_min", "ref_nll_max", "confidently_wrong",
)  # fmt: skip


def spec_from_inputs(*values: Any) -> SliceSpec:
    """A SliceSpec from the filter widgets' values (LabError naming a bad field)."""
    v = dict(zip(FILTER_FIELDS, values))
    units_min, units_max = _num(v["ref_units_min"]), _num(v["ref_units_max"])
    return SliceSpec.from_dict({
        "run_ids": list(v["run_ids"] or []), "f1_min": _num(v["f1_min"]), "f1_max": _num(v["f1_max"]),
        "first_cmd_exact": _tri(v["first_cmd_exact"]), "valid_json": _tri(v["valid_json"]),
        "failure_kinds": list(v["failure_kinds"] or []),
        "task_complete": None if v["task_complete"] in (None, ANY) else v["task_complete"],
        "buckets": list(v["buckets"] or []), "source_groups": list(v["source_groups"] or []),
        "task_ids": list(v["task_ids"] or []),
        "ref_units_min": None if units_min is None else int(units_min),
        "ref_units_max": None if units_max is None else int(units_max),
        "text": v["text"] or "", "text_regex": bool(v["text_regex"]), "text_in": v["text_in"] or "both",
        "flags": list(v["flags"] or []), "risk_names": list(v["risk_names"] or []), "tags": list(v["tags"] or []),
        "order_by": v["order_by"] or "run", "descending": bool(v["descending"]),
        "equiv_f1_min": _num(v["equiv_f1_min"]), "equiv_f1_max": _num(v["equiv_f1_max"]),
        "spelling_gap_min": _num(v["spelling_gap_min"]),
        "ref_nll_min": _num(v["ref_nll_min"]), "ref_nll_max": _num(v["ref_nll_max"]),
        "confidently_wrong": _tri(v["confidently_wrong"]),
    })  # fmt: skip


def inputs_from_spec(spec: SliceSpec) -> list[Any]:
    """The filter widgets' values for a spec (inverse of spec_from_inputs)."""
    values = {**spec.__dict__}
    values["first_cmd_exact"] = _untri(spec.first_cmd_exact)
    values["valid_json"] = _untri(spec.valid_json)
    values["task_complete"] = spec.task_complete or ANY
    values["confidently_wrong"] = _untri(spec.confidently_wrong)
    return [values[name] for name in FILTER_FIELDS]
