"""Joining a series that does not exist (issue: `series join tiny-base nosuchseries --at 0` said "placed in
nosuchseries", exit 0, and the run vanished from its series, since a series of one run was not listed): it
asks for --new, --new refuses a series that exists, the line says where the run was, and `series list` shows
series of one run."""
from __future__ import annotations

import pytest

from lab.cli import main
from lab.store.opening import open_store
from lab.store.series import series_frame
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("series-join")
    results = make_results_dir(root)
    for i, name in enumerate(("myrun-checkpoint-100", "myrun-checkpoint-200", "tiny-base")):
        write_stored_run(results / "runs" / f"{name}.json", name, offset=i)
    open_store(root / "lab.duckdb", results).close()
    return ["results", "--db", str(root / "lab.duckdb"), "--results", str(results)], root / "lab.duckdb", results


def series_of(lab, name: str) -> set[str]:
    _, db, results = lab
    store = open_store(db, results)
    try:
        frame = series_frame(store, min_runs=1)
        return set(frame.loc[frame["name"].str.split(" [", regex=False).str[0] == name, "series"])
    finally:
        store.close()


def test_a_join_into_a_series_not_in_the_store_asks_for_new(lab, capsys):
    cli, _, _ = lab
    assert main([*cli, "series", "join", "tiny-base", "myrun", "--at", "0"]) == 0
    assert capsys.readouterr().out.strip() == "placed in myrun at checkpoint step 0"
    assert main([*cli, "series", "join", "tiny-base", "nosuchseries", "--at", "0"]) == 2
    err = capsys.readouterr().err
    assert "no series 'nosuchseries'" in err and "--new" in err and len(err.strip().splitlines()) == 1
    assert series_of(lab, "tiny-base") == {"myrun"}  # nothing moved
    assert main([*cli, "series", "join", "tiny-base", "myrun", "--at", "0", "--new"]) == 2
    assert "drop --new" in capsys.readouterr().err
    assert main([*cli, "series", "join", "tiny-base", "  nosuchseries ", "--at", "0", "--new"]) == 0
    assert capsys.readouterr().out.strip() == "started series nosuchseries at checkpoint step 0 (it was in series myrun)"
    assert main([*cli, "series", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.startswith("nosuchseries,") and ",tiny-base [" in line for line in listed), listed  # one run
    assert sum(line.startswith("myrun,") for line in listed) == 2
    assert main([*cli, "series", "join", "tiny-base", "nosuchseries", "--at", "3"]) == 0  # it exists now
    assert main([*cli, "series", "leave", "tiny-base"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("series, message", [("", "series name is empty"), ("x" * 201, "longer than 200"),
                                             ("\n\t", "series name is empty")])
def test_a_bad_series_name_is_one_line_whatever_new_says(lab, capsys, series, message):
    cli, _, _ = lab
    for new in ([], ["--new"]):
        assert main([*cli, "series", "join", "tiny-base", series, "--at", "0", *new]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
