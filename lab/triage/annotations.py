"""Tags and notes on any step of any run, stored in DuckDB with who and when."""
from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

import pandas as pd

from lab.errors import LabError
from lab.triage.db import ensure_triage_schema, query_df, query_dicts, write_transaction

MAX_TAG_CHARS = 64
MAX_NOTE_CHARS = 4000


@dataclass(frozen=True)
class Annotation:
    id: int
    run_id: str
    step_key: str
    tag: str
    note: str | None
    author: str | None
    created_at: datetime


def add_annotation(
    store: Any, run_id: str, step_key: str, tag: str, note: str = "", author: str = ""
) -> int:
    """Store a tag (and optional note) on one step of one run; return its id."""
    tag = (tag or "").strip()
    if not tag:
        raise LabError("annotation: the tag is empty; type a short tag such as 'hallucinated-path'")
    if len(tag) > MAX_TAG_CHARS:
        raise LabError(f"annotation: the tag has {len(tag)} characters; keep it under {MAX_TAG_CHARS}")
    if len(note or "") > MAX_NOTE_CHARS:
        raise LabError(f"annotation: the note has {len(note)} characters; keep it under {MAX_NOTE_CHARS}")
    ensure_triage_schema(store)
    with write_transaction(store, "annotations") as cur:
        exists = cur.execute(
            "SELECT count(*) FROM steps WHERE run_id = ? AND step_key = ?", [run_id, step_key]
        ).fetchone()[0]
        if not exists:
            raise LabError(f"annotation: run {run_id!r} has no step {step_key!r}; pick a step from the list")
        same = cur.execute(
            "SELECT tag FROM annotations WHERE run_id = ? AND step_key = ? AND lower(tag) = lower(?)",
            [run_id, step_key, tag],
        ).fetchone()
        if same:
            raise LabError(f"annotation: step {step_key} of run {run_id} already has the tag '{same[0]}'")
        row = cur.execute(
            "INSERT INTO annotations (run_id, step_key, tag, note, author, created_at) VALUES (?, ?, ?, ?, ?, ?)"
            " RETURNING id",
            [run_id, step_key, tag, (note or "").strip() or None, (author or "").strip() or None,
             datetime.now(timezone.utc).replace(tzinfo=None)],
        ).fetchone()
    return int(row[0])


def delete_annotation(store: Any, annotation_id: int) -> None:
    """Remove one annotation by id."""
    with write_transaction(store, "annotations") as cur:
        cur.execute("DELETE FROM annotations WHERE id = ?", [int(annotation_id)])


def annotations_for(store: Any, run_id: str, step_key: str) -> list[Annotation]:
    """All annotations of one step of one run, oldest first."""
    ensure_triage_schema(store)
    rows = query_dicts(
        store,
        "SELECT id, run_id, step_key, tag, note, author, created_at FROM annotations"
        " WHERE run_id = ? AND step_key = ? ORDER BY created_at, id",
        [run_id, step_key],
    )
    return [Annotation(**r) for r in rows]


def annotations_table(store: Any, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Annotations (of some runs, or all), newest first, with the run's display name."""
    ensure_triage_schema(store)
    where, params = ("WHERE list_contains(?, a.run_id)", [list(run_ids)]) if run_ids else ("", [])
    return query_df(
        store,
        f"""SELECT a.id, a.run_id, r.display_name AS run, a.step_key, a.tag, a.note, a.author, a.created_at
            FROM annotations a LEFT JOIN runs r ON r.run_id = a.run_id {where}
            ORDER BY a.created_at DESC, a.id DESC""",
        params,
    )


def tags_in_use(store: Any) -> list[str]:
    """Distinct tags, most used first (for the tag pickers)."""
    ensure_triage_schema(store)
    rows = query_dicts(store, "SELECT tag, count(*) AS n FROM annotations GROUP BY tag ORDER BY n DESC, tag")
    return [r["tag"] for r in rows]


def annotation_badges_html(annotations: Sequence[Annotation]) -> str:
    """Small HTML badges (tag, with note/author/time as tooltip) for wherever a step is shown."""
    if not annotations:
        return ""
    badges = []
    for a in annotations:
        when = a.created_at.strftime("%Y-%m-%d %H:%M") if isinstance(a.created_at, datetime) else str(a.created_at)
        tip = " · ".join(x for x in (a.note, a.author, when) if x)
        badges.append(
            '<span class="triage-tag" style="display:inline-block;margin:0 4px 2px 0;padding:1px 8px;'
            'border-radius:10px;background:#fde68a;color:#78350f;font-size:12px" '
            f'title="{html.escape(tip, quote=True)}">{html.escape(a.tag)}</span>'
        )
    return '<span class="triage-tags">' + "".join(badges) + "</span>"


def step_badges_html(store: Any, run_id: str, step_key: str) -> str:
    """Badges of one step, straight from the store (what the Compare tab calls)."""
    return annotation_badges_html(annotations_for(store, run_id, step_key))
