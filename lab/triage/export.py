"""Export a slice's steps with their annotations (CSV, JSONL) and preference pairs for DPO."""
from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from lab.errors import LabError
from lab.triage.db import ensure_triage_schema, query_dicts
from lab.triage.slices import FROM_CLAUSE, SliceSpec, slice_where

EXPORT_FORMATS = ("csv", "jsonl")
EXPORT_COLUMNS = """s.run_id, r.display_name AS run, r.model, s.step_key, s.task_id, s.step_idx, s.bucket,
    s.source_group, s.command_f1, s.command_precision, s.command_recall, s.first_cmd_exact, f.strict_f1,
    s.valid_json, f.failure_kind, f.units_from_fallback, s.ref_task_complete, s.pred_task_complete,
    s.finish_reason, f.risky, f.hang, f.no_newline, f.long_duration, f.flags,
    s.n_ref_units, s.n_pred_units, s.ref_command_units, s.pred_command_units,
    coalesce(s.raw_output, s.pred_preview) AS output, coalesce(f.text_complete, s.raw_output IS NOT NULL) AS output_complete,
    (SELECT list({'tag': a.tag, 'note': a.note, 'author': a.author, 'created_at': a.created_at}
                 ORDER BY a.created_at, a.id)
       FROM annotations a WHERE a.run_id = s.run_id AND a.step_key = s.step_key) AS annotations"""


def _plain(value: Any) -> Any:
    """JSON-ready value: datetimes as ISO strings, nested lists/dicts converted."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def slice_records(store: Any, spec: SliceSpec) -> list[dict]:
    """Every step of the slice with units, output and annotations, as plain dicts."""
    ensure_triage_schema(store)
    where, params = slice_where(spec)
    rows = query_dicts(store, f"SELECT {EXPORT_COLUMNS} {FROM_CLAUSE} {where} ORDER BY s.run_id, s.task_id, s.step_idx", params)
    for row in rows:
        row["annotations"] = row["annotations"] or []
    return [_plain(r) for r in rows]


def write_jsonl(records: Iterable[Mapping], path: str | Path) -> Path:
    """One JSON object per line (UTF-8)."""
    p = Path(path)
    with p.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return p


def write_csv(records: Sequence[Mapping], path: str | Path) -> Path:
    """CSV with list/dict cells written as JSON text; tags also flattened into a `tags` column."""
    rows = []
    for rec in records:
        row = {k: (json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v) for k, v in rec.items()}
        row["tags"] = ", ".join(sorted({a["tag"] for a in rec.get("annotations") or []}))
        rows.append(row)
    pd.DataFrame(rows).to_csv(path, index=False)
    return Path(path)


def export_slice(store: Any, spec: SliceSpec, path: str | Path, fmt: str = "jsonl") -> Path:
    """Write the slice's steps to `path` as `csv` or `jsonl`."""
    if fmt not in EXPORT_FORMATS:
        raise LabError(f"export format {fmt!r}: use {', '.join(EXPORT_FORMATS)}")
    records = slice_records(store, spec)
    return write_csv(records, path) if fmt == "csv" else write_jsonl(records, path)


def preference_pairs(
    store: Any,
    run_a: str,
    run_b: str,
    spec: SliceSpec | None = None,
    min_margin: float = 0.0,
    messages_by_key: Mapping[str, Sequence[dict]] | None = None,
) -> list[dict]:
    """DPO pairs from two runs on the same steps: the higher-F1 answer is `chosen`.

    Steps with a margin ≤ `min_margin` (ties included) give no pair. With `spec`, only step keys
    in that slice are used. `messages_by_key` (step key -> chat history, e.g. from the replay
    set) adds the prompt messages; otherwise the step key identifies the prompt.
    `chosen_complete` / `rejected_complete` say whether the text is the whole answer or a
    stored preview (published result files keep 1,200 characters).
    """
    if run_a == run_b:
        raise LabError("preference pairs: pick two different runs")
    ensure_triage_schema(store)
    keep = ""
    params: list[Any] = [run_b, run_a, float(min_margin)]
    if spec is not None:
        where, where_params = slice_where(spec)
        keep = f"AND a.step_key IN (SELECT s.step_key {FROM_CLAUSE} {where})"
        params += where_params
    rows = query_dicts(
        store,
        f"""SELECT a.step_key, a.task_id, a.step_idx,
                   a.run_id AS run_a, b.run_id AS run_b, a.command_f1 AS f1_a, b.command_f1 AS f1_b,
                   coalesce(a.raw_output, a.pred_preview, '') AS out_a, coalesce(b.raw_output, b.pred_preview, '') AS out_b,
                   coalesce(fa.text_complete, a.raw_output IS NOT NULL) AS complete_a,
                   coalesce(fb.text_complete, b.raw_output IS NOT NULL) AS complete_b
            FROM steps a JOIN steps b ON b.step_key = a.step_key AND b.run_id = ?
            LEFT JOIN step_flags fa ON fa.run_id = a.run_id AND fa.step_key = a.step_key
            LEFT JOIN step_flags fb ON fb.run_id = b.run_id AND fb.step_key = b.step_key
            WHERE a.run_id = ? AND abs(a.command_f1 - b.command_f1) > ? {keep}
            ORDER BY a.task_id, a.step_idx""",
        params,
    )
    pairs = []
    for r in rows:
        a_wins = r["f1_a"] > r["f1_b"]
        win, lose = ("a", "b") if a_wins else ("b", "a")
        pair = {
            "step_key": r["step_key"],
            "chosen": r[f"out_{win}"],
            "rejected": r[f"out_{lose}"],
            "chosen_f1": r[f"f1_{win}"],
            "rejected_f1": r[f"f1_{lose}"],
            "margin": round(r[f"f1_{win}"] - r[f"f1_{lose}"], 4),
            "chosen_run": r[f"run_{win}"],
            "rejected_run": r[f"run_{lose}"],
            "chosen_complete": bool(r[f"complete_{win}"]),
            "rejected_complete": bool(r[f"complete_{lose}"]),
        }
        if messages_by_key is not None and r["step_key"] in messages_by_key:
            pair["messages"] = [dict(m) for m in messages_by_key[r["step_key"]]]
        pairs.append(pair)
    return pairs


def export_preference_pairs(store: Any, run_a: str, run_b: str, path: str | Path, **kwargs: Any) -> Path:
    """Write preference_pairs(...) as JSONL."""
    return write_jsonl(preference_pairs(store, run_a, run_b, **kwargs), path)
