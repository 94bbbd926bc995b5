"""What every engine kind shares: its configuration and the attributes the UI and runs read."""
from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.logprobs import top_k_option
from lab.engines.presets import DEFAULT_PROMPT_OPTIONS, Preset
from lab.engines.progress import LiveProgress
from lab.engines.spec import as_number, short_name
from lab.errors import EngineLoadError, EngineSpecError
from lab.tb2lite import DEFAULT_CONTRACT

# Options any engine accepts (in the SPEC after '?', or as create_engine(**overrides)).
COMMON_OPTIONS = {
    "name": "display name in the UI",
    "contract": "output contract: tb2lite-json | legacy-flat | bash-block | bash-block-chat",
    "thinking_mode": "on | off | auto",
    "strip_thinking_history": "on | off | auto",
    "gemma4_empty_thought_channel": "on | off | auto",
    "temperature": "default sampling temperature",
    "top_p": "default sampling top_p",
    "max_tokens": "default max new tokens",
    "repetition_penalty": "default repetition penalty",
    "top_k": "default top_k (-1: all tokens)",
    "min_p": "default min_p",
    "seed": "default sampling seed",
    "logprobs": "top alternatives recorded per generated token (default 5, assets/logprobs.yaml; 0: none)",
}

OnDone = Callable[[int, Completion], None]
logger = logging.getLogger(__name__)


@dataclass
class EngineConfig:
    """Everything an engine is built from: SPEC parts, preset, merged options."""

    spec: str
    kind: str
    target: str
    options: dict = field(default_factory=dict)
    preset: Preset | None = None
    # `?preset=KEY`: the preset's settings on the checkpoint the SPEC names (target), not on its hf_id
    preset_on_target: bool = False


def model_lora_name(config: EngineConfig, example: str) -> tuple[str, str | None, str]:
    """(model id, LoRA adapter or None, display name) of a model engine's config.

    A preset gives its `hf_id` (the base model when it has a `lora`); a SPEC option `lora=`
    overrides the preset's adapter. With `?preset=KEY` the model is the SPEC's own target (a
    checkpoint folder or Hub id) and the name is the checkpoint's (or the given adapter's), so a
    sweep's engines keep apart. `example` completes the error for a missing target.
    """
    preset = config.preset
    if not config.target:
        raise EngineSpecError(f"engine spec '{config.spec}': give a model, e.g. {example}")
    given = config.options.get("lora")
    if preset and not config.preset_on_target:  # a bare preset: its own model
        return preset.hf_id, given or preset.lora, preset.display_name
    lora = given or (preset.lora if preset else None)
    return config.target, lora, short_name(given or config.target)  # the preset's adapter does not name it


def _sampling_with(sampling: Sampling, options: dict) -> Sampling:
    """Apply sampling options (`temperature=0.7&max_tokens=64`) over a preset's sampling."""
    changes = {}
    for key, kind in (("temperature", float), ("top_p", float), ("max_tokens", int), ("repetition_penalty", float),
                      ("top_k", int), ("min_p", float), ("seed", int)):
        if key in options:
            changes[key] = as_number(options.pop(key), key, kind)
    return replace(sampling, **changes)


