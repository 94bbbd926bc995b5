"""Named, parameterized queries (queries.sql) for the plots and the UI.

Filter values always travel as `$parameters`; the only text put into SQL is an ORDER BY
clause picked from a whitelist by key.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from lab.errors import LabError
from lab.store.db import Store

QUERIES_PATH = Path(__file__).with_name("queries.sql")
_NAME_RX = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)

# ORDER BY choices per query (key -> SQL); the first is the default.
ORDERS: dict[str, dict[str, str]] = {
    "leaderboard": {
        "score": "score DESC NULLS LAST",
        "name": "name",
        "sec_per_step": "sec_per_step NULLS LAST",
        "valid_json_pct": "valid_json_pct DESC NULLS LAST",
        "first_cmd_exact_pct": "first_cmd_exact_pct DESC NULLS LAST",
        "precision": "precision DESC NULLS LAST",
        "recall": "recall DESC NULLS LAST",
        "rank": "rank NULLS LAST",
        "spelling_gap": "spelling_gap DESC NULLS LAST",
        "ref_nll_per_token": "ref_nll_per_token NULLS LAST",  # likeliest reference first
    },
    "runs": {
        "imported_at": "imported_at DESC",
        "score": "score DESC NULLS LAST",
        "display_name": "display_name",
        "timestamp": "timestamp DESC NULLS LAST",
    },
}

# Parameters a query may leave out, with their defaults.
DEFAULTS: dict[str, Any] = {
    "first56_only": False,
    "include_runs": True,
    "include_published": True,
    "run_ids": None,
    "base_model": None,
}


@lru_cache(maxsize=1)
def load_queries(path: Path = QUERIES_PATH) -> dict[str, str]:
    """name -> SQL, from queries.sql."""
    text = path.read_text(encoding="utf-8")
    parts = _NAME_RX.split(text)
    return {parts[i]: parts[i + 1].strip().rstrip(";") for i in range(1, len(parts), 2)}


def query_sql(name: str, order: str | None = None) -> str:
    """The SQL of a named query, with its ORDER BY filled from the whitelist."""
    queries = load_queries()
    if name not in queries:
        raise LabError(f"unknown query '{name}'; known: {', '.join(sorted(queries))}")
    sql = queries[name]
    if "{order}" in sql:
        choices = ORDERS[name]
        key = order or next(iter(choices))
        if key not in choices:
            raise LabError(f"cannot sort '{name}' by '{key}'; choose one of: {', '.join(choices)}")
        sql = sql.replace("{order}", choices[key])
    elif order is not None:
        raise LabError(f"query '{name}' takes no sort order")
    return sql


def run_query(store: Store, name: str, order: str | None = None, **params: Any) -> pd.DataFrame:
    """Run a named query with its parameters (defaults from DEFAULTS)."""
    return store.query(query_sql(name, order), {**DEFAULTS, **params})


def _ids(run_ids: Sequence[str] | None) -> list[str] | None:
    return None if run_ids is None else [str(r) for r in run_ids]


def _like(pattern: str) -> str:
    """A user's filter text as an ILIKE pattern: used as given if it has % or _, else 'contains'."""
    return pattern if ("%" in pattern or "_" in pattern) else f"%{pattern}%"


# -- the named queries as typed functions -----------------------------------------------------
def leaderboard(store: Store, first56_only: bool = False, include_runs: bool = True, order: str = "score") -> pd.DataFrame:
    return run_query(store, "leaderboard", order, first56_only=first56_only, include_runs=include_runs)


def score_vs_params(store: Store, first56_only: bool = False, include_runs: bool = True) -> pd.DataFrame:
    return run_query(store, "score_vs_params", first56_only=first56_only, include_runs=include_runs)


def precision_recall(store: Store, first56_only: bool = False, include_runs: bool = True) -> pd.DataFrame:
    return run_query(store, "precision_recall", first56_only=first56_only, include_runs=include_runs)


def json_vs_f1(store: Store, first56_only: bool = False, include_runs: bool = True) -> pd.DataFrame:
    return run_query(store, "json_vs_f1", first56_only=first56_only, include_runs=include_runs)


def speed_vs_score(store: Store, first56_only: bool = False, include_runs: bool = True) -> pd.DataFrame:
    return run_query(store, "speed_vs_score", first56_only=first56_only, include_runs=include_runs)


def by_bucket(store: Store, run_ids: Sequence[str] | None = None, include_published: bool = True) -> pd.DataFrame:
    return run_query(store, "by_bucket", run_ids=_ids(run_ids), include_published=include_published)


def by_source_group(store: Store, run_ids: Sequence[str] | None = None, include_published: bool = True) -> pd.DataFrame:
    return run_query(store, "by_source_group", run_ids=_ids(run_ids), include_published=include_published)


def checkpoint_series(store: Store, family_or_pattern: str = "%", min_points: int = 1) -> pd.DataFrame:
    """Published rows and runs with an epoch or checkpoint number whose name or family matches;
    only series with at least `min_points` points."""
    return run_query(store, "checkpoint_series", pattern=_like(family_or_pattern), min_points=int(min_points))


def tb2lite_vs_tblite(store: Store, base_model: str | None = None) -> pd.DataFrame:
    return run_query(store, "tb2lite_vs_tblite", base_model=base_model)


def equiv_vs_f1(store: Store, first56_only: bool = False, include_runs: bool = True) -> pd.DataFrame:
    """Lab runs' equiv score (not the published score) and harness score, biggest spelling gap first."""
    return run_query(store, "equiv_vs_f1")


def runs(store: Store, order: str = "imported_at") -> pd.DataFrame:
    return run_query(store, "runs", order)


def run_steps(store: Store, run_id: str) -> pd.DataFrame:
    return run_query(store, "run_steps", run_id=run_id)


def step_across_runs(store: Store, step_key: str, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    return run_query(store, "step_across_runs", step_key=step_key, run_ids=_ids(run_ids))


def slice_pair(store: Store, run_a: str, run_b: str, f1_a_min: float = 0.8, f1_b_max: float = 0.2) -> pd.DataFrame:
    """Steps where run A scores F1 >= f1_a_min and run B scores F1 < f1_b_max."""
    return run_query(store, "slice_pair", run_a=run_a, run_b=run_b, f1_a_min=float(f1_a_min), f1_b_max=float(f1_b_max))


def tblite(store: Store) -> pd.DataFrame:
    """The TB Lite / TB 2.1 rows (a separate benchmark and scale)."""
    return run_query(store, "tblite")


def legacy_leaderboard(store: Store) -> pd.DataFrame:
    """The legacy 386-step table (comparable = false)."""
    return run_query(store, "legacy_leaderboard")
