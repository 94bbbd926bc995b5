"""Link imported published runs to their catalogue run, series and leaderboard row."""
from __future__ import annotations

from pathlib import Path

from lab.store.db import Store

DDL_PATH = Path(__file__).with_name("links.sql")
PREFIX = "published/"
SCORE_TOLERANCE = 0.006  # leaderboard scores are rounded to 2 decimals


def ensure_table(store: Store) -> None:
    store.ensure_schema(DDL_PATH)


def leaderboard_row(store: Store, run: dict, paths: list[str]) -> int | None:
    """The leaderboard row a run reproduces: the row naming its file, else the row with its model
    id (or short name) and the same score over the same number of steps."""
    hit = store.rows("SELECT row_no FROM leaderboard WHERE list_contains(?, upstream_file) ORDER BY row_no LIMIT 1",
                     [paths])
    if hit:
        return int(hit[0][0])
    if run.get("score") is None:
        return None
    hit = store.rows(
        "SELECT row_no FROM leaderboard WHERE (model_id = ? OR model_short = ?) AND abs(score - ?) <= ? "
        "AND coalesce(steps, 303) = ? ORDER BY row_no LIMIT 1",
        [run.get("model_id") or "", run.get("model_short") or "", float(run["score"]), SCORE_TOLERANCE,
         int(run["steps"])],
    )
    return int(hit[0][0]) if hit else None


def link_published(store: Store, catalogue=None) -> int:
    """Fill `published_runs` for every run imported from `<results>/published/`; rows already right are
    left alone. Returns how many rows were written."""
    from lab.published.catalogue import load_catalogue, runs_of

    ensure_table(store)
    runs = runs_of(catalogue if catalogue is not None else load_catalogue())
    have = {r["run_id"]: r for r in store.dicts("SELECT * FROM published_runs")}
    pending: list[dict] = []
    for row in store.dicts(
        "SELECT run_id, path, model_id, model_short, score, steps FROM runs WHERE source = 'published'"
    ):
        key = str(row["path"])[len(PREFIX):].removesuffix(".json") if str(row["path"]).startswith(PREFIX) else None
        run = runs.get(key or "")
        if run is None:
            continue
        paths = [f.path for f in run.files]
        new = {"run_id": row["run_id"], "run_key": run.key, "paths": paths, "commit_sha": run.files[0].commit,
               "kind": run.kind, "pieces": len(run.files), "series": run.series, "x_kind": run.x_kind, "x": run.x,
               "leaderboard_row": leaderboard_row(store, row, paths)}
        if have.get(row["run_id"]) != new:
            pending.append(new)
    if pending:
        with store.transaction() as cur:
            cur.executemany("DELETE FROM published_runs WHERE run_id = ?", [[n["run_id"]] for n in pending])
            cur.executemany("INSERT INTO published_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [list(n.values()) for n in pending])
    return len(pending)
