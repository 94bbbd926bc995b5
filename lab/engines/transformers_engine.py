"""`transformers:MODEL_OR_PATH`: local generation with transformers on CPU or CUDA (+ peft LoRA).

Options: `device=auto|cpu|cuda|cuda:N`, `dtype=auto|bfloat16|float16|float32` (auto: the
preset's dtype on GPU, float32 on CPU), `lora=PATH_OR_ID`, `tokenizer=PATH_OR_ID`,
`batch_size=N` (default 4), `add_special_tokens=true|false` (default true, as vLLM does for text
prompts). Prompts are batched with left padding; greedy when temperature == 0.

Timings are per request even in a batch: a stopping criterion notes when each decoding step
ends, so a sequence's TTFT is the end of the first step (the shared prefill) and its latency
the end of the step that produced its last kept token; tok/s follows from its own token count.
The same criterion counts the tokens of the rows still generating as they come (`lab.engines.row_tokens`)
into the engine's live progress, which a waiting Compare column and a batch replay's meter read.

On CPU, torch's intra-op threads follow `lab.engines.cpu_share`: every thread torch started with while
this engine generates alone, an equal share while other local CPU engines generate too (checked at
each decoding step, in the generating thread). `threads_used` lists the counts of the last generate.

`adopt(model, tokenizer)` instead of `load()`: generate with a model already in memory (a training
run's, lab.training), neither copied nor moved. Each generate and score_reference then lends it through
`lab.engines.borrowed_model.BorrowedModel` (eval mode while lent; its modes, gradients, RNG states,
thread count and device placement put back afterwards) and runs under `torch.no_grad` rather than
`inference_mode`, so no inference tensor is left in a module the training goes on using.

`cancel()` ends a generate in its middle: at the next decoding step (the stopping criterion), and inside
a forward pass (a long prefill) at the next module (lab.engines.forward_stop), whichever comes first.
"""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext

from lab.engines import cpu_share
from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.borrowed_model import BorrowedModel
from lab.engines.common import EngineBase, EngineConfig, OnDone, model_lora_name
from lab.engines.context import model_context_length, overlong_error, reference_fit_error
from lab.engines.forward_stop import ForwardStop
from lab.engines.model_facts import config_facts
from lab.engines.loading import MODEL_BUILD_LOCK, check_model_source, import_transformers, load_failure
from lab.engines.spec import as_bool, as_number
from lab.engines.reference_likelihood import ReferenceScore, tokenize_pair
from lab.engines.row_tokens import RowTokens
from lab.engines.transformers_logprobs import LogprobRecorder
from lab.errors import EngineLoadError, EngineSpecError

DTYPES = {"bfloat16", "float16", "float32"}
_TORCH_THREADS: list[int] = []  # torch's intra-op threads before the lab changed them (read once)


def share_torch_threads() -> int:
    """Set torch's intra-op threads of the calling thread to this engine's share (`cpu_share`); return it."""
    import torch

    if not _TORCH_THREADS:
        _TORCH_THREADS.append(torch.get_num_threads())
    wanted = cpu_share.thread_share(_TORCH_THREADS[0])
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return wanted


def pick_device(requested: str) -> str:
    """`auto` -> cuda when available, else cpu."""
    import torch

    if requested in ("", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise EngineLoadError(f"device '{requested}' asked for, but torch sees no CUDA GPU: use device=cpu")
    return requested


def pick_dtype(requested: str, device: str, preset_dtype: str | None) -> str:
    """Preset dtype (bfloat16) on GPU, float32 on CPU, unless asked otherwise."""
    if requested not in ("", "auto"):
        if requested not in DTYPES:
            raise EngineSpecError(f"dtype must be one of {sorted(DTYPES)} or auto, got '{requested}'")
        return requested
    return (preset_dtype or "bfloat16") if device.startswith("cuda") else "float32"


def trim_generated(ids: list[int], eos_ids: set[int], pad_id: int | None) -> tuple[list[int], bool]:
    """Cut generated ids after the first EOS (kept, as vLLM does) or drop trailing padding.

    Returns (ids, hit_eos)."""
    for pos, token in enumerate(ids):
        if token in eos_ids:
            return ids[: pos + 1], True
    if pad_id is not None:
        end = len(ids)
        while end > 0 and ids[end - 1] == pad_id:
            end -= 1
        ids = ids[:end]
    return ids, False


def cut_at_stop(text: str, stops: list[str] | None) -> tuple[str, str | None]:
    """Cut `text` at the earliest stop string (excluded from the output, vLLM's default)."""
    best: tuple[int, str] | None = None
    for stop in stops or []:
        if stop:
            pos = text.find(stop)
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, stop)
    if best is None:
        return text, None
    return text[: best[0]], best[1]


