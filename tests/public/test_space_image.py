"""The Hugging Face Space image, built and run for real (issue 29).

podman builds the lab's `Dockerfile` on the stand-in base (../shared/space-image/), with the replay baked in
(the excerpt standing in for the public file) and published runs fetched at build time, both from a loopback
server; the container runs as a Space runs it (SPACE_ID set, uid 1000, PORT a free port). A visitor (HTTP
and gradio_client) then sees the published leaderboard, compares the published runs side by side on the
baked replay without any engine, is refused what a visitor is refused, the container writes nothing
outside the app's folder and /data, and stops within 10 s of SIGTERM.

No podman or no base image is a failure, never a skip: `bash scripts/test.sh` installs both. The image is
rebuilt on every run, reusing podman's layer cache (only the layers from `COPY . .` on run again).
"""
from __future__ import annotations

import csv
import json
import re
import time

import httpx
import pytest

from lab.data import load_replay
from tests.helpers_servers import transformers_serve
from tests.paths import EXCERPT, REPO
from tests.space_image import APP, build_image, build_server, changed_by_podman, changed_paths, image_size, logs, \
    run_to_the_end, space_container, stop_with_sigterm
from tests.public.test_public_hostile import call, private_call
from tests.public.test_public_mode import visitor

pytestmark = [pytest.mark.podman, pytest.mark.slow, pytest.mark.timeout(3600)]
SIGTERM_LIMIT_S = 10.0
# Where a running Space may write: its own app folder (the results store) and /data (cache, persistent storage).
WRITABLE = (f"{APP}/", "/data/")


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    """(container, build) of the image built from this checkout, running as a Space."""
    root = tmp_path_factory.mktemp("space-image")
    with build_server() as base:
        build = build_image(base, root / "build.log")
    size = image_size(build.tag)
    with space_container(build.tag) as container:
        print(f"\nspace image: build {build.seconds:.1f} s, size {size / 1e9:.2f} GB, "
              f"start to serving {container.start_s:.1f} s")
        yield container, build
        assert "Traceback" not in logs(container.cid), logs(container.cid)[-3000:]


def config_of(url: str) -> dict:
    return httpx.get(f"{url}config", timeout=30).json()


def component(config: dict, elem_id: str) -> dict:
    return next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == elem_id)


def test_the_page_serves_the_published_leaderboard_and_the_baked_replay(space):
    container, _ = space
    page = httpx.get(container.url, timeout=30)
    assert page.status_code == 200 and "gradio" in page.text.lower()
    config = config_of(container.url)
    header = component(config, "lab-header")["props"]["value"]
    assert f"{len(load_replay(EXCERPT).steps)} steps" in header, header
    assert "replay_full.jsonl" in header and "/home/user" not in header  # no server path shown
    assert "public (model engines off)" in header
    shipped = list(csv.DictReader((REPO / "results" / "leaderboard_corrected.csv").open(encoding="utf-8")))
    table = component(config, "lab-leaderboard")["props"]["value"]
    name, source = table["headers"].index("name"), table["headers"].index("source")
    published = {row[name] for row in table["data"] if row[source] == "published"}
    assert published == {row["model_label"] for row in shipped}
    rows = int(re.search(r'data-rows="(\d+)"', component(config, "lab-lb-count-box")["props"]["value"]).group(1))
    assert rows == len(table["data"]) == len(shipped) + 2  # the leaderboard and the two published runs fetched
    assert component(config, "lab-download-replay")["props"].get("visible") is False  # nothing a visitor can't press


def stored_columns(html: str) -> list[tuple[str, str]]:
    """(spec, state) of each stored column in Compare's columns HTML."""
    return re.findall(r'<div class="lab-col" data-engine="(stored:[^"]*)" data-state="([^"]+)"', html)


def test_a_visitor_compares_the_published_runs_on_the_baked_replay(space):
    """No engine anywhere: the baked replay's steps, the two published runs as columns, a step switch."""
    container, _ = space
    guest = visitor(container.url)
    config = config_of(container.url)
    choices = component(config, "lab-run-picker")["props"]["choices"]
    published = [value for label, value in choices if " · published · " in label]
    assert len(published) == 2, choices
    key = guest.predict(None, False, None, api_name="/show_step")[1]["value"]
    columns = str(guest.predict(published, key, api_name="/add_runs")[4])
    assert len(stored_columns(columns)) == 2 and ("stored:", "ready") in [(s[:7], st) for s, st in stored_columns(columns)]
    assert "stored answer" in columns and "diff vs reference" in columns
    moved = guest.predict(key, False, None, api_name="/next_step")
    assert moved[1]["value"] != key
    after = str(moved[3])
    assert len(stored_columns(after)) == 2 and "stored answer" in after  # both columns follow the switch


def test_a_visitors_refused_actions_stay_refused(space):
    container, _ = space
    guest = visitor(container.url)
    _, lines = call(guest, "transformers:Org/Model", api_name="/add_engine")
    assert any("disabled on this server" in line for line in lines), lines
    config = config_of(container.url)
    # fetching runs: not even offered without LAB_ALLOW_ENGINES (no button, no endpoint; the owner's note instead)
    assert "/fetch_published" not in guest.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert not [c for c in config["components"] if (c.get("props") or {}).get("elem_id") == "lab-pub-fetch"]
    assert "picked the published runs at build or start time" in json.dumps(config)
    button = component(config, "lab-download-replay")
    download = [i for i, d in enumerate(config["dependencies"]) if [button["id"], "click"] in d.get("targets", [])]
    messages = private_call(container.url, download[0], [], button["id"], "space-visitor-download")
    assert any("does not let visitors" in m.get("log", "") for m in messages if m.get("msg") == "log"), messages


