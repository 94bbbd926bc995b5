"""The shipped catalogue's series: the duplicate parent checkpoint joins the parent-run series, each
checkpoint-27 / -final pair is a two-point series, and catalogue.csv is exactly what the rules give."""
from __future__ import annotations

import csv

from lab.published.catalogue import CATALOGUE_PATH, classify, join_finals, load_catalogue, load_rules, series_names

PAIRS = ("LFM2-2.6B-terminal-sft-h200-4gpu", "LFM2.5-1.2B-Base-terminal-sft-h200-4gpu",
         "LFM2-8B-Terminal-SFT-Unsloth-H200-local")


def test_parent_checkpoint_joins_the_parent_run_series():
    series = series_names(load_catalogue())
    parent = series["ECHO RLVR parent run (LFM2.5-8B-A1B)"]
    assert any(k.endswith("/lfm25-echo-rlvr-parent-checkpoint-1880") for k in parent)
    assert any(k.endswith("/lfm25-echo-rlvr-parentrun-checkpoint-1880") for k in parent)
    assert "lfm25-echo-rlvr-parent" not in series


def test_checkpoint_27_and_final_pairs_are_two_point_series():
    series = series_names(load_catalogue())
    for name in PAIRS:
        keys = series[name]
        assert len(keys) == 2, (name, keys)
        assert keys[0].endswith(f"{name}-checkpoint-27") and keys[1].endswith(f"{name}-final")  # final drawn last
        assert "probe" not in " ".join(keys)  # smoke tests stay out


def test_catalogue_matches_the_rules():
    rules = load_rules()
    rows = list(csv.DictReader(open(CATALOGUE_PATH, encoding="utf-8", newline="")))
    expected = join_finals([{**r, **classify(r["path"], rules)} for r in rows], rules)
    for row, want in zip(rows, expected):
        got = (row["series"] or None, row["x_kind"] or None, int(row["x"]) if row["x"] else None)
        assert got == (want["series"], want["x_kind"], want["x"]), row["run"]
