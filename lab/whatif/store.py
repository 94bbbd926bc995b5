"""Where what-if edits and their answers are kept: the DuckDB store (own tables), or a visitor's
session (in memory) on a public lab. Both answer the same calls; `export_jsonl` writes either."""
from __future__ import annotations

import json
import threading
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Iterable, Protocol

from lab.store.db import Store
from lab.whatif.edit import EditError, WhatIf
from lab.whatif.run import WhatIfResult, result_from_record
from lab.whatif.validate import check_whatif, limits

SCHEMA_PATH = Path(__file__).with_name("schema.sql")
RESULT_COLUMNS = ("edit_id", "step_key", "engine_spec", "engine_name", "engine_kind", "model_id", "patch",
                  "prompt_status", "prompt_tokens", "raw_output", "pred_units", "ref_units", "metrics",
                  "command_f1", "valid_json", "latency_s", "error", "answers_from_data", "created_at")


class WhatIfKeeper(Protocol):
    """What the page and the CLI need from a place that keeps what-ifs."""

    shared: bool

    def save_edit(self, whatif: WhatIf) -> str: ...
    def save_result(self, result: WhatIfResult) -> None: ...
    def edits(self, step_key: str | None = None) -> list[WhatIf]: ...
    def get_edit(self, edit_id: str) -> WhatIf: ...
    def results(self, edit_id: str | None = None) -> list[WhatIfResult]: ...


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class DuckWhatIfStore:
    """What-ifs in the lab's DuckDB file (tables whatif_edits, whatif_results)."""

    shared = True

    def __init__(self, store: Store) -> None:
        self.store = store
        store.ensure_schema(SCHEMA_PATH)

    def save_edit(self, whatif: WhatIf) -> str:
        """Insert the edit (once: the same edit saved again keeps its first row); returns its id."""
        check_whatif(whatif)
        with self.store.writes("whatif"):
            self.store.execute(
                "INSERT INTO whatif_edits VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [whatif.edit_id, whatif.step_key, whatif.fields, json.dumps([e.to_dict() for e in whatif.edits]),
                 whatif.note, whatif.created_by, _now()],
            )
        return whatif.edit_id

    def save_result(self, result: WhatIfResult) -> None:
        rec = {**result.record(), "command_f1": result.f1, "created_at": result.created_at}
        values = [json.dumps(rec[c]) if c in ("pred_units", "ref_units", "metrics") else rec[c] for c in RESULT_COLUMNS]
        cols = ", ".join(RESULT_COLUMNS)
        with self.store.writes("whatif"):
            self.store.execute(f"INSERT INTO whatif_results ({cols}) VALUES ({', '.join('?' * len(values))})", values)

    def edits(self, step_key: str | None = None) -> list[WhatIf]:
        rows = self.store.dicts(
            "SELECT step_key, edits, note, created_by FROM whatif_edits WHERE ? IS NULL OR step_key = ? "
            "ORDER BY created_at, edit_id", [step_key, step_key])
        return [WhatIf.from_dict({**r, "edits": json.loads(r["edits"])}) for r in rows]

    def get_edit(self, edit_id: str) -> WhatIf:
        rows = self.store.dicts("SELECT step_key, edits, note, created_by FROM whatif_edits WHERE edit_id = ?", [edit_id])
        if not rows:
            raise EditError(f"no saved what-if '{edit_id}' (list them with `python -m lab whatif list`)")
        return WhatIf.from_dict({**rows[0], "edits": json.loads(rows[0]["edits"])})

    def results(self, edit_id: str | None = None) -> list[WhatIfResult]:
        rows = self.store.dicts(
            f"SELECT {', '.join(RESULT_COLUMNS)} FROM whatif_results WHERE ? IS NULL OR edit_id = ? "
            "ORDER BY result_id", [edit_id, edit_id])
        return [result_from_record(r) for r in rows]


def whatif_bytes(whatif: WhatIf) -> int:
    """UTF-8 bytes an edit keeps in memory (its texts and note)."""
    texts = [whatif.step_key, whatif.note, *(t for e in whatif.edits for t in (e.field, e.old, e.new))]
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def result_bytes(result: WhatIfResult) -> int:
    """UTF-8 bytes of an answer kept in memory (its JSON form)."""
    return len(json.dumps(asdict(result), ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))


class SessionWhatIfStore:
    """What-ifs of one visitor of a public lab: in memory, never written to the shared store."""

    shared = False

    def __init__(self) -> None:
        self._edits: dict[str, WhatIf] = {}
        self._results: list[WhatIfResult] = []
        self._lock = threading.Lock()
        self.held_bytes = 0  # UTF-8 bytes of the edits' texts and the answers kept

    def _make_room(self, size: int, what: str) -> None:
        cap = limits()["max_session_bytes"]
        if self.held_bytes + size > cap:
            raise EditError(f"this session already holds {self.held_bytes} bytes of what-ifs and {what} "
                            f"would pass the cap of {cap} bytes; export them and reload the page to start afresh")
        self.held_bytes += size

    def save_edit(self, whatif: WhatIf) -> str:
        check_whatif(whatif)
        with self._lock:
            if whatif.edit_id in self._edits:
                return whatif.edit_id
            if len(self._edits) >= limits()["max_session_whatifs"]:
                raise EditError(f"this session already holds {len(self._edits)} what-ifs (the cap); "
                                "export them and reload the page to start afresh")
            self._make_room(whatif_bytes(whatif), "this edit")
            self._edits[whatif.edit_id] = whatif
        return whatif.edit_id

    def save_result(self, result: WhatIfResult) -> None:
        with self._lock:
            self._make_room(result_bytes(result), "this answer")
            self._results.append(result)

    def edits(self, step_key: str | None = None) -> list[WhatIf]:
        with self._lock:
            return [w for w in self._edits.values() if step_key is None or w.step_key == step_key]

    def get_edit(self, edit_id: str) -> WhatIf:
        with self._lock:
            if edit_id not in self._edits:
                raise EditError(f"no what-if '{edit_id}' in this session")
            return self._edits[edit_id]

    def results(self, edit_id: str | None = None) -> list[WhatIfResult]:
        with self._lock:
            return [r for r in self._results if edit_id is None or r.edit_id == edit_id]


def export_records(keeper: WhatIfKeeper, edit_ids: Iterable[str] | None = None) -> list[dict]:
    """One dict per edit: the edit (field, old, new) and every answer recorded for it."""
    wanted = None if edit_ids is None else set(edit_ids)
    out = []
    for whatif in keeper.edits():
        if wanted is not None and whatif.edit_id not in wanted:
            continue
        out.append({**whatif.to_dict(), "results": [r.record() for r in keeper.results(whatif.edit_id)]})
    return out


def export_jsonl(keeper: WhatIfKeeper, out: IO[str], edit_ids: Iterable[str] | None = None) -> int:
    """Write `export_records` as JSON lines; returns the number of edits written."""
    records = export_records(keeper, edit_ids)
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(records)