def step_timings(step_ends: list[float], n_tokens: int, start: float, end: float) -> tuple[float | None, float]:
    """(TTFT, latency) of one sequence of a batch: the end of the first decoding step, and the end
    of the step that produced its last kept token (`n_tokens`); the batch's end when unknown."""
    ttft = step_ends[0] - start if step_ends else None
    if n_tokens <= 0 or n_tokens > len(step_ends):
        return ttft, end - start
    return ttft, step_ends[n_tokens - 1] - start


def with_adapter(model, model_src: str, lora_src: str, dtype, trust_remote_code: bool = False):
    """`model` with the peft LoRA adapter of `lora_src`.

    An adapter's module names follow the class it was trained on. `AutoModelForCausalLM` builds a
    multimodal checkpoint's text-only class (`Qwen3_5ForConditionalGeneration` -> `Qwen3_5ForCausalLM`,
    modules `model.layers.N`), while an adapter made on the checkpoint's own class names
    `model.language_model.layers.N`: when peft finds none of its modules, the checkpoint's own class
    (its config's `architectures`) is built and tried once more."""
    from peft import PeftModel

    try:
        return PeftModel.from_pretrained(model, lora_src)
    except Exception as exc:  # noqa: BLE001 - a loader failure becomes a clear message
        first = exc
    own = config_facts(model_src)[0]
    if own and own != type(model).__name__ and "not found in the base model" in str(first):
        try:
            (own_class,) = import_transformers(own)
            base = own_class.from_pretrained(model_src, dtype=dtype, trust_remote_code=trust_remote_code)
            return PeftModel.from_pretrained(base, lora_src)
        except Exception:  # noqa: BLE001 - the first failure is the one to report
            pass
    raise load_failure(lora_src, first, "LoRA adapter") from None


