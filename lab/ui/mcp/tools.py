"""The tools, as functions of the lab's context and typed arguments: each answers JSON text with the figures
the CLI prints (`compare --json`, `results series show`), a Triage slice's page, one step's stored answers.

They only read the store, as a visitor of a public deployment may; a run is named as everywhere in the lab
(its id, display name, result file name or a published run's name). Statistics are computed outside the
store's lock, from the comparisons every surface shares (lab.analysis.cache.shared)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from lab.errors import LabError
from lab.analysis.run_pairs import compare_loaded, load_run, resample_setting
from lab.store.db import Store
from lab.store.run_lookup import find_run
from lab.analysis.cache import shared
from lab.triage import SliceSpec, count_slice, slice_steps
from lab.ui.mcp.answers import answer, cut, records, refusal
from lab.workspace import LabContext

MAX_RUNS_LISTED = 200
MAX_STEP_COLUMNS = 8
SLICE_PAGE = 50
MAX_QUERY = 4000
MAX_SEED = 2**32
STEP_FIELDS = ("command_f1", "command_precision", "command_recall", "first_cmd_exact", "valid_json", "equiv_f1",
               "pred_command_units", "raw_output", "parse_failure", "finish_reason", "pred_task_complete",
               "completion_tokens", "latency_s", "lp_mean")


def _store(ctx: LabContext) -> Store:
    """The open store (LabError saying why when it is not), for a computation that holds it only to read."""
    if ctx.store is None:
        raise LabError(ctx.store_error or "the results database is not open")
    return ctx.store


def run_id_of(ctx: LabContext, ref: str) -> str:
    """The stored run `ref` names (a run id, name, file name or published run), or LabError saying what to give."""
    from lab.published.fetch import published_path

    if not isinstance(ref, str) or len(ref) > 500:
        raise LabError("name a run by its id, display name or result file name (list_runs shows them)")
    with ctx.store_session() as store:
        return find_run(store, ref, published_path=lambda: published_path(ref, ctx.settings))


def list_runs(ctx: LabContext, name_contains: str = "", limit: int = 50) -> str:
    """The runs of the lab's store with their scores: the names the other tools take.

    Args:
        name_contains: only runs whose name contains this text (any case); empty: all
        limit: at most this many runs (1-200), best score first
    Returns:
        JSON: {"total": n, "runs": [{run_id, name, score, steps, tasks, scoring_version, partial}]}
    """
    try:
        limit = max(1, min(int(limit), MAX_RUNS_LISTED))
        with ctx.store_session() as store:
            sql = ("SELECT run_id, display_name AS name, score, steps, tasks, scoring_version, partial FROM runs "
                   "WHERE contains(lower(display_name), lower(?)) ORDER BY score DESC NULLS LAST, display_name")
            frame = store.query(sql, [str(name_contains or "")[:200]])
        return answer({"total": len(frame), "runs": records(frame.head(limit))})
    except (LabError, ValueError, TypeError) as exc:
        return refusal(str(exc))


def compare_runs(ctx: LabContext, baseline: str, candidate: str, resamples: int = 10000, seed: int = 0) -> str:
    """Is the candidate run really better than the baseline? Each metric's difference (candidate − baseline)
    over their common steps with its 95 % interval from a paired bootstrap over tasks, and its verdict: the
    figures of `python -m lab compare BASELINE CANDIDATE --json`.

    Args:
        baseline: the baseline run: its id, display name or result file name (list_runs shows them)
        candidate: the run compared with the baseline
        resamples: bootstrap resamples, 100 to 10000
        seed: bootstrap seed (the same runs and seed give the same interval)
    Returns:
        JSON: {"baseline": {run_id, name}, "candidate": {…}, "metrics": {score: {delta, ci, verdict, steps, …}, …}}
    """
    try:
        count = resample_setting(int(resamples))
        if count > resample_setting(None):
            raise LabError(f"resamples {count}: use 100 to {resample_setting(None)}")
        if not 0 <= int(seed) < MAX_SEED:
            raise LabError(f"seed {seed}: use a whole number from 0 to {MAX_SEED - 1}")
        ids = [run_id_of(ctx, baseline), run_id_of(ctx, candidate)]
        with ctx.store_session() as store:
            runs = [load_run(store, run_id) for run_id in ids]
        comparison = shared(store, ("tool compare", *ids, count, int(seed)),
                            lambda: compare_loaded(runs[0], runs[1], resamples=count, seed=int(seed)))
        return answer(comparison.to_dict())
    except (LabError, ValueError, TypeError) as exc:
        return refusal(str(exc))


def series_table(ctx: LabContext, series: str = "") -> str:
    """A checkpoint series point by point against its first point: score and reference NLL over all steps and
    each bucket, each checkpoint's difference from the first with its 95 % interval (simultaneous over the
    series), and the best checkpoint's lead: the table of `python -m lab results series show SERIES`.

    Args:
        series: the series' name; empty: the names of the store's series
    Returns:
        JSON: {"series", "rows": [{position, run, steps of, score, Δ score vs first, …}], "notes": [...]}, or
        {"series_names": [...]} for an empty name
    """
    from lab.store.series import series_frame
    from lab.analysis.series_judgement import adjustment_note, series_table as table_of

    try:
        if not str(series or "").strip():
            with ctx.store_session() as store:
                names = sorted(set(series_frame(store)["series"]))
            return answer({"series_names": names})
        stats = _series(ctx, str(series))
        return answer({"series": stats.series, "x_kind": stats.x_kind, "rows": records(table_of(stats)),
                       "notes": [adjustment_note(stats), *stats.notes]})
    except (LabError, ValueError, TypeError) as exc:
        return refusal(str(exc))


def _series(ctx: LabContext, name: str):
    from lab.analysis.series_judgement import series_stats

    # as the Triage series view reads it: under the store's lock to read, computed outside it, kept for everybody
    return series_stats(_store(ctx), name, hold=ctx.store_session)


def slice_query(text: str) -> str:
    """The query of a Triage link (`https://…/?tab=triage&run_ids=…`) or the query itself."""
    text = str(text or "").strip()
    if len(text) > MAX_QUERY:
        raise LabError(f"the slice query is {len(text):,} characters; at most {MAX_QUERY:,}")
    return urlsplit(text).query if "://" in text else text.lstrip("?")


def slice_steps_page(ctx: LabContext, query: str = "", page: int = 1) -> str:
    """The steps of a Triage slice, one page of 50: the filters as a Triage link carries them (run_ids,
    f1_max, failure_kinds, buckets, text, order_by …), or a whole Triage link.

    Args:
        query: the slice as a URL query ("run_ids=RUN&f1_max=0.2&order_by=command_f1", a run by id or name) or a Triage link
        page: the page, from 1
    Returns:
        JSON: {"total": steps in the slice, "page", "pages", "steps": [{run_id, run, step_key, command_f1, …}]}
    """
    try:
        spec = SliceSpec.from_query(slice_query(query))
        spec.run_ids = [run_id_of(ctx, ref) for ref in spec.run_ids[:MAX_RUNS_LISTED]]  # names too, not only ids
        with ctx.store_session() as store:
            total = count_slice(store, spec)
            pages = max(1, -(-total // SLICE_PAGE))
            page = min(max(1, int(page)), pages)
            frame = slice_steps(store, spec, limit=SLICE_PAGE, offset=(page - 1) * SLICE_PAGE)
        return answer({"total": total, "page": page, "pages": pages, "steps": records(frame)})
    except (LabError, ValueError, TypeError) as exc:
        return refusal(str(exc))


def step_columns(ctx: LabContext, step: str, runs: list[str]) -> str:
    """One step's answers from stored runs, side by side: the reference's command units, and per run its
    command units, raw answer (cut at 4,000 characters), F1, precision, recall, first-command exact, valid JSON
    and parse failure, as Compare shows them.

    Args:
        step: the step key, TASK/STEP (e.g. "task-001/3")
        runs: up to 8 runs (ids, names or result file names)
    Returns:
        JSON: {"step", "task_id", "step_idx", "bucket", "reference_units", "columns": [{run_id, name, …}], "missing": [...]}
    """
    try:
        names = [runs] if isinstance(runs, str) else list(runs or [])
        if not names or len(names) > MAX_STEP_COLUMNS:
            raise LabError(f"name 1 to {MAX_STEP_COLUMNS} runs")
        if not isinstance(step, str) or "/" not in step or len(step) > 300:
            raise LabError("the step is its key, TASK/STEP (e.g. task-001/3)")
        ids = [run_id_of(ctx, name) for name in names]
        return answer(_columns(ctx, step, ids))
    except (LabError, ValueError, TypeError) as exc:
        return refusal(str(exc))


def _columns(ctx: LabContext, step: str, ids: list[str]) -> dict[str, Any]:
    cols = ", ".join(f"s.{c}" for c in STEP_FIELDS)
    sql = (f"SELECT s.run_id, r.display_name AS name, s.task_id, s.step_idx, s.bucket, s.ref_command_units, {cols} "
           "FROM steps s JOIN runs r USING (run_id) WHERE s.step_key = ? AND list_contains(?, s.run_id)")
    with ctx.store_session() as store:
        rows = {r["run_id"]: r for r in store.dicts(sql, [step, ids])}
    if not rows:
        raise LabError(f"none of these runs has a step '{step[:80]}' (keys are TASK/STEP, e.g. task-001/3)")
    first = next(iter(rows.values()))
    columns = [{"run_id": i, "name": rows[i]["name"], **{c: rows[i][c] for c in STEP_FIELDS}} for i in ids if i in rows]
    for column in columns:
        column["raw_output"] = cut(column["raw_output"])
    return {"step": step, "task_id": first["task_id"], "step_idx": first["step_idx"], "bucket": first["bucket"],
            "reference_units": first["ref_command_units"], "columns": columns,
            "missing": [i for i in ids if i not in rows]}


TOOLS = (list_runs, compare_runs, series_table, slice_steps_page, step_columns)
