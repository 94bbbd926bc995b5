"""A dataset folder or Hub repository is input like any other: `results import` of a hostile one (paths out of
the folder, YAML bombs, broken or oversized Parquet, values the result-file validator refuses, a made-up
aggregate, names with path separators) is refused in one line (exit 2) and writes nothing."""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab.cli import main
from lab.errors import LabError
from lab.store.dataset import parquet_read, restore
from lab.store.dataset.hub import files_to_fetch, parse_source
from lab.store.dataset.layout import META_KEY
from lab.store.opening import open_store
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir

CONFIG = "tiny"


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A valid dataset folder of one 40-step run (config `tiny`)."""
    root = tmp_path_factory.mktemp("hostile-ds")
    results = make_results_dir(root / "src")
    write(results / "runs", CONFIG, variant(CONFIG, seed=5, steps=40))
    open_store(root / "src" / "lab.duckdb", results).close()
    assert main(["results", "--db", str(root / "src" / "lab.duckdb"), "--results", str(results), "export", CONFIG,
                 "--out", str(root / "good")]) == 0
    return root / "good"


@pytest.fixture
def target(tmp_path):
    results = make_results_dir(tmp_path / "dest")
    return ["--db", str(tmp_path / "dest" / "lab.duckdb"), "--results", str(results)], results


def copy(good, tmp_path, name: str = "ds"):
    out = tmp_path / name
    shutil.copytree(good, out)
    return out


def card_with(folder, configs_yaml: str) -> None:
    card = folder / "README.md"
    body = card.read_text(encoding="utf-8").split("---", 2)[2]
    card.write_text(f"---\n{configs_yaml}\n---{body}", encoding="utf-8")


def table_of(folder) -> pa.Table:
    return pq.read_table(folder / CONFIG / "steps.parquet")


def save(folder, table: pa.Table) -> None:
    pq.write_table(table, folder / CONFIG / "steps.parquet")


def refused(capsys, target, folder, says: str) -> None:
    args, results = target
    assert main(["results", *args, "import", str(folder)]) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not list((results / "datasets").rglob("*.json")) if (results / "datasets").exists() else True


def test_the_good_folder_imports(good, target, capsys):
    args, results = target
    assert main(["results", *args, "import", str(good)]) == 0
    assert (results / "datasets" / "good" / f"{CONFIG}.json").is_file()


@pytest.mark.parametrize("path, says", [
    ("../../../etc/passwd", "not a path inside the dataset folder"),
    ("/etc/passwd", "not a path inside the dataset folder"),
    ("C:/Windows/x.parquet", "not a path inside the dataset folder"),
    ("https://evil.example/x.parquet", "not a path inside the dataset folder"),
    ("tiny/../../x.parquet", "not a path inside the dataset folder"),
    ("README.md", "not a .parquet file"),
    ("nothing/*.parquet", "names no file"),
])
def test_data_files_outside_the_folder(good, tmp_path, target, capsys, path, says):
    folder = copy(good, tmp_path)
    card_with(folder, f"configs:\n- config_name: tiny\n  data_files:\n  - split: steps\n    path: '{path}'")
    refused(capsys, target, folder, says)


def test_a_link_out_of_the_folder(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    outside = tmp_path / "outside.parquet"
    shutil.move(folder / CONFIG / "steps.parquet", outside)
    (folder / CONFIG / "steps.parquet").symlink_to(outside)
    refused(capsys, target, folder, "leads outside the dataset folder")


@pytest.mark.parametrize("yaml_text, says", [
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b]\n"
     "configs: [*c]", "uses aliases"),
    ("- just\n- a list", "not a mapping of fields"),
    ("configs: [", "not valid YAML"),
    ("configs: {}", "must be a non-empty list"),
    ("configs:\n- data_files: tiny/steps.parquet\n  config_name: 5", "needs a config_name"),
    ("configs:\n- config_name: a\n  data_files: tiny/steps.parquet\n- config_name: a\n  data_files: tiny/steps.parquet",
     "appears twice"),
    ("configs: !!python/object/apply:os.system ['echo hi']", "not valid YAML"),
    ("configs:\n" + "".join(f"- config_name: c{i}\n  data_files: tiny/steps.parquet\n" for i in range(201)),
     "201 configs, more than an import reads"),
])
def test_odd_yaml_in_the_card(good, tmp_path, target, capsys, yaml_text, says):
    folder = copy(good, tmp_path)
    card_with(folder, yaml_text)
    refused(capsys, target, folder, says)


def test_a_card_too_large(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    with (folder / "README.md").open("a", encoding="utf-8") as fh:
        fh.write("x" * (1 << 20))
    refused(capsys, target, folder, "more than a dataset card may hold")


def test_not_parquet(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    (folder / CONFIG / "steps.parquet").write_bytes(b"PAR1" + b"\x00" * 100 + b"PAR1")
    refused(capsys, target, folder, "not a readable Parquet file")


def test_a_column_of_the_wrong_type(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    table = table_of(folder)
    column = table.schema.get_field_index("command_f1")
    save(folder, table.set_column(column, "command_f1", pa.array(["high"] * table.num_rows)))
    refused(capsys, target, folder, "column 'command_f1' is string, not double")


@pytest.mark.parametrize("column, value, says", [
    ("command_f1", 5.0, "field 'command_f1': input should be less than or equal to 1"),
    ("extra_json", "[1, 2]", "extra_json: not a JSON object"),
    ("extra_json", "{not json", "extra_json: not JSON"),
    ("lp_mean", 3.5, "lp_min"),  # a positive log-probability is clamped to 0, above the minimum
    ("task_id", None, "field 'task_id'"),
])
def test_values_the_validator_refuses(good, tmp_path, target, capsys, column, value, says):
    folder = copy(good, tmp_path)
    table = table_of(folder)
    i = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    values[3] = value
    if column == "lp_mean":
        table = table.set_column(table.schema.get_field_index("lp_min"), "lp_min",
                                 pa.array([-1.0] * table.num_rows, pa.float64()))
    save(folder, table.set_column(i, column, pa.array(values, table.schema.field(column).type)))
    refused(capsys, target, folder, says)


def test_a_made_up_aggregate(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    table = table_of(folder)
    meta = json.loads(table.schema.metadata[META_KEY])
    meta["aggregate"]["avg_command_f1"] = 0.99
    save(folder, table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}))
    refused(capsys, target, folder, "its aggregate says avg_command_f1 0.99")


@pytest.mark.parametrize("raw, says", [(b"{oops", "its run settings: not JSON"), (b"[1]", "its run settings: not a JSON object")])
def test_broken_run_settings(good, tmp_path, target, capsys, raw, says):
    folder = copy(good, tmp_path)
    save(folder, table_of(folder).replace_schema_metadata({META_KEY: raw}))
    refused(capsys, target, folder, says)


def test_settings_never_replace_the_rows(good, tmp_path, target, capsys):
    """`per_step` and `aggregate` inside the settings are the rows' and the aggregate's own, never taken."""
    folder = copy(good, tmp_path)
    table = table_of(folder)
    meta = json.loads(table.schema.metadata[META_KEY])
    meta["meta"]["per_step"] = [{"task_id": "x", "step_idx": 0, "command_f1": 1.0}]
    save(folder, table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}))
    args, results = target
    assert main(["results", *args, "import", str(folder)]) == 0
    data = json.loads((results / "datasets" / "ds" / f"{CONFIG}.json").read_text())
    assert len(data["per_step"]) == 40 and all(r["task_id"] != "x" for r in data["per_step"])


def test_limits_on_rows_and_samples(good, tmp_path, target, capsys, monkeypatch):
    folder = copy(good, tmp_path)
    small = {**parquet_read.limits(), "max_rows": 39}
    monkeypatch.setattr(parquet_read, "limits", lambda: small)
    refused(capsys, target, folder, "40 rows, more than one run's steps may be (39)")
    monkeypatch.undo()
    table = table_of(folder)
    sample = {"sample": 0, "command_f1": 0.5}
    samples = pa.array([[sample] * 4] * table.num_rows, table.schema.field("samples").type)
    save(folder, table.set_column(table.schema.get_field_index("samples"), "samples", samples))
    monkeypatch.setattr(restore, "limits", lambda: {**small, "max_rows": 10**6, "max_samples": 3})
    refused(capsys, target, folder, "4 sampled answers, more than a step may have (3)")


def test_a_config_named_like_a_path_stays_in_its_folder(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path, "evil")
    card_with(folder, "configs:\n- config_name: ../../../../tmp/evil/..\n  data_files: tiny/steps.parquet")
    args, results = target
    assert main(["results", *args, "import", str(folder)]) == 0
    written = [p.relative_to(results) for p in results.rglob("*.json")]
    assert written == [p for p in written if p.parts[0] == "datasets" and ".." not in p.parts]
    assert [p.name for p in written] == ["tmp-evil.json"]


def test_no_rows(good, tmp_path, target, capsys):
    folder = copy(good, tmp_path)
    save(folder, table_of(folder).slice(0, 0))
    refused(capsys, target, folder, "no rows")


# ---- a hostile Hub listing -------------------------------------------------------------------------------
# What the Hub lists is checked before anything is downloaded: the listing is huggingface_hub's own DatasetInfo
# (the type HfApi.dataset_info returns), built here, since no Hub is reachable from the tests.
def hub_listing(*files: tuple[str, int]):
    from huggingface_hub.hf_api import DatasetInfo

    return DatasetInfo(id="owner/runs", sha="0" * 40, siblings=[{"rfilename": n, "size": s} for n, s in files])


@pytest.mark.parametrize("source, says", [
    ("hf://datasets/../etc", "give a dataset repository as OWNER/NAME"),
    ("hf://datasets/owner", "give a dataset repository as OWNER/NAME"),
    ("hf://datasets/owner/runs@../../x", "the revision after @ is not a branch"),
])
def test_hub_sources_refused(target, capsys, source, says):
    args, _ = target
    assert main(["results", *args, "import", source]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_hub_listing_too_large_is_refused_before_any_download():
    source = parse_source("hf://datasets/owner/runs")
    with pytest.raises(LabError, match="more than an import reads"):
        files_to_fetch(hub_listing(("README.md", 100), ("tiny/steps.parquet", 10**12)), source)
    assert files_to_fetch(hub_listing(("README.md", 100), ("tiny/steps.parquet", 10), ("x.bin", 5)), source) == \
        ["README.md", "tiny/steps.parquet"]


@pytest.mark.parametrize("name", ["../../outside.parquet", "/etc/x.parquet", "a\\..\\b.parquet"])
def test_a_hub_file_named_out_of_the_repository(name):
    with pytest.raises(LabError, match="is not a path inside it"):
        files_to_fetch(hub_listing(("README.md", 100), (name, 10)), parse_source("hf://datasets/owner/runs"))


def test_a_repository_without_a_card_is_refused():
    with pytest.raises(LabError, match="no dataset card"):
        files_to_fetch(hub_listing(("tiny/steps.parquet", 10)), parse_source("hf://datasets/owner/runs"))


def test_a_link_planted_where_the_import_writes(good, tmp_path, target, capsys):
    """A link (dangling too) at the name a config would take is never written through: the next name is taken."""
    args, results = target
    folder = copy(good, tmp_path)
    dest = results / "datasets" / "ds"
    dest.mkdir(parents=True)
    victim = tmp_path / "victim.json"
    victim.write_text("mine")
    (dest / f"{CONFIG}.json").symlink_to(victim)
    (dest / f"{CONFIG}-2.json").symlink_to(tmp_path / "nowhere.json")  # dangling
    assert main(["results", *args, "import", str(folder)]) == 0
    assert victim.read_text() == "mine" and not (tmp_path / "nowhere.json").exists()
    assert (dest / f"{CONFIG}-3.json").is_file() and not (dest / f"{CONFIG}-3.json").is_symlink()