def hub_cache_model(model_dir, cache, repo_id: str) -> None:
    """`model_dir` as a Hugging Face cache holds a download of `repo_id` (one snapshot, refs/main)."""
    entry = cache / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = entry / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for path in model_dir.iterdir():
        (snapshot / path.name).write_bytes(path.read_bytes())
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(snapshot.name)


def test_a_visitors_openai_engine_loads_and_answers_in_the_container(space, tiny_model_dir, tmp_path):
    """The image's own `openai` SDK and its HTTP library, as the lock installs them: a visitor of a Space whose
    owner allows engines and lists the host adds an `openai:` engine on a `transformers serve` outside the
    container; it loads (the SDK takes the lab's client settings) and answers a step."""
    _, build = space
    repo_id = "lab-tests/tiny"  # served under a Hub id: a visitor may not name a folder (docs/security.md)
    hub_cache_model(tiny_model_dir, tmp_path / "hf", repo_id)
    with transformers_serve(repo_id, tmp_path / "serve.log", env={"HF_HOME": str(tmp_path / "hf")}) as base:
        owner = {"LAB_ALLOW_ENGINES": "1", "LAB_ENGINE_HOSTS": "127.0.0.1", "HF_HUB_OFFLINE": "1"}
        with space_container(build.tag, owner) as container:
            guest = visitor(container.url)
            _, lines = call(guest, f"openai:{base}/v1#{repo_id}?name=served", api_name="/add_engine")
            assert lines and lines[0].startswith("Adding engine 'served'"), lines
            deadline = time.monotonic() + 180
            while 'data-state="loading"' in (table := call(guest, "", api_name="/add_engine")[0][0]):
                assert time.monotonic() < deadline, table
                time.sleep(0.5)
            assert re.search(r'data-engine="served"[^>]*data-state="ready"', table) or \
                'data-state="ready"' in table, table
            key = guest.predict(None, False, None, api_name="/show_step")[1]["value"]
            columns = str(guest.predict(key, False, None, api_name="/generate")[0])
            assert 'data-state="ready"' in columns and "unreachable" not in columns and "Invalid timeout" not in columns
            assert "Traceback" not in logs(container.cid), logs(container.cid)[-3000:]


def test_nothing_is_written_outside_the_app_folder_and_data(space):
    """`podman diff` after the visits above, less what a container that ran nothing shows (podman's mounts)."""
    container, build = space
    changed = set(changed_paths(container.cid)) - changed_by_podman(build.tag)
    paths = sorted(line[2:] for line in changed)
    # a folder above a written path shows as changed ("C /home") too
    outside = [p for p in paths if not any(p.startswith(w) or w.startswith(p + "/") for w in WRITABLE)]
    assert outside == [], outside
    assert f"{APP}/results/lab.duckdb" in paths  # the store was built (so the diff does see the app's writes)


def test_without_space_id_the_image_is_public_and_the_owner_opts_out(space):
    """`docker run -p 7860:7860 IMAGE` with no SPACE_ID served the owner's lab (Batch, sweeps, any path) to
    whoever reached the port (issue 40 item 6): the image is a public deployment unless the owner says
    LAB_PUBLIC=0. (Bound to 127.0.0.1 here, since the container shares this machine's network.)"""
    _, build = space
    with space_container(build.tag, space=False) as plain:
        header = component(config_of(plain.url), "lab-header")["props"]["value"]
        assert "public (model engines off)" in header, header
        config = config_of(plain.url)
        assert "Batch runs are off on this public deployment" in json.dumps(config)  # the tab says so …
        _, lines = call(visitor(plain.url), [], [], [], [], False, "from-a-visitor", api_name="/run_batch")
        assert any("Batch runs are off on this public deployment" in line for line in lines), lines  # … and refuses
    with space_container(build.tag, space=False, env={"LAB_PUBLIC": "0"}) as owners:
        header = component(config_of(owners.url), "lab-header")["props"]["value"]
        assert "· local</span>" in header and "public" not in header, header


def test_the_owners_lab_on_every_interface_needs_a_choice(space):
    """With public mode switched off but no choice made (LAB_PUBLIC empty), the image's own 0.0.0.0 is
    refused in one line before anything is served."""
    _, build = space
    done = run_to_the_end(build.tag, {"LAB_PUBLIC": "", "PORT": "7860"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: --host 0.0.0.0 (or $GRADIO_SERVER_NAME) serves this lab beyond this machine, and it is the owner's lab")


def test_sigterm_stops_the_container_within_10_s(space):
    container, _ = space
    seconds, stopped = stop_with_sigterm(container.cid, SIGTERM_LIMIT_S)
    assert stopped, f"still running {seconds:.1f} s after SIGTERM"
    print(f"\nSIGTERM to stopped: {seconds:.1f} s")
