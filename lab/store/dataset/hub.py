"""The Hugging Face Hub side of datasets: pull `hf://datasets/OWNER/NAME[@REVISION]` into a folder (its card and
Parquet files only, sizes checked before anything is downloaded) and push an exported folder to a dataset
repository (`--push-to-hub OWNER/NAME`, the owner's machine only, token from the usual places: HF_TOKEN or
`hf auth login`). HF_ENDPOINT names another Hub (a mirror) for both. `huggingface_hub` is imported only here."""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.jsontext import one_line
from lab.store.dataset.card_read import read_configs
from lab.store.dataset.layout import CARD, config_name, limits

PREFIX = "hf://datasets/"
_REPO_RX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_REVISION_RX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}$")
WANTED = (CARD, ".parquet")


@dataclass(frozen=True)
class HubSource:
    repo_id: str
    revision: str | None

    @property
    def folder_name(self) -> str:
        return config_name(self.repo_id.replace("/", "--"))


def is_hub_source(text: str) -> bool:
    return str(text).startswith(PREFIX)


def repo_id_argument(text: str, what: str = "--push-to-hub") -> str:
    """OWNER/NAME, checked (LabError naming `what` otherwise)."""
    if not _REPO_RX.match(text or "") or ".." in text or text.endswith((".", "-")):
        raise LabError(f"{what} {one_line(text, 80)!s}: give a dataset repository as OWNER/NAME (letters, digits, "
                       "'-', '_', '.')")
    return text


def parse_source(text: str) -> HubSource:
    """`hf://datasets/OWNER/NAME[@REVISION]` (LabError saying the form otherwise)."""
    rest = text[len(PREFIX):] if is_hub_source(text) else ""
    repo, _, revision = rest.partition("@")
    repo_id = repo_id_argument(repo.rstrip("/"), "source")
    if revision and (not _REVISION_RX.match(revision) or ".." in revision):
        raise LabError(f"{one_line(text, 120)}: the revision after @ is not a branch, tag or commit")
    return HubSource(repo_id, revision or None)


def _api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def _hub_error(exc: Exception, what: str) -> LabError:
    return LabError(f"{what}: {type(exc).__name__}: {one_line(exc, 200)}")


def files_to_fetch(info, source: HubSource) -> list[str]:
    """The card and Parquet files of the repository, their count and sizes checked against the limits."""
    siblings = list(info.siblings or [])
    files = [s for s in siblings if s.rfilename == CARD or s.rfilename.endswith(".parquet")]
    if not any(s.rfilename == CARD for s in files):
        raise LabError(f"{PREFIX}{source.repo_id}: no dataset card (README.md) in the repository")
    cap = limits()["max_configs"] * 64
    if len(files) > cap:
        raise LabError(f"{PREFIX}{source.repo_id}: {len(files)} data files, more than an import reads ({cap})")
    total = sum(int(s.size or 0) for s in files)
    if total > limits()["max_total_bytes"] or any(int(s.size or 0) > limits()["max_file_bytes"] for s in files):
        raise LabError(f"{PREFIX}{source.repo_id}: {total:,} bytes of data files, more than an import reads "
                       f"({limits()['max_total_bytes']:,} in all, {limits()['max_file_bytes']:,} a file)")
    for s in files:
        parts = s.rfilename.split("/")
        if s.rfilename.startswith("/") or ".." in parts or "\\" in s.rfilename:
            raise LabError(f"{PREFIX}{source.repo_id}: file name '{one_line(s.rfilename, 80)}' is not a path inside it")
    return [s.rfilename for s in files]


def pull(text: str, cache_dir: Path) -> tuple[Path, HubSource]:
    """Download the dataset `text` names (card and Parquet files) into `cache_dir/datasets/OWNER--NAME/` (made
    afresh) and return that folder."""
    source = parse_source(text)
    try:
        api = _api()
        info = api.dataset_info(source.repo_id, revision=source.revision, files_metadata=True)
        names = files_to_fetch(info, source)
        folder = Path(cache_dir) / "datasets" / source.folder_name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name in names:
            api.hf_hub_download(source.repo_id, name, repo_type="dataset", revision=info.sha, local_dir=folder)
    except LabError:
        raise
    except Exception as exc:  # noqa: BLE001 - any Hub or network failure is one line
        raise _hub_error(exc, f"{PREFIX}{source.repo_id}") from None
    for name in names:
        if (folder / name).stat().st_size > limits()["max_file_bytes"]:
            raise LabError(f"{PREFIX}{source.repo_id}: {name} is larger than its listed size allows")
    return folder, source


def check_push(repo_id: str, public: bool) -> None:
    """LabError when a push is refused: on a public deployment, or to a name that is no OWNER/NAME."""
    if public:
        raise LabError("--push-to-hub is off on a public deployment (LAB_PUBLIC or SPACE_ID): push from your own "
                       "machine")
    repo_id_argument(repo_id)


def push(folder: Path, repo_id: str, *, public: bool, private: bool = False) -> str:
    """Upload the exported dataset `folder` to the dataset repository `repo_id` (made when missing); returns the
    commit's URL. Refused on a public deployment: the owner pushes from their own machine."""
    check_push(repo_id, public)
    read_configs(folder)  # a folder the Hub can read: its card names its configs and they are there
    try:
        api = _api()
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="dataset",
                                   allow_patterns=[CARD, "**/*.parquet", "*.parquet"],
                                   commit_message="Add TB2-lite runs (python -m lab results export)")
    except Exception as exc:  # noqa: BLE001 - no token, no network, a refusal: one line
        raise _hub_error(exc, f"--push-to-hub {repo_id}") from None
    return str(getattr(commit, "commit_url", commit))
