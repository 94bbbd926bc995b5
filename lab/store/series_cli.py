"""`python -m lab results series …`: place a run in a checkpoint series (the base model too), take it out,
list the series, or show one against its first point with intervals (lab.analysis.series_judgement,
which lab.cli passes in: the analysis sits above the store)."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from lab.errors import LabError
from lab.store.db import Store

ShowSeries = Callable[[Store, str], int]


def add_series_arguments(sub) -> None:
    p = sub.add_parser("series", help="checkpoint series: place a run at a position, take it out, list, show")
    act = p.add_subparsers(dest="series_command", required=True)
    join = act.add_parser("join", help="place RUN (run id or name) in SERIES at a position (the base model: 0)")
    join.add_argument("run", metavar="RUN", help="the run: its id or name (python -m lab results list)")
    join.add_argument("series", metavar="SERIES", help="the series name (python -m lab results series list)")
    join.add_argument("--at", required=True, metavar="N", help="position: checkpoint step or epoch (whole number)")
    join.add_argument("--epoch", action="store_true", help="the position is an epoch, not a checkpoint step")
    join.add_argument("--new", action="store_true", help="start SERIES with this run (a series not in the store yet)")
    leave = act.add_parser("leave", help="take RUN's placement away (its name or the catalogue give its series again)")
    leave.add_argument("run", metavar="RUN", help="the run: its id or name")
    act.add_parser("list", help="the series of the store (series of one run too) and their runs in order")
    show = act.add_parser("show", help="SERIES point by point against its first point (CSV)")
    show.add_argument("series", metavar="SERIES", help="the series name (python -m lab results series list)")


def run_series(store: Store, args: argparse.Namespace, show_series: ShowSeries | None = None) -> int:
    """`show_series(store, series)` prints a series' judgement (lab.analysis, above the store: lab.cli passes it)."""
    from lab.store.run_lookup import find_run
    from lab.store.series import series_frame
    from lab.store.series_members import leave_series

    cmd = args.series_command
    if cmd == "join":
        print(_join(store, find_run(store, args.run), args))
        return 0
    if cmd == "leave":
        print("taken out" if leave_series(store, find_run(store, args.run)) else "it had no placement")
        return 0
    if cmd == "list":
        frame = series_frame(store, min_runs=1)
        frame[["series", "x_kind", "x", "name", "run_id", "score", "ref_nll"]].to_csv(sys.stdout, index=False)
        return 0
    if show_series is None:
        raise LabError("`results series show` needs the series' judgement, which `python -m lab` passes in")
    return show_series(store, args.series)


def _join(store: Store, run_id: str, args: argparse.Namespace) -> str:
    """Place the run; a series not in the store needs --new (a typo never moves a run out of its series), and
    --new a series that is not there yet. The line says where the run is now and where it was."""
    from lab.store.series import series_frame
    from lab.store.series_members import join_series, series_name

    name = series_name(args.series)
    frame = series_frame(store, min_runs=1)
    exists = bool((frame["series"] == name).any()) if not frame.empty else False
    if not exists and not args.new:
        raise LabError(f"no series '{name}' in the store: pass --new to start it with this run, or give one of "
                       "`python -m lab results series list`")
    if exists and args.new:
        raise LabError(f"series '{name}' is in the store already: drop --new to place the run in it")
    before = frame.loc[frame["run_id"] == run_id, "series"] if not frame.empty else frame
    series, x, kind = join_series(store, run_id, name, args.at, "epoch" if args.epoch else "checkpoint step")
    was = str(before.iloc[0]) if len(before) and before.iloc[0] != series else None
    line = f"{'started series' if args.new else 'placed in'} {series} at {kind} {x}"
    return line + (f" (it was in series {was})" if was else "")