class TransformersEngine(EngineBase):
    """Generates with `AutoModelForCausalLM` (+ `peft.PeftModel` for a LoRA adapter)."""

    kind = "transformers"
    usage = "transformers:MODEL_OR_PATH"
    takes_preset = True
    scores_reference = True
    OPTIONS = {
        "device": "auto | cpu | cuda | cuda:N",
        "dtype": "auto | bfloat16 | float16 | float32",
        "lora": "LoRA adapter folder or Hub id",
        "tokenizer": "tokenizer folder or Hub id (default: the model)",
        "batch_size": "prompts per generate call (default 4)",
        "add_special_tokens": "tokenize prompts with special tokens (default true)",
        "max_model_len": "context length (default: the model's config, e.g. max_position_embeddings)",
    }
    overlong_prompt = "reject"  # a prompt + max_tokens past the context is refused, never generated

    def __init__(self, config: EngineConfig) -> None:
        preset = config.preset
        model, lora, name = model_lora_name(config, "transformers:/path/to/model")
        super().__init__(config, model_id=model, name=name)
        self.lora = lora
        self.options.pop("lora", None)
        self.trust_remote_code = bool(preset.trust_remote_code) if preset else False
        self.batch_size = int(as_number(self.option("batch_size", 4), "batch_size", int))
        if self.batch_size < 1:
            raise EngineSpecError("batch_size must be at least 1")
        self.add_special_tokens = as_bool(self.option("add_special_tokens", True), "add_special_tokens")
        self.preset_dtype = (preset.engine.get("dtype") if preset else None)
        self.device = str(self.option("device", "auto"))
        self.dtype = str(self.option("dtype", "auto"))
        asked = self.option("max_model_len")
        self.asked_max_model_len = int(as_number(asked, "max_model_len", int)) if asked is not None else None
        self.max_model_len: int | None = self.asked_max_model_len
        self.context_source: str | None = "max_model_len option" if asked is not None else None
        self.model = None
        self.borrowed = False  # the model is another program's (adopt): lent per call, never released
        self._cancel = threading.Event()  # set by cancel(): the batch being decoded stops at its next token
        self._forward_stop = ForwardStop()  # armed by cancel() while a generate runs: its forward pass ends
        self.threads_used: list[int] = []  # torch intra-op threads of the last generate on CPU, each change

    def uses_local_cpu(self) -> bool:
        return str(self.device) == "cpu"

    def load(self) -> None:
        import torch

        AutoModelForCausalLM, AutoTokenizer = import_transformers("AutoModelForCausalLM", "AutoTokenizer")

        model_src = check_model_source(self.model_id)
        lora_src = check_model_source(self.lora, "LoRA adapter") if self.lora else None
        device = pick_device(self.device)
        dtype = pick_dtype(self.dtype, device, self.preset_dtype)
        tok_src = check_model_source(self.option("tokenizer"), "tokenizer") if self.option("tokenizer") else model_src
        with MODEL_BUILD_LOCK:  # see lab.engines.loading: from_pretrained is not thread-safe
            start = time.perf_counter()  # load time excludes waiting for another engine's load
            try:
                tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=self.trust_remote_code)
            except Exception as exc:  # noqa: BLE001 - any loader failure becomes a clear message
                raise load_failure(tok_src, exc, "tokenizer") from None
            try:
                model = AutoModelForCausalLM.from_pretrained(
                    model_src, dtype=getattr(torch, dtype), trust_remote_code=self.trust_remote_code
                )
            except Exception as exc:  # noqa: BLE001
                raise load_failure(model_src, exc) from None
            if lora_src:
                model = with_adapter(model, model_src, lora_src, getattr(torch, dtype), self.trust_remote_code)
            try:
                model.to(device)
            except Exception as exc:  # noqa: BLE001 - e.g. CUDA out of memory
                raise EngineLoadError(f"cannot move '{self.model_id}' to {device}: {exc}") from None
        model.eval()
        self._take(model, tokenizer, device, dtype)
        self.load_time_sec = time.perf_counter() - start

    def adopt(self, model, tokenizer) -> None:
        """Generate with `model`, already in memory, instead of loading one (module docstring); `tokenizer`
        is copied, so the left padding set for generation never reaches its owner's."""
        import copy

        first = next(model.parameters(), None)
        device = str(first.device) if first is not None else "cpu"
        dtype = str(getattr(model, "dtype", None) or (first.dtype if first is not None else "float32"))
        self.borrowed = True
        self._take(model, copy.deepcopy(tokenizer), device, dtype.removeprefix("torch."))
        self.load_time_sec = 0.0

    def _take(self, model, tokenizer, device: str, dtype: str) -> None:
        """Make `model` and `tokenizer` this engine's: left padding and a pad token for batches, the context."""
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is not None:
                tokenizer.pad_token = tokenizer.eos_token
            else:
                tokenizer.pad_token = tokenizer.convert_ids_to_tokens(0)
        self.tokenizer, self.model = tokenizer, model
        if self.asked_max_model_len is None:
            found = model_context_length(getattr(model, "config", None), tokenizer)
            self.max_model_len, self.context_source = found if found else (None, None)
        self.device, self.dtype = device, dtype
        self.loaded = True

    def _lent(self):
        """While a call uses the model: BorrowedModel around an adopted one, nothing around the engine's own."""
        return BorrowedModel(self.model) if self.borrowed else nullcontext()

    def _no_grad(self):
        """`inference_mode` for the engine's own model, `no_grad` for an adopted one (module docstring)."""
        import torch

        return torch.no_grad() if self.borrowed else torch.inference_mode()

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return ids

    def _generation_config(self, sampling: Sampling):
        import copy

        config = copy.deepcopy(self.model.generation_config)
        config.max_new_tokens = int(sampling.max_tokens)
        config.max_length = None
        config.do_sample = sampling.temperature > 0
        if config.do_sample:
            config.temperature = float(sampling.temperature)
            config.top_p = float(sampling.top_p)
            config.top_k = int(sampling.top_k) if sampling.top_k and sampling.top_k > 0 else None
            config.min_p = float(sampling.min_p) if sampling.min_p and sampling.min_p > 0 else None
        else:
            config.temperature, config.top_p, config.top_k, config.min_p = None, None, None, None
        config.repetition_penalty = float(sampling.repetition_penalty)
        config.pad_token_id = self.tokenizer.pad_token_id
        if sampling.stop:
            config.stop_strings = list(sampling.stop)
        return config

    def _generate_batch(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        import torch

        (StoppingCriteria, StoppingCriteriaList) = import_transformers("StoppingCriteria", "StoppingCriteriaList")

        cancelled, progress = self._cancel, self._progress
        counter = RowTokens(self._eos_ids(), self.tokenizer.pad_token_id)
        recorder = LogprobRecorder(self.model, self.logprobs_k) if self.logprobs_k > 0 else None
        on_cpu = self.uses_local_cpu()
        used = self.threads_used

        def share(threads: int) -> None:
            if not used or used[-1] != threads:
                used.append(threads)

        class StepClock(StoppingCriteria):
            """Notes when each decoding step ends (called once per step, after its token exists) and
            hands the chosen tokens to the log-probability recorder; ends every sequence at once after
            cancel()."""

            def __init__(self) -> None:
                self.times: list[float] = []

            def __call__(self, input_ids, scores, **kwargs):
                self.times.append(time.perf_counter())
                if recorder is not None:
                    recorder.note(input_ids)
                if on_cpu:  # another engine started or ended: take this engine's share from the next step
                    share(share_torch_threads())
                progress.add(counter.count(input_ids[:, -1]))  # each row still generating: one more token
                stop = cancelled.is_set()
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)

        enc = self.tokenizer(
            prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens
        ).to(self.device)
        clock = StepClock()
        if on_cpu:
            share(share_torch_threads())
        config = self._generation_config(sampling)
        if sampling.seed is not None:
            torch.manual_seed(int(sampling.seed))
        start = time.perf_counter()
        try:
            with self._no_grad():
                out = self.model.generate(
                    **enc,
                    generation_config=config,
                    stopping_criteria=StoppingCriteriaList([clock]),
                    tokenizer=self.tokenizer,
                )
        finally:
            if recorder is not None:
                recorder.close()
        end = time.perf_counter()
        input_len = enc["input_ids"].shape[1]
        eos_ids, pad_id = self._eos_ids(), self.tokenizer.pad_token_id
        completions = []
        for b, (row, mask) in enumerate(zip(out, enc["attention_mask"])):
            ids, hit_eos = trim_generated(row[input_len:].tolist(), eos_ids, pad_id)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            text, stop = cut_at_stop(text, sampling.stop)
            if hit_eos:
                finish, stop_reason = "stop", ids[-1]
            elif stop is not None:
                finish, stop_reason = "stop", stop
            elif len(ids) >= sampling.max_tokens:
                finish, stop_reason = "length", None
            else:
                finish, stop_reason = "stop", None
            ttft, latency = step_timings(clock.times, len(ids), start, end)
            completions.append(
                Completion(
                    text=text,
                    finish_reason=finish,
                    stop_reason=stop_reason,
                    token_ids=ids,
                    prompt_tokens=int(mask.sum()),
                    completion_tokens=len(ids),
                    ttft_s=ttft,
                    latency_s=latency,
                    logprobs=recorder.for_row(b, ids, self.tokenizer) if recorder is not None else None,
                )
            )
        return completions

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        if self.model is None:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        results: list = [None] * len(requests)
        with self._lock, self._progress.running(), (cpu_share.generating(self) if self.uses_local_cpu() else nullcontext()), \
                self._lent():
            self._cancel.clear()
            self.threads_used = []
            with self._forward_stop.watching(self.model):
                self._generate_admitted(requests, sampling, results, on_done)
        return results

    def _generate_admitted(self, requests: list[Request], sampling: Sampling, results: list,
                           on_done: OnDone | None) -> None:
        """generate()'s batches (called holding the engine's lock)."""
        todo = self.admit(requests, sampling, results, on_done)
        for begin in range(0, len(todo), self.batch_size):
            if self._cancel.is_set():
                break  # the batches not begun are dropped like the one cut: None, never an answer
            chunk = todo[begin:begin + self.batch_size]
            try:
                batch = self._generate_batch([requests[i].prompt for i in chunk], sampling)
            except Exception as exc:  # noqa: BLE001 - one bad batch must not lose the others
                batch = [Completion(text="", error=f"generation failed: {type(exc).__name__}: {exc}") for _ in chunk]
            if self._cancel.is_set():
                break  # cut short by cancel(): not an answer, never recorded
            for i, completion in zip(chunk, batch):
                self.finish(i, completion, results, on_done)

    def score_reference(self, prompt: str, reference: str) -> ReferenceScore:
        """Teacher forcing: one forward pass over the prompt's and the reference's ids; each reference
        token's log-probability from the raw logits of the position before it (only those positions'
        logits are computed where the model takes `logits_to_keep`)."""
        import torch

        if self.model is None:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        pair = tokenize_pair(self.tokenizer, prompt, reference, self.add_special_tokens)
        n_prompt, n_ref = len(pair.prompt_ids), len(pair.ref_ids)
        if not n_ref:
            return ReferenceScore([], prompt_tokens=n_prompt, error="empty reference")
        overflow = reference_fit_error(n_prompt, n_ref, self.max_model_len, 0)  # one forward pass, nothing generated
        if overflow is not None:
            return ReferenceScore([], prompt_tokens=n_prompt, error=overflow)
        ids = torch.tensor([pair.prompt_ids + pair.ref_ids], device=self.device)
        with self._lock, self._lent(), self._no_grad():
            try:
                logits = self.model(input_ids=ids, logits_to_keep=n_ref + 1).logits
            except TypeError:  # a model without logits_to_keep: every position's logits
                logits = self.model(input_ids=ids).logits
        rows = torch.log_softmax(logits[0, -(n_ref + 1):-1].float(), dim=-1)
        chosen = rows.gather(1, torch.tensor(pair.ref_ids, device=rows.device)[:, None]).squeeze(1)
        tokens = [self.tokenizer.decode([t], skip_special_tokens=False) for t in pair.ref_ids]
        return ReferenceScore([max(float(v), -1e4) for v in chosen.tolist()], tokens, prompt_tokens=n_prompt,
                              offsets=pair.ref_offsets)

    def cancel(self) -> None:
        """Stop the batch being decoded at its next token and drop it (and every batch not begun); the
        answers already finished stay delivered. The next generate() runs as usual."""
        self._cancel.set()
        self._forward_stop.arm()  # while a generate runs: its forward pass under way (a prefill) ends at its next module

    def refusal(self, prompt: str, sampling: Sampling) -> str | None:
        """Why this prompt is refused (prompt + max_tokens past the model's context), or None."""
        if not self.max_model_len:
            return None
        n = len(self.tokenizer(prompt, add_special_tokens=self.add_special_tokens).input_ids)
        return overlong_error(n, int(sampling.max_tokens), self.max_model_len, self.context_source)

    def memory_gb(self) -> float | None:
        if self.model is None:
            return None
        import torch

        if self.device.startswith("cuda"):
            return round(torch.cuda.memory_allocated(torch.device(self.device)) / 2**30, 3)
        total = sum(p.numel() * p.element_size() for p in self.model.parameters())
        return round(total / 2**30, 4)

    def close(self) -> None:
        with self._lock:
            self.model = None
            self.tokenizer = None
            self.loaded = False
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def engine_settings(self) -> dict:
        """SPEC §8 `sampling` keys describing the engine."""
        from importlib.metadata import version

        return {"dtype": self.dtype, "device": self.device, "lora_path": self.lora, "batch_size": self.batch_size,
                "max_model_len": self.max_model_len, "engine_version": f"transformers {version('transformers')}"}

    def describe(self) -> EngineInfo:
        return EngineInfo(
            kind=self.kind,
            model=self.model_id,
            device=f"{self.device} ({self.dtype})" if self.loaded else self.device,
            memory_gb=self.memory_gb(),
            lora=self.lora,
            notes=f"batch_size={self.batch_size}",
            architecture=self._architecture(),
            context_length=self.max_model_len,
            dtype=str(self.dtype).removeprefix("torch.") if self.dtype is not None else None,
        )

    def _architecture(self) -> str | None:
        """The loaded model's class as its config names it (the class itself where the config does not)."""
        if self.model is None:
            return None
        archs = getattr(getattr(self.model, "config", None), "architectures", None)
        base = getattr(self.model, "base_model", None) if self.lora else None  # peft wraps the model
        return str(archs[0]) if archs else type(base or self.model).__name__
