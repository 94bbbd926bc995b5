"""Helpers for engines that load Hugging Face models: where a model lives, clear load errors."""
from __future__ import annotations

import importlib
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from lab.errors import EngineLoadError

# `transformers` resolves its top-level names lazily on first access; two threads doing that at
# once can see a half-initialised module ("cannot import name 'AutoModelForCausalLM' from
# 'transformers'"). Building a model is not thread-safe either: `from_pretrained` switches
# process-wide state (weights first made on the "meta" device), so a second model built at the
# same moment ends up with meta tensors ("Cannot copy out of meta tensor"). Engines that load in
# parallel therefore import and build through this one re-entrant lock.
MODEL_BUILD_LOCK = threading.RLock()


def import_transformers(*names: str) -> tuple:
    """`transformers.<name>` for each name, resolved under the process-wide lock."""
    with MODEL_BUILD_LOCK:
        module = importlib.import_module("transformers")
        return tuple(getattr(module, name) for name in names)


def looks_like_path(model: str) -> bool:
    """True for things meant as folders (`/x`, `./x`, `~/x`, `C:\\x`) or folders that exist."""
    text = str(model)
    return text.startswith(("/", "./", "../", "~", ".\\")) or (len(text) > 2 and text[1] == ":") or Path(text).expanduser().exists()


# `ORG/NAME` on the Hugging Face Hub (not a path: no leading `/`, `~`, `.`, no `..`)
HUB_ID_RX = re.compile(r"^[A-Za-z0-9][\w-]*(\.[\w-]+)*/[A-Za-z0-9][\w.-]*$")
_VISITOR = threading.local()


def is_hub_id(text: str) -> bool:
    """`ORG/NAME`-shaped (whether or not a folder of that name exists)."""
    text = str(text).strip()
    return bool(HUB_ID_RX.match(text)) and ".." not in text.split("/")


@contextmanager
def hub_ids_only(on: bool) -> Iterator[None]:
    """While loading a public deployment's visitor engine (`on`): an `ORG/NAME` is always a Hub id,
    never a folder relative to the working directory, so whether such a folder exists changes
    nothing a visitor sees (its other paths were confined to the data folders at admission)."""
    before = getattr(_VISITOR, "on", False)
    _VISITOR.on = on
    try:
        yield
    finally:
        _VISITOR.on = before


def visitor_loading() -> bool:
    """Whether this thread loads a visitor's engine (see `hub_ids_only`)."""
    return bool(getattr(_VISITOR, "on", False))


def hub_snapshot(model: str, what: str = "model", cache_only: bool = False) -> str:
    """The folder of Hub repo `model` in the HF cache (fetched first unless `cache_only` or offline;
    visitor_options.yaml's `hub_files` say which files); EngineLoadError when there is none."""
    import yaml
    from huggingface_hub import snapshot_download

    patterns = yaml.safe_load(Path(__file__).with_name("visitor_options.yaml").read_text(encoding="utf-8"))["hub_files"]
    try:
        return snapshot_download(model, allow_patterns=patterns, local_files_only=cache_only)
    except Exception as exc:  # noqa: BLE001 - not found, offline, no access: one line naming the id
        raise EngineLoadError(
            f"{what} '{model}' is neither in this server's Hugging Face cache nor downloadable from the Hub "
            f"({type(exc).__name__}); a visitor's ORG/NAME is always a Hub id"
        ) from None


def rendering_tokenizer(source: str):
    """The tokenizer that renders prompts for a server's model, from a folder or the local HF cache
    only (never downloaded, so an offline lab does not hang); None when there is none: the renderer
    then uses its identity-based formats."""
    (auto_tokenizer,) = import_transformers("AutoTokenizer")
    try:
        if visitor_loading():  # a visitor's engine: its Hub cache folder, never a folder of the working directory
            if not is_hub_id(source) and not source.startswith("/"):  # (a visitor's `/…` was confined at admission)
                return None
            source = hub_snapshot(source, "tokenizer", cache_only=True) if is_hub_id(source) else source
        return auto_tokenizer.from_pretrained(source, local_files_only=not looks_like_path(source))
    except Exception:  # noqa: BLE001 - no tokenizer: the renderer uses identity-based formats
        return None


def rendering_tokenizer_soon(source: str) -> Future:
    """`rendering_tokenizer(source)` loading on a thread of its own while the caller waits for
    something else (a managed server starting); it loads as the calling thread would (a visitor's
    engine stays a visitor's)."""
    visitor = visitor_loading()

    def load():
        with hub_ids_only(visitor):
            return rendering_tokenizer(source)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-tokenizer")
    try:
        return pool.submit(load)
    finally:
        pool.shutdown(wait=False)


def check_model_source(model: str, what: str = "model") -> str:
    """Return the model id or the expanded folder; a missing folder raises EngineLoadError.
    For a visitor's engine (`hub_ids_only`) an `ORG/NAME` is fetched from the Hub into the cache
    and its cache folder returned: a same-named folder of the working directory is never read."""
    if visitor_loading() and is_hub_id(model):
        return hub_snapshot(model, what)
    if looks_like_path(model):
        path = Path(model).expanduser()
        if not path.exists():
            raise EngineLoadError(f"{what} folder '{model}' does not exist: check the path (or give a Hub id)")
        if not path.is_dir():
            raise EngineLoadError(f"{what} '{model}' is a file; give the folder that holds config.json and the weights")
        return str(path)
    return model


def load_failure(model: str, exc: BaseException, what: str = "model") -> EngineLoadError:
    """An EngineLoadError naming the model, the cause and what to do."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = (
        f"if '{model}' is a Hugging Face id, this machine needs internet access or a local copy "
        f"(huggingface-cli download {model}, or set HF_HOME to a cache that has it); "
        "if it is a folder, check that it holds the files save_pretrained writes"
    )
    return EngineLoadError(f"cannot load {what} '{model}': {type(exc).__name__}: {reason[:300]}. {hint}")
