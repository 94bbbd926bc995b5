"""`python app.py --mcp`: Gradio's MCP server offers the lab's tools (and only them), with typed arguments and
short descriptions; an agent driving them with the `mcp` client over loopback gets the figures the CLI prints
(`compare --json`, `results series show`, the store's steps). On a public deployment the same tools run under
the per-client limit, and the page's own endpoints are not tools."""
from __future__ import annotations

import asyncio
import csv
import io
import json

import pytest

from lab.store.opening import open_store
from tests.helpers_app import app_process, lab_env, run_lab_cli
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

mcp = pytest.importorskip("mcp", reason="Gradio's MCP extra (pip install 'gradio[mcp]==6.31.0')")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamablehttp_client  # noqa: E402

TOOLS = {"list_runs", "compare_runs", "series_table", "slice_steps_page", "step_columns"}


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    results = make_results_dir(root)
    for name, shift, seed in (("base", 0.0, 1), ("better", 0.06, 2)):
        write(results / "runs", name, variant(name, shift=shift, seed=seed))
    for step, shift in ((100, 0.0), (200, 0.03), (300, 0.05)):
        write(results / "runs", f"sft-checkpoint-{step}", variant(f"sft-checkpoint-{step}", shift=shift, seed=step))
    open_store(root / "lab.duckdb", results).close()
    return root, results


def app_args(root, results) -> list[str]:
    return ["--results", str(results), "--replay", str(EXCERPT), "--mcp"]


def env_for(root, **extra):
    return lab_env(LAB_DB=str(root / "lab.duckdb"), LAB_CACHE_DIR=str(root / "cache"), **extra)


async def _session(url: str, calls):
    async with streamablehttp_client(f"{url}gradio_api/mcp/") as (read, write_, _):
        async with ClientSession(read, write_) as session:
            await session.initialize()
            return await calls(session)


def with_session(url: str, calls):
    return asyncio.run(_session(url, calls))


async def _call(session, name: str, **arguments) -> dict:
    result = await session.call_tool(name, arguments)
    return json.loads(result.content[0].text)


@pytest.fixture(scope="module")
def local_lab(lab_dir, tmp_path_factory):
    root, results = lab_dir
    log = tmp_path_factory.mktemp("mcp-log") / "app.log"
    with app_process(app_args(root, results), log, env_for(root)) as (url, _):
        yield url


def test_the_tools_a_client_sees(local_lab):
    listed = with_session(local_lab, lambda s: s.list_tools())
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS  # the page's own endpoints (generate, add_engine …) are not tools
    compare = tools["compare_runs"]
    assert compare.description.startswith("Is the candidate run really better than the baseline?")
    props = compare.inputSchema["properties"]
    assert props["baseline"]["type"] == "string" and props["resamples"]["type"] == "integer"
    assert "display name" in props["baseline"]["description"]
    assert set(compare.inputSchema["required"]) == {"baseline", "candidate"}
    assert tools["step_columns"].inputSchema["properties"]["runs"]["type"] == "array"
    for tool in tools.values():  # every argument is typed and described, every tool says what it answers
        assert tool.description and "Returns:" in tool.description
        assert all(p.get("type") and p.get("description") for p in tool.inputSchema["properties"].values()), tool.name
    assert tools["slice_steps_page"].inputSchema["properties"]["query"]["description"].endswith("or a Triage link")


def test_compare_gives_the_cli_figures(lab_dir, local_lab):
    root, results = lab_dir
    got = with_session(local_lab, lambda s: _call(s, "compare_runs", baseline="base", candidate="better",
                                                   resamples=2000, seed=7))
    cli = run_lab_cli(["compare", "base", "better", "--json", "--resamples", "2000", "--seed", "7",
                       "--db", str(root / "lab.duckdb"), "--results", str(results), "--replay", str(EXCERPT)],
                      env=env_for(root))  # the app's replay: the equiv row says the same about it
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    expected.pop("gate")
    assert got == expected
    assert got["metrics"]["score"]["ci"][0] > 0 and got["metrics"]["score"]["verdict"] == "better"


def test_a_series_table_is_the_cli_table(lab_dir, local_lab):
    root, results = lab_dir
    names = with_session(local_lab, lambda s: _call(s, "series_table"))
    assert names == {"series_names": ["sft"]}
    got = with_session(local_lab, lambda s: _call(s, "series_table", series="sft"))
    cli = run_lab_cli(["results", "--db", str(root / "lab.duckdb"), "--results", str(results), "series", "show", "sft"],
                      env=env_for(root))
    assert cli.returncode == 0, cli.stderr
    table = [r for r in csv.DictReader(io.StringIO(cli.stdout)) if not r["position"].startswith("#")]
    assert [{k: str(v) for k, v in row.items()} for row in got["rows"]] == table
    assert got["notes"][0] in cli.stdout


