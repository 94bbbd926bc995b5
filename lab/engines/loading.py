"""Helpers for engines that load Hugging Face models: where a model lives, clear load errors."""
from __future__ import annotations

import importlib
import threading
from pathlib import Path

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


def check_model_source(model: str, what: str = "model") -> str:
    """Return the model id or the expanded folder; a missing folder raises EngineLoadError."""
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
