"""The one engine-loading loop of the CLI commands (lab.runs.cli_engines): each SPEC in turn, a refused or
unloadable one reported in one line and counted, the next one still loaded. Real engines (reference and
stored:), no model needed."""
from __future__ import annotations

import pytest

from lab.errors import EngineSpecError, LabError
from lab.runs.cli_engines import CliEngines


def test_each_spec_loads_in_turn_and_failures_are_counted_in_one_line(capsys):
    def check(engine) -> None:
        if engine.name == "second":
            raise LabError("run name 'second' is taken")

    engines = CliEngines(["reference", "stored:/nonexistent/run.json?name=gone", "reference?name=second",
                          "reference?name=third"], check=check)
    loaded = []
    for spec, engine in engines:
        loaded.append((spec, engine.name))
        assert engines.load_seconds is not None and engines.load_seconds >= 0
        engine.close()
    assert loaded == [("reference", "reference"), ("reference?name=third", "third")]
    assert engines.failures == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["error: stored:/nonexistent/run.json?name=gone: stored engine: /nonexistent/run.json: no such "
                     "result file", "error: reference?name=second: run name 'second' is taken"]
    engines.fail("reference", "answered with an error")
    assert engines.failures == 3 and capsys.readouterr().err == "error: reference: answered with an error\n"


def test_a_spec_that_is_no_spec_stops_the_command():
    """A malformed SPEC is the command's argument error (one line from the CLI), not a counted failure."""
    with pytest.raises(EngineSpecError):
        list(CliEngines(["nosuchkind:x"]))
