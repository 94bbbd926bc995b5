"""A stored run as the rows of its dataset config: one Arrow row per scored step, its sampled answers nested."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lab.errors import LabError
from lab.store.dataset.layout import FORMAT, META_KEY, run_schema, sample_type, step_columns
from lab.store.db import Store

RUN_SQL = """SELECT run_id, display_name, path, scoring_version, steps, tasks, score, meta_json, aggregate_json,
    equiv_state, equiv_score, model_path, lora_path, engine_spec, contract, template_status, timestamp
FROM runs WHERE run_id = ?"""
STEPS_SQL = """SELECT s.*, rl.ref_tokens, rl.ref_logprob, rl.ref_nll_per_token
FROM steps s LEFT JOIN step_reference rl ON rl.run_id = s.run_id AND rl.step_key = s.step_key
WHERE s.run_id = ? ORDER BY s.ord"""
SAMPLES_SQL = "SELECT * FROM samples WHERE run_id = ? ORDER BY step_key, sample"


@dataclass(frozen=True)
class ExportedRun:
    """One run ready to write: its `runs` row, its settings (the result file's top level) and its rows."""

    info: dict[str, Any]
    meta: dict[str, Any]
    aggregate: dict[str, Any]
    table: pa.Table


def _json(text: Any) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _cell(value: Any) -> Any:
    """A DuckDB/pandas value as Arrow takes it (NaN and NaT as null, arrays as lists)."""
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and value != value:
        return None
    return value


def _samples(store: Store, run_id: str) -> dict[str, list[dict]]:
    names = [f.name for f in sample_type()]
    out: dict[str, list[dict]] = {}
    for row in store.dicts(SAMPLES_SQL, [run_id]):
        out.setdefault(row["step_key"], []).append({n: _cell(row.get(n)) for n in names})
    return out


def run_rows(store: Store, run_id: str) -> ExportedRun:
    """The run `run_id` of the store, as its config's rows (LabError when the store has no such run)."""
    found = store.dicts(RUN_SQL, [run_id])
    if not found:
        raise LabError(f"no run '{run_id}' in the store")
    info = found[0]
    steps = store.dicts(STEPS_SQL, [run_id])
    samples = _samples(store, run_id)
    columns = {c.name: [_cell(r.get(c.name)) for r in steps] for c in step_columns()}
    columns["samples"] = [samples.get(r["step_key"], []) for r in steps]
    table = pa.table(columns, schema=run_schema())
    meta = _json(info.pop("meta_json"))
    aggregate = _json(info.pop("aggregate_json"))
    meta.setdefault("scoring_version", info["scoring_version"])
    return ExportedRun(info, meta, aggregate, table)


def with_metadata(run: ExportedRun) -> pa.Table:
    """The run's table carrying its settings in the Parquet key-value metadata (what an import restores)."""
    payload = {"format": FORMAT, "run_id": run.info["run_id"], "display_name": run.info["display_name"],
               "meta": run.meta, "aggregate": run.aggregate}
    try:
        text = json.dumps(payload, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError as exc:  # a non-finite number in the stored settings
        raise LabError(f"run {run.info['run_id']}: its settings cannot be written as JSON ({exc})") from None
    return run.table.replace_schema_metadata({META_KEY: text.encode("utf-8")})
