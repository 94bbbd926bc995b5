"""Import reference-likelihood files (`python -m lab score-reference`) into `reference_runs` / `reference_steps`.

They live among the result files (results/runs/NAME.reference.json), so the importer hands every file
whose `kind` says so to `import_reference`; the rows join a model's generation runs by `model_path`
(and `lora_path`): the view `run_reference` gives each run the newest reference run of its model.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from lab.errors import ResultFileError
from lab.store.db import Store

REFERENCE_KIND = "tb2lite-reference-likelihood"
STEP_COLUMNS = ("ref_tokens", "ref_logprob", "ref_logprob_mean", "ref_nll_per_token", "prompt_tokens", "error")
MAX_NUMBER = 10 ** 300  # a JSON integer past a float (a 400-digit one) is no number the store can hold
# the NLL per token a row states, against -ref_logprob / ref_tokens (both rounded to 4 decimals in the file)
NLL_TOLERANCE = 1e-3


def is_reference_result(data: Any) -> bool:
    """A parsed JSON file that is a reference-likelihood file, not a harness result file."""
    return isinstance(data, dict) and data.get("kind") == REFERENCE_KIND


def _number(value: Any, name: str, where: str, integer: bool = False) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)) \
            or (isinstance(value, int) and abs(value) > MAX_NUMBER):
        raise ResultFileError(f"{where}: field '{name}' must be a finite number, got {str(value)[:40]!r}"
                              f"{'…' if len(str(value)) > 40 else ''}")
    if integer:
        if int(value) != value or not 0 <= value < 2**31:
            raise ResultFileError(f"{where}: field '{name}' must be a whole number 0 to 2^31-1, got {value!r}")
        return int(value)
    if name != "ref_nll_per_token" and value > 0:
        raise ResultFileError(f"{where}: field '{name}' is a log-probability and cannot be positive, got {value!r}")
    if name == "ref_nll_per_token" and value < 0:
        raise ResultFileError(f"{where}: field '{name}' cannot be negative, got {value!r}")
    return float(value)


def _scored_values(values: dict, where: str) -> dict:
    """A step is scored (ref_logprob, ref_tokens >= 1 and ref_nll_per_token, which is -ref_logprob /
    ref_tokens) or not (none of the three figures): a row with some and not others is refused, since
    every reader shows the step's NLL per token from them (Compare, Results, Triage, the series plot).
    ref_logprob_mean, when left out of a scored row, is ref_logprob / ref_tokens."""
    logprob, tokens, nll, mean = (values[c] for c in ("ref_logprob", "ref_tokens", "ref_nll_per_token", "ref_logprob_mean"))
    if logprob is None:
        given = [c for c, v in (("ref_nll_per_token", nll), ("ref_logprob_mean", mean)) if v is not None]
        if given:
            raise ResultFileError(f"{where}: field '{given[0]}' is given without 'ref_logprob'; a step not scored "
                                  "has neither (null), a scored one both")
        return {}
    if not tokens:
        raise ResultFileError(f"{where}: field 'ref_tokens' must be at least 1 where 'ref_logprob' is given, got {tokens!r}")
    expected = -logprob / tokens
    if nll is None:
        raise ResultFileError(f"{where}: field 'ref_nll_per_token' is missing where 'ref_logprob' is given "
                              f"(it is -ref_logprob / ref_tokens = {expected:.4f})")
    for name, value, want in (("ref_nll_per_token", nll, expected), ("ref_logprob_mean", mean, -expected)):
        if value is not None and not math.isclose(value, want, rel_tol=1e-6, abs_tol=NLL_TOLERANCE):
            raise ResultFileError(f"{where}: field '{name}' is {value!r}, but ref_logprob / ref_tokens makes it "
                                  f"{want:.4f}")
    return {"ref_logprob_mean": -expected if mean is None else mean}


def reference_step_rows(ref_run_id: str, data: dict, name: str) -> pd.DataFrame:
    """The per-step rows, checked: task ids, step indices, finite log-probabilities in range."""
    rows = data.get("per_step")
    if not isinstance(rows, list) or not rows:
        raise ResultFileError(f"{name}: a reference-likelihood file needs a non-empty per_step list")
    out, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{name}: per_step[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str) or not row["task_id"]:
            raise ResultFileError(f"{where}: needs a task_id")
        step_idx = _number(row.get("step_idx"), "step_idx", where, integer=True)
        if step_idx is None:
            raise ResultFileError(f"{where}: needs a step_idx")
        key = f"{row['task_id'][:200]}/{step_idx}"
        if key in seen:
            raise ResultFileError(f"{where}: step {key} appears twice")
        seen.add(key)
        values = {c: _number(row.get(c), c, where, integer=c in ("ref_tokens", "prompt_tokens"))
                  for c in STEP_COLUMNS if c != "error"}
        values.update(_scored_values(values, where))
        error = row.get("error")
        out.append({"ref_run_id": ref_run_id, "task_id": row["task_id"][:200], "step_idx": step_idx, "step_key": key,
                    **values, "error": None if error is None else str(error)[:2000]})
    return pd.DataFrame(out)


def import_reference(store: Store, data: dict, ref_run_id: str, *, path: str, name: str,
                     file_size: int | None, file_mtime: float | None) -> None:
    """Replace whatever was imported from `path` with this file's rows, in one transaction."""
    steps = reference_step_rows(ref_run_id, data, name)
    agg = data.get("aggregate") if isinstance(data.get("aggregate"), dict) else {}
    text = (lambda v: None if v is None else str(v)[:2000])
    run = pd.DataFrame([{
        "ref_run_id": ref_run_id, "path": path, "file_size": file_size, "file_mtime": file_mtime,
        "engine_spec": text(data.get("engine_spec")), "model_path": text(data.get("model_path")),
        "lora_path": text(data.get("lora_path")), "model_short": text(data.get("model_short")),
        "contract": text(data.get("contract")), "replay_sha256": text(data.get("replay_sha256")),
        "steps": len(steps), "steps_scored": int(steps["ref_logprob"].notna().sum()),
        "ref_tokens": int(steps["ref_tokens"].fillna(0).sum()),
        "ref_nll_per_token": _number(agg.get("ref_nll_per_token"), "ref_nll_per_token", f"{name}: aggregate"),
        "timestamp": text(data.get("timestamp")),
        "imported_at": datetime.now(timezone.utc).replace(tzinfo=None),
    }])
    with store.transaction() as cur:
        cur.execute("DELETE FROM reference_steps WHERE ref_run_id IN (SELECT ref_run_id FROM reference_runs WHERE path = ?)",
                    [path])
        cur.execute("DELETE FROM reference_runs WHERE path = ?", [path])
        cur.execute("DELETE FROM reference_steps WHERE ref_run_id = ?", [ref_run_id])
        cur.execute("DELETE FROM reference_runs WHERE ref_run_id = ?", [ref_run_id])
        cur.register("new_ref_run", run)
        cur.register("new_ref_steps", steps)
        try:
            cur.execute("INSERT INTO reference_runs BY NAME SELECT * FROM new_ref_run")
            cur.execute("INSERT INTO reference_steps BY NAME SELECT * FROM new_ref_steps")
        finally:
            cur.unregister("new_ref_run")
            cur.unregister("new_ref_steps")
