"""Turn the per-step `samples` of one result dict into `samples` and `sample_stats` Arrow tables."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from lab.errors import ResultFileError
from lab.resultfiles.units import coerce_units
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD, sample_stats, sampled_rows
from lab.store.records import _bool, _float, _int, _str

# samples column -> (arrow type, converter of the sample entry's value under the same key)
SAMPLE_FIELDS: dict[str, tuple[pa.DataType, Any]] = {
    "seed": (pa.int64(), _int),
    "raw_output": (pa.string(), _str),
    "valid_json": (pa.bool_(), _bool),
    "pred_task_complete": (pa.bool_(), _bool),
    "first_cmd_exact": (pa.float64(), _float),
    "command_precision": (pa.float64(), _float),
    "command_recall": (pa.float64(), _float),
    "command_f1": (pa.float64(), _float),
    "finish_reason": (pa.string(), _str),
    "completion_tokens": (pa.int32(), _int),
    "latency_s": (pa.float64(), _float),
    "parse_failure": (pa.string(), _str),
    "error": (pa.string(), _str),
}
SAMPLES_SCHEMA = pa.schema(
    [("run_id", pa.string()), ("step_key", pa.string()), ("sample", pa.int32()),
     ("pred_command_units", pa.list_(pa.string())), ("n_pred_units", pa.int32()),
     *[(name, typ) for name, (typ, _) in SAMPLE_FIELDS.items()]]
)
STATS_SCHEMA = pa.schema(
    [("run_id", pa.string()), ("step_key", pa.string()), ("n_samples", pa.int32()), ("f1_mean", pa.float64()),
     ("f1_std", pa.float64()), ("f1_min", pa.float64()), ("f1_max", pa.float64()), ("f1_spread", pa.float64()),
     ("n_pass", pa.int32()), ("pass_threshold", pa.float64()), ("n_distinct", pa.int32())]
)


def pass_threshold_of(result: dict) -> float:
    """The run's pass threshold (its aggregate's `pass_threshold`, else 0.5)."""
    value = (result.get("aggregate") or {}).get("pass_threshold")
    return DEFAULT_PASS_THRESHOLD if value is None else float(value)


def sample_tables(run_id: str, result: dict, name: str) -> tuple[pa.Table, pa.Table] | None:
    """(samples, sample_stats) of a result whose steps carry `samples`; None when none do."""
    rows = sampled_rows(result.get("per_step") or [])
    if not rows:
        return None
    threshold = pass_threshold_of(result)
    cols: dict[str, list] = {f.name: [] for f in SAMPLES_SCHEMA}
    stats: dict[str, list] = {f.name: [] for f in STATS_SCHEMA}
    for row in rows:
        key = f"{row['task_id']}/{row['step_idx']}"
        try:
            for i, sample in enumerate(row["samples"]):
                units = coerce_units(sample.get("pred_command_units"))
                cols["run_id"].append(run_id)
                cols["step_key"].append(key)
                cols["sample"].append(int(sample.get("sample", i)))
                cols["pred_command_units"].append(units)
                cols["n_pred_units"].append(len(units))
                for field, (_, convert) in SAMPLE_FIELDS.items():
                    cols[field].append(convert(sample.get(field)))
            st = sample_stats(row["samples"], threshold)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ResultFileError(f"{name}: step {key} samples: {type(exc).__name__}: {exc}") from None
        for field, value in (("run_id", run_id), ("step_key", key), ("n_samples", st.n), ("f1_mean", round(st.f1_mean, 4)),
                             ("f1_std", round(st.f1_std, 4)), ("f1_min", st.f1_min), ("f1_max", st.f1_max),
                             ("f1_spread", st.spread), ("n_pass", st.n_pass), ("pass_threshold", threshold),
                             ("n_distinct", st.n_distinct)):
            stats[field].append(value)
    return pa.table(cols, schema=SAMPLES_SCHEMA), pa.table(stats, schema=STATS_SCHEMA)


def delete_samples(cur: Any, stored_path: str) -> None:
    """Inside an import's transaction: drop the samples of the run a file was imported as before."""
    for table in ("samples", "sample_stats"):
        cur.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM runs WHERE path = ?)", [stored_path])


def insert_samples(cur: Any, tables: tuple[pa.Table, pa.Table] | None) -> None:
    """Inside an import's transaction: insert the (samples, sample_stats) tables of one run."""
    if tables is None:
        return
    for table, data in zip(("samples", "sample_stats"), tables):
        cur.register("new_sample_rows", data)
        try:
            cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_sample_rows")
        finally:
            cur.unregister("new_sample_rows")