class EngineBase(ABC):
    """The engine type (DESIGN §4): every member a caller may use, each with a default here, so callers
    read attributes directly. Subclasses declare `kind`, `usage`, `OPTIONS` (their own options with
    one-line help) and the kind's traits below, and implement generate (load/close where they hold
    something).

    Attributes set for every engine: `spec, kind, name, name_given, model_id, preset, preset_on_target,
    contract, prompt_options, default_sampling, logprobs_k, options, tokenizer (None until loaded, or for
    engines without one), loaded, load_time_sec`, and those declared below."""

    # --- the kind's traits (class attributes; lab.engines.registry derives its tables from them) ---
    kind: str = ""
    usage: str = ""  # how a SPEC of this kind is written (`stored:PATH`), for help texts and errors
    OPTIONS: dict[str, str] = {}
    answers_from_data: bool = False  # answers from data (a stored run, the reference), not from the prompt:
    # loads no model, so a public Space admits it; its prompt is rendered for display only
    takes_preset: bool = False  # its target may name a preset, and `?preset=KEY` applies to it
    takes_target: bool = True  # its SPEC names something after `KIND:` (a model, a file, a server)
    stored_run: bool = False  # answers from a stored run: its target is that run's result file on this machine
    answers_reference: bool = False  # answers every step with its reference reply (a sanity check: scores 100)
    managed: bool = False  # runs a server process the lab starts and stops (the pool starts these one at a time)
    scores_reference: bool = False  # score_reference() gives the reference's token log-probabilities
    holds_memory_share: bool = False  # holds a share of a device's memory budget that the pool splits
    overlong_prompt: str = "truncate"  # what it does with a prompt past its context: reject | shorten | truncate
    add_special_tokens: bool = True  # tokenizes a prompt with the tokenizer's special tokens

    # --- what a loaded engine knows (instance attributes; None or empty where the kind has none) ---
    max_model_len: int | None = None  # the context it runs the model with (lab.engines.context.context_length)
    concurrency: int | None = None  # requests it serves at once (a server); None: one batch at a time in process
    scorer: str = "corrected"  # the scorer its answers are scored with (a stored legacy run's: "legacy")
    path: Path | None = None  # the result file it answers from (stored runs)
    model_source: str | None = None  # the model folder or Hub id it loads (None: `model_id`)
    lora: str | None = None  # its LoRA adapter
    trust_remote_code: bool = False  # runs the model's own code (a preset that declares it)
    preset_dtype: str | None = None  # the dtype its preset asks for (in-process transformers)

    def __init__(self, config: EngineConfig, *, model_id: str, name: str) -> None:
        self.spec = config.spec
        self.preset = config.preset
        self.preset_on_target = config.preset_on_target
        options = dict(config.options)
        unknown = set(options) - set(COMMON_OPTIONS) - set(self.OPTIONS)
        if unknown:
            allowed = sorted(set(COMMON_OPTIONS) | set(self.OPTIONS))
            raise EngineSpecError(
                f"engine spec '{config.spec}': unknown option(s) {sorted(unknown)} for kind "
                f"'{self.kind}'; allowed: {', '.join(allowed)}"
            )
        preset = config.preset
        self.model_id = model_id
        self.name_given = bool(options.get("name"))  # `name=` in the SPEC: the user's own, used as is
        self.name = str(options.pop("name", "") or name)
        self.contract = str(options.pop("contract", "") or (preset.contract if preset else DEFAULT_CONTRACT))
        self.prompt_options = dict(preset.prompt_options if preset else DEFAULT_PROMPT_OPTIONS)
        for key in DEFAULT_PROMPT_OPTIONS:
            if key in options:
                self.prompt_options[key] = str(options.pop(key))
        self.default_sampling = _sampling_with(preset.sampling if preset else Sampling(), options)
        self.logprobs_k = top_k_option(options.pop("logprobs", None), config.spec)
        self.options = options  # what is left: this kind's own options
        self.tokenizer = None
        self.settings: dict = {}  # engine settings (a vLLM server's flags), {} for kinds without any
        self.extra: dict[str, str] = {}  # options passed through as server flags (managed servers)
        self.rows: dict[str, dict] = {}  # stored answers by step key (stored runs)
        self.result: dict = {}  # the result file it answers from (stored runs)
        self.loaded = False
        self._progress = LiveProgress()
        self.load_time_sec: float | None = None  # engine construction only (SPEC §8 load_time_sec)
        self._lock = threading.Lock()

    @property
    def preset_key(self) -> str | None:
        """The preset whose settings this engine runs with (a bare preset or `?preset=KEY`), or None."""
        return self.preset.key if self.preset is not None else None

    @property
    def prompt_identity(self) -> str:
        """The model identity the prompt rules read (SPEC §3: Gemma-4 detection …): the model id, and
        with `?preset=KEY` also the preset's Hub id, so a local checkpoint folder of a Gemma-4 preset
        is rendered as a Gemma-4 model."""
        model = self.model_id or ""
        return f"{model} {self.preset.hf_id}" if self.preset_on_target and self.preset else model

    def live_progress(self) -> LiveProgress:
        """Elapsed time and tokens so far of the generate call running now (lab.engines.progress)."""
        return self._progress

    # --- helpers for subclasses -------------------------------------------------------

    def option(self, key: str, default=None):
        return self.options.get(key, default)

    @staticmethod
    def finish(index: int, completion: Completion, results: list, on_done: OnDone | None) -> None:
        """Store one completion and report it (errors in the callback never break generation)."""
        results[index] = completion
        if on_done is not None:
            try:
                on_done(index, completion)
            except Exception:  # noqa: BLE001 - a UI callback must not stop an engine
                logger.exception("on_done callback failed for request %d", index)

    def refusal(self, prompt: str, sampling: Sampling) -> str | None:
        """Why the engine refuses this prompt before generating (e.g. past its context), or None."""
        return None

    def admit(self, requests: list[Request], sampling: Sampling, results: list, on_done: OnDone | None) -> list[int]:
        """Indices of the requests to generate; each refused one is answered at once with its reason."""
        todo = []
        for i, request in enumerate(requests):
            why = self.refusal(request.prompt, sampling)
            if why:
                self.finish(i, Completion(text="", error=why, finish_reason="refused"), results, on_done)
            else:
                todo.append(i)
        return todo

    # --- protocol defaults ------------------------------------------------------------
    def load(self) -> None:
        self.loaded = True

    def close(self) -> None:
        self.loaded = False

    def describe(self) -> EngineInfo:
        return EngineInfo(kind=self.kind, model=self.model_id, device="cpu")

    def cancel(self) -> None:
        """Drop the requests in flight (Stop); the answers already finished stay delivered. Engines that
        answer at once have nothing to drop."""

    def covers(self, key: str) -> bool:
        """Whether the engine has an answer for step `key` (a stored run covers only the steps it answered)."""
        return True

    def score_reference(self, prompt: str, reference: str):
        """The reference's token log-probabilities under the model (kinds with `scores_reference`)."""
        raise EngineLoadError(f"engine '{self.name}' ({self.kind}) cannot score a reference: it runs no model")

    def restart(self) -> None:
        """Restart the engine's server (managed kinds)."""
        raise EngineSpecError(f"engine '{self.name}' ({self.kind}) runs no server to restart; unload and add it again")

    def server_status(self) -> dict | None:
        """State, PID, port, log … of its server (managed kinds); None for the others."""
        return None

    def server_down(self) -> str | None:
        """Why its server is no longer running (crashed or stopped: exit code and log lines); None while it
        runs, and for kinds without a server."""
        return None

    def uses_local_cpu(self) -> bool:
        """True when generating loads this machine's CPUs (an in-process model or a local CPU server):
        such engines count in `lab.engines.cpu_share` while they generate."""
        return False

    def engine_settings(self) -> dict:
        """Engine settings recorded in a result file's `sampling` block (SPEC §8)."""
        return {}

    @abstractmethod
    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        """Answer each request; per-request problems go into `Completion.error`."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} spec={self.spec!r}>"