def test_a_slice_and_a_step(lab_dir, local_lab):
    root, results = lab_dir
    got = with_session(local_lab, lambda s: _call(s, "slice_steps_page",
                                                   query=f"{local_lab}?tab=triage&run_ids=base&f1_max=0.3&order_by=command_f1",
                                                   page=1))
    with open_store(root / "lab.duckdb", results, sync=False) as store:
        base = store.scalar("SELECT run_id FROM runs WHERE display_name = 'base'")
        total = store.scalar("SELECT count(*) FROM steps WHERE run_id = ? AND command_f1 <= 0.3", [base])
    assert got["total"] == total and len(got["steps"]) == min(50, total)
    assert all(s["command_f1"] <= 0.3 and s["run"] == "base" for s in got["steps"])
    assert [s["command_f1"] for s in got["steps"]] == sorted(s["command_f1"] for s in got["steps"])
    key = got["steps"][0]["step_key"]
    step = with_session(local_lab, lambda s: _call(s, "step_columns", step=key, runs=["base", "better"]))
    cli = run_lab_cli(["results", "--db", str(root / "lab.duckdb"), "--results", str(results), "sql",
                       f"SELECT r.display_name, s.command_f1 FROM steps s JOIN runs r USING (run_id) "
                       f"WHERE s.step_key = '{key}' AND r.display_name IN ('base', 'better')"], env=env_for(root))
    rows = list(csv.DictReader(io.StringIO(cli.stdout)))
    assert {c["name"]: c["command_f1"] for c in step["columns"]} == {r["display_name"]: float(r["command_f1"])
                                                                      for r in rows}
    assert step["step"] == key and step["reference_units"] and step["missing"] == []


@pytest.mark.parametrize("tool, arguments, says", [
    ("compare_runs", {"baseline": "nosuch", "candidate": "base"}, "names no run of the store"),
    ("compare_runs", {"baseline": "base", "candidate": "better", "resamples": 10**9}, "use 100 to"),
    ("compare_runs", {"baseline": "x" * 10_000, "candidate": "base"}, "name a run by its id"),
    ("compare_runs", {"baseline": "base", "candidate": "better", "seed": -1}, "seed -1: use a whole number"),
    ("series_table", {"series": "<script>alert(1)</script>"}, "no checkpoint series"),
    ("slice_steps_page", {"query": "f1_max=abc"}, "slice field 'f1_max'"),
    ("slice_steps_page", {"query": "x" * 10_000}, "at most 4,000"),
    ("slice_steps_page", {"query": "text=(&text_regex=true"}, "invalid regular expression"),
    ("step_columns", {"step": "../../etc/passwd", "runs": ["base"]}, "none of these runs has a step"),
    ("step_columns", {"step": "task-000/0", "runs": ["base"] * 9}, "name 1 to 8 runs"),
])
def test_bad_arguments_get_one_line(local_lab, tool, arguments, says):
    """Each refusal is the tool's own one line (arguments of the wrong JSON type are refused by the MCP server's
    schema check before the tool runs)."""
    got = with_session(local_lab, lambda s: _call(s, tool, **arguments))
    assert set(got) == {"error"} and says in got["error"] and "\n" not in got["error"] and len(got["error"]) <= 600


def test_a_public_deployment_offers_the_tools_under_the_client_limit(lab_dir, tmp_path):
    root, results = lab_dir
    env = env_for(root, LAB_PUBLIC="1", LAB_CLIENT_TOOL_CALLS="1", LAB_TOOL_CALLS="4")
    with app_process(app_args(root, results), tmp_path / "public.log", env) as (url, _):
        listed = with_session(url, lambda s: s.list_tools())
        assert {t.name for t in listed.tools} == TOOLS

        async def two_at_once(session):
            calls = [_call(session, "compare_runs", baseline="base", candidate="better", resamples=10000, seed=s)
                     for s in (11, 12, 13)]
            return await asyncio.gather(*calls)

        answers = with_session(url, two_at_once)
        refused = [a for a in answers if "error" in a]
        assert refused and all("at most 1 tool calls at once" in a["error"] for a in refused)
        assert any("metrics" in a for a in answers)
        runs = with_session(url, lambda s: _call(s, "list_runs", name_contains="checkpoint"))
        assert runs["total"] == 3
        called = with_session(url, lambda s: s.call_tool("add_engine", {"spec": "reference"}))
        assert called.isError  # the page's endpoints are not tools an agent can call
