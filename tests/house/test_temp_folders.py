"""Commands the project hands to people name no fixed folder under the system's temporary directory
(issue 41): `/tmp/gemma3-270m` or `/tmp/replay_scaled.jsonl` is one folder for every user of a machine, so
the second user's command fails on the first one's files (or reads them). Usage text is each script's and
benchmark's docstring, every line of the shell scripts, and the code blocks of the pages listed in PAGES
(docs/ray.md gives the commands of the other pages written this way); the tools write to the lab's cache
folder by default instead (~/.cache/tb2lab), or to a folder `mktemp -d` makes."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.paths import REPO

PAGES = ("ray.md",)  # docs pages held to it
FIXED_TMP = re.compile(r"(?<![\w$}])/tmp/[A-Za-z0-9_.][\w.-]*")


def usage_texts() -> dict[str, str]:
    """File (relative) -> the text of it a person copies commands from."""
    texts: dict[str, str] = {}
    for folder in ("scripts", "bench"):
        for path in sorted((REPO / folder).rglob("*")):
            rel = str(path.relative_to(REPO))
            if path.suffix == ".py":
                texts[rel] = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            elif path.suffix == ".sh":
                texts[rel] = path.read_text(encoding="utf-8")
    for path in (REPO / "docs" / page for page in PAGES):
        blocks = re.findall(r"```[^\n]*\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
        texts[str(path.relative_to(REPO))] = "\n".join(blocks)
    return texts


def test_no_usage_text_names_a_fixed_folder_under_tmp():
    texts = usage_texts()
    assert "scripts/gguf_to_folder.py" in texts and "bench/scale_replay.py" in texts
    found = {rel: FIXED_TMP.findall(text) for rel, text in texts.items() if FIXED_TMP.search(text)}
    assert not found, f"fixed folders under /tmp in commands: {found}"


def test_the_pattern_sees_what_it_should():
    assert FIXED_TMP.findall("M=/tmp/gemma3-270m; python x.py --out /tmp/gemma") == ["/tmp/gemma3-270m", "/tmp/gemma"]
    assert not FIXED_TMP.search('D=$(mktemp -d); ray start --temp-dir "${TMPDIR:-/tmp}/ray-$(id -u)"')
    assert not FIXED_TMP.search("out=$TMPDIR/x  ~/.cache/tb2lab/models/gemma-3-270m-q4_k_m")
