"""Slices: a filter over the steps of runs, as a dataclass, a dict, a URL query and a SQL WHERE."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode

import duckdb
import pandas as pd

from lab.booleans import parse_bool
from lab.engines.logprobs import logprob_settings
from lab.errors import LabError
from lab.triage.db import query_df, query_rows
from lab.triage.flags import BOOLEAN_FLAGS
from lab.triage.taxonomy import FAILURE_KINDS

TASK_COMPLETE_FILTERS = {
    "premature": "coalesce(s.pred_task_complete, FALSE) AND NOT coalesce(s.ref_task_complete, FALSE)",
    "missed": "coalesce(s.ref_task_complete, FALSE) AND NOT coalesce(s.pred_task_complete, FALSE)",
    "wrong": "coalesce(s.pred_task_complete, FALSE) <> coalesce(s.ref_task_complete, FALSE)",
}
TEXT_FIELDS = {
    "commands": "array_to_string(coalesce(s.pred_command_units, []), chr(10))",
    "raw": "coalesce(s.raw_output, s.pred_preview, '')",
}
# a regex is tested on each command unit, and on each line of the raw output (RE2 multi-line)
REGEX_FIELDS = {
    "commands": "len(list_filter(coalesce(s.pred_command_units, []), lambda u: regexp_matches(u, ?))) > 0",
    "raw": "regexp_matches(coalesce(s.raw_output, s.pred_preview, ''), '(?m)' || ?)",
}
ORDER_COLUMNS = {
    "step": "s.task_id, s.step_idx",
    "run": "s.run_id, s.task_id, s.step_idx",
    "command_f1": "s.command_f1",
    "strict_f1": "f.strict_f1",
    "n_ref_units": "s.n_ref_units",
    "n_pred_units": "s.n_pred_units",
    "equiv_f1": "s.equiv_f1",
    "spelling_gap": "(s.equiv_f1 - s.command_f1)",
    "ref_nll": "rl.ref_nll_per_token",  # the reference's NLL per token under the run's model (score-reference)
    "confidence": "s.lp_mean",  # mean log-probability of the answer's tokens
}
# Columns of the step list (the big unit arrays and raw text stay in the store until a step is opened).
LIST_COLUMNS = """s.run_id, r.display_name AS run, s.step_key, s.task_id, s.step_idx, s.bucket, s.source_group,
    s.command_f1, f.strict_f1, s.equiv_f1, round(s.equiv_f1 - s.command_f1, 4) AS spelling_gap, s.first_cmd_exact, s.valid_json, f.failure_kind, s.ref_task_complete,
    s.pred_task_complete, s.n_ref_units, s.n_pred_units, s.finish_reason, f.flags, s.equiv_skipped,
    round(s.lp_mean, 4) AS lp_mean, round(rl.ref_nll_per_token, 4) AS ref_nll,
    (SELECT string_agg(DISTINCT a.tag, ', ' ORDER BY a.tag) FROM annotations a
      WHERE a.run_id = s.run_id AND a.step_key = s.step_key) AS tags"""
FROM_CLAUSE = """FROM steps s JOIN runs r ON r.run_id = s.run_id
LEFT JOIN step_flags f ON f.run_id = s.run_id AND f.step_key = s.step_key
LEFT JOIN step_reference rl ON rl.run_id = s.run_id AND rl.step_key = s.step_key"""


@dataclass
class SliceSpec:
    """Which steps to show. Empty lists and None mean "no condition"; all conditions are ANDed."""

    run_ids: list[str] = field(default_factory=list)
    f1_min: float | None = None
    f1_max: float | None = None
    first_cmd_exact: bool | None = None
    valid_json: bool | None = None
    failure_kinds: list[str] = field(default_factory=list)
    task_complete: str | None = None  # premature | missed | wrong
    buckets: list[str] = field(default_factory=list)
    source_groups: list[str] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    ref_units_min: int | None = None
    ref_units_max: int | None = None
    text: str = ""
    text_regex: bool = False
    text_in: str = "both"  # commands | raw | both
    flags: list[str] = field(default_factory=list)  # step_flags booleans that must all hold
    risk_names: list[str] = field(default_factory=list)  # any of these `destructive:NAME` / `hang:NAME`
    tags: list[str] = field(default_factory=list)  # any of these annotation tags
    order_by: str = "run"
    descending: bool = False
    # equiv_f1 (lab/scoring/equiv; not the published score) and its gap over the harness F1
    equiv_f1_min: float | None = None
    equiv_f1_max: float | None = None
    spelling_gap_min: float | None = None
    # log-probabilities (lab.engines.logprobs): the reference's NLL per token under the run's model, and
    # answers given with high confidence (mean token probability >= assets/logprobs.yaml `confident`) but F1 0
    ref_nll_min: float | None = None
    ref_nll_max: float | None = None
    confidently_wrong: bool | None = None

    # -- dict ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Only the fields that differ from the defaults."""
        default = SliceSpec()
        return {k: v for k, v in asdict(self).items() if v != getattr(default, k)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SliceSpec":
        """Build and check a spec; unknown keys or bad values raise LabError naming the field."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise LabError(f"slice: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")
        spec = cls(**{k: _coerce(k, v, SliceSpec.__dataclass_fields__[k].default) for k, v in data.items()})
        spec.validate()
        return spec

    # -- URL query ----------------------------------------------------------------------------
    def to_query(self) -> str:
        """URL query string (`run_ids=a&run_ids=b&f1_max=0.5…`), the form a shared link carries."""
        pairs: list[tuple[str, str]] = []
        for key, value in self.to_dict().items():
            values = value if isinstance(value, list) else [value]
            pairs.extend((key, _query_text(v)) for v in values)
        return urlencode(pairs)

    @classmethod
    def from_query(cls, query: str | Mapping[str, Any] | Any) -> "SliceSpec":
        """Read a query string, a mapping, or Starlette's QueryParams (gr.Request.query_params).

        Keys that are not slice fields (other tabs' parameters) are ignored.
        """
        if isinstance(query, str):
            items = parse_qsl(query.lstrip("?"), keep_blank_values=False)
        elif hasattr(query, "multi_items"):
            items = list(query.multi_items())
        else:
            items = [(k, x) for k, v in dict(query).items() for x in (v if isinstance(v, (list, tuple)) else [v])]
        known = {f.name: f for f in fields(cls)}
        data: dict[str, Any] = {}
        for key, value in items:
            if key not in known:
                continue
            if isinstance(getattr(cls(), key), list):
                data.setdefault(key, []).append(value)
            else:
                data[key] = value
        return cls.from_dict(data)

    def is_empty(self) -> bool:
        return not self.to_dict()

    # -- checks -------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise LabError naming the field for values the query cannot use."""
        bad_flags = sorted(set(self.flags) - set(BOOLEAN_FLAGS))
        if bad_flags:
            raise LabError(f"slice field 'flags': unknown {', '.join(bad_flags)}; use {', '.join(BOOLEAN_FLAGS)}")
        bad_kinds = sorted(set(self.failure_kinds) - set(FAILURE_KINDS))
        if bad_kinds:
            raise LabError(f"slice field 'failure_kinds': unknown {', '.join(bad_kinds)}; use {', '.join(FAILURE_KINDS)}")
        if self.task_complete and self.task_complete not in TASK_COMPLETE_FILTERS:
            raise LabError(f"slice field 'task_complete': {self.task_complete!r}; use {', '.join(TASK_COMPLETE_FILTERS)}")
        if self.text_in not in (*TEXT_FIELDS, "both"):
            raise LabError(f"slice field 'text_in': {self.text_in!r}; use commands, raw or both")
        if self.order_by not in ORDER_COLUMNS:
            raise LabError(f"slice field 'order_by': {self.order_by!r}; use {', '.join(ORDER_COLUMNS)}")
        for lo, hi in (("f1_min", "f1_max"), ("ref_units_min", "ref_units_max"), ("equiv_f1_min", "equiv_f1_max"),
                       ("ref_nll_min", "ref_nll_max")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise LabError(f"slice fields '{lo}' ({a}) and '{hi}' ({b}): the minimum is above the maximum")
        if self.text and self.text_regex:
            check_regex(self.text)


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Turn strings from a URL / UI into the field's type; LabError naming the field otherwise."""
    kind = SliceSpec.__dataclass_fields__[name].type
    try:
        if value is None or value == "":
            return [] if "list" in str(kind) else (None if "None" in str(kind) else default)
        if "list" in str(kind):
            items = value if isinstance(value, (list, tuple)) else [value]
            return [str(v) for v in items if str(v) != ""]
        if "bool" in str(kind):
            parsed = parse_bool(value)
            if parsed is None:
                raise ValueError("expected true or false")
            return parsed
        if "float" in str(kind):
            return float(value)
        if "int" in str(kind):
            return int(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise LabError(f"slice field '{name}': cannot use {value!r} ({exc})") from None


def check_regex(pattern: str) -> None:
    """Compile the pattern with DuckDB's regex engine (RE2); LabError with its message if invalid."""
    try:
        duckdb.connect().execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except duckdb.Error as exc:
        raise LabError(f"slice field 'text': invalid regular expression {pattern!r}: {exc}") from None


def slice_where(spec: SliceSpec) -> tuple[str, list[Any]]:
    """The WHERE clause (aliases s = steps, f = step_flags) and its parameters.

    Only whitelisted column expressions are written into the SQL; every value is a `?` parameter.
    """
    spec.validate()
    conds: list[str] = []
    params: list[Any] = []

    def add(sql: str, *values: Any) -> None:
        conds.append(sql)
        params.extend(values)

    if spec.run_ids:
        add("list_contains(?, s.run_id)", list(spec.run_ids))
    if spec.f1_min is not None:
        add("s.command_f1 >= ?", spec.f1_min)
    if spec.f1_max is not None:
        add("s.command_f1 <= ?", spec.f1_max)
    if spec.equiv_f1_min is not None:
        add("s.equiv_f1 >= ?", spec.equiv_f1_min)
    if spec.equiv_f1_max is not None:
        add("s.equiv_f1 <= ?", spec.equiv_f1_max)
    if spec.spelling_gap_min is not None:
        add("s.equiv_f1 - s.command_f1 >= ?", spec.spelling_gap_min)
    if spec.ref_nll_min is not None:
        add("rl.ref_nll_per_token >= ?", spec.ref_nll_min)
    if spec.ref_nll_max is not None:
        add("rl.ref_nll_per_token <= ?", spec.ref_nll_max)
    if spec.confidently_wrong is not None:
        confident = math.log(logprob_settings()["confident"])
        test = "(s.lp_mean IS NOT NULL AND s.lp_mean >= ? AND coalesce(s.command_f1, 0) = 0)"
        add(test if spec.confidently_wrong else f"NOT {test}", confident)
    if spec.first_cmd_exact is not None:
        add("(s.first_cmd_exact >= 1.0) = ?", spec.first_cmd_exact)
    if spec.valid_json is not None:
        add("coalesce(s.valid_json, FALSE) = ?", spec.valid_json)
    if spec.failure_kinds:
        add("list_contains(?, f.failure_kind)", list(spec.failure_kinds))
    if spec.task_complete:
        add(TASK_COMPLETE_FILTERS[spec.task_complete])
    if spec.buckets:
        add("list_contains(?, s.bucket)", list(spec.buckets))
    if spec.source_groups:
        add("list_contains(?, s.source_group)", list(spec.source_groups))
    if spec.task_ids:
        add("list_contains(?, s.task_id)", list(spec.task_ids))
    if spec.ref_units_min is not None:
        add("s.n_ref_units >= ?", spec.ref_units_min)
    if spec.ref_units_max is not None:
        add("s.n_ref_units <= ?", spec.ref_units_max)
    if spec.text:
        columns = list(TEXT_FIELDS.values()) if spec.text_in == "both" else [TEXT_FIELDS[spec.text_in]]
        if spec.text_regex:  # anchored per command (commands) and per line (raw output): `^cd` finds any `cd …`
            regex = [REGEX_FIELDS["commands" if c == TEXT_FIELDS["commands"] else "raw"] for c in columns]
            add("(" + " OR ".join(regex) + ")", *[spec.text] * len(columns))
        else:
            add("(" + " OR ".join(f"contains(lower({c}), lower(?))" for c in columns) + ")", *[spec.text] * len(columns))
    for flag in spec.flags:  # names checked against BOOLEAN_FLAGS in validate()
        add(f"coalesce(f.{flag}, FALSE)")
    if spec.risk_names:
        add("list_has_any(coalesce(f.flags, []), ?::VARCHAR[])", list(spec.risk_names))
    if spec.tags:
        add(
            "EXISTS (SELECT 1 FROM annotations a WHERE a.run_id = s.run_id AND a.step_key = s.step_key"
            " AND list_contains(?, a.tag))",
            list(spec.tags),
        )
    return ("WHERE " + " AND ".join(conds)) if conds else "", params


def _order(spec: SliceSpec) -> str:
    direction = " DESC" if spec.descending else ""
    cols = ORDER_COLUMNS[spec.order_by]
    return ", ".join(c + direction for c in cols.split(", ")) + ", s.run_id, s.task_id, s.step_idx"


def count_slice(store: Any, spec: SliceSpec) -> int:
    """Number of steps in the slice."""
    where, params = slice_where(spec)
    return int(query_rows(store, f"SELECT count(*) {FROM_CLAUSE} {where}", params)[0][0])


def slice_steps(
    store: Any, spec: SliceSpec, limit: int | None = None, offset: int = 0, columns: str = LIST_COLUMNS
) -> pd.DataFrame:
    """The steps of the slice (one page when `limit` is given), ordered by `spec.order_by`."""
    where, params = slice_where(spec)
    sql = f"SELECT {columns} {FROM_CLAUSE} {where} ORDER BY {_order(spec)}"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        params = [*params, int(limit), int(offset)]
    try:
        return query_df(store, sql, params)
    except duckdb.InvalidInputException as exc:  # e.g. a regex RE2 accepts to compile but not to run
        raise LabError(f"slice: {exc}") from None


def spec_to_json(spec: SliceSpec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True)


def spec_from_json(text: str) -> SliceSpec:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"slice JSON: {exc}") from None
    return SliceSpec.from_dict(data)
