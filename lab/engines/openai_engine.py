"""`openai:BASE_URL[,BASE_URL…]#MODEL`: OpenAI-compatible servers (`vllm serve`, `transformers serve`,
llama.cpp's `llama-server`, …), through the `openai` SDK (lab/engines/client/).

The lab's own rendered prompt goes to `{BASE_URL}/v1/completions` (BASE_URL may end in `/v1`
or not), so the prompt shown is the prompt used. Every request is streamed (TTFT, latency and
token counts per request), sends the full sampling (lab/engines/client/fields.py) and asks for
the generated token ids (vLLM's `return_token_ids`). Several comma-separated base URLs are
replicas of one model: requests go to the least busy one, and a request that fails on one
(connection error, 5xx, 429) is tried again on another.

Options: `tokenizer=PATH_OR_ID` (for rendering; default: MODEL, from a folder or the local HF
cache only, never downloaded; without one the renderer uses its identity-based formats),
`api_key=KEY` (default: $OPENAI_API_KEY), `timeout=SECONDS` (600 per read), `retries=N` (3),
`concurrency=N` (requests in flight for the whole engine; default 64 per vLLM replica, 4 per
other replica), `max_model_len=N` (when the server does not say it), `check=false` (skip the
probe of `load()`).

Why the SDK's own retries are off (`max_retries=0`) and the lab retries itself: a retry must
be able to move to another replica, and a stream that breaks half-way (a server killed while
answering) is not retried by the SDK at all. Timeouts, streaming, SSE parsing and the error
types are the SDK's.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Iterator, Sequence

from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.client.endpoints import Replica, ReplicaSet, api_root, split_target
from lab.engines.client.failures import Failure, classify
from lab.engines.client.fields import (
    GENERATION_CONFIG_CARRIES,
    generation_config_field,
    is_neutral,
    refused_fields,
    request_fields,
    sent_sampling,
)
from lab.engines.client.probe import read_models
from lab.engines.client.stream import read_stream
from lab.engines.common import EngineBase, EngineConfig, OnDone
from lab.engines.context import SERVER_MIN_NEW_TOKENS, overlong_error, reference_fit_error
from lab.engines.loading import rendering_tokenizer
from lab.engines.logprobs import MalformedLogprobs, logprob_value, token_text
from lab.engines.reference_likelihood import ReferenceScore, tokenize_pair
from lab.engines.spec import as_bool, as_number, short_name
from lab.errors import EngineLoadError, EngineSpecError

__all__ = ["OpenAIEngine", "api_root", "completion_body"]

DEFAULT_CONCURRENCY = 4  # per replica of a CPU server
SERVER_CONCURRENCY = {"vllm": 64}  # per replica, by the `owned_by` of /v1/models
PROBE_PROMPT = "Hello"


def completion_body(model: str, prompt: str | list[int], sampling: Sampling, refused: dict[str, str] | None = None,
                    logprobs: int = 0) -> dict:
    """The JSON body of one streamed /v1/completions request, as the SDK's client sends it (the prompt as
    text or as token ids)."""
    fields, _ = request_fields(sampling, refused or {}, logprobs=logprobs)
    return {"model": model, "prompt": prompt, "stream": True, **fields}


class OpenAIEngine(EngineBase):
    """Streams rendered prompts to `/v1/completions` of one or more replicas, a few at a time."""

    kind = "openai"
    usage = "openai:BASE_URL#MODEL"
    scores_reference = True
    OPTIONS = {
        "tokenizer": "tokenizer folder or Hub id used to render prompts (default: MODEL)",
        "api_key": "bearer token (default: $OPENAI_API_KEY)",
        "timeout": "seconds to wait for each read (default 600)",
        "retries": "further tries after a connection error, 429 or 5xx, on another replica when there is one (default 3)",
        "concurrency": "requests in flight (default: 64 per vLLM replica, 4 per other replica)",
        "max_model_len": "context length when the server does not report one in /v1/models",
        "check": "probe each server in load() (default true)",
        "ignore_eos": "vLLM: generate max_tokens every time (benchmarks; default false)",
    }

    def __init__(self, config: EngineConfig) -> None:
        urls, model = split_target(config.spec, config.target)
        super().__init__(config, model_id=model, name=short_name(model))
        self.urls = urls
        self.base_url = urls[0]
        self.api_key = self.option("api_key") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.timeout = float(as_number(self.option("timeout", 600), "timeout"))
        self.retries = int(as_number(self.option("retries", 3), "retries", int))
        self.check = as_bool(self.option("check", True), "check")
        self.ignore_eos = as_bool(self.option("ignore_eos", False), "ignore_eos")
        asked = self.option("concurrency")
        self.asked_concurrency = int(as_number(asked, "concurrency", int)) if asked is not None else None
        if self.asked_concurrency is not None and self.asked_concurrency < 1:
            raise EngineSpecError(f"engine spec '{config.spec}': concurrency must be at least 1")
        self.concurrency = self.asked_concurrency or DEFAULT_CONCURRENCY * len(urls)
        asked_len = self.option("max_model_len")
        self.asked_max_model_len = int(as_number(asked_len, "max_model_len", int)) if asked_len is not None else None
        self.max_model_len: int | None = self.asked_max_model_len
        self.backoff_s = 0.5
        self.replicas = ReplicaSet([Replica(url) for url in urls])
        self.server_models: list[str] = []
        self.last_sent: dict = {}
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._clients_open = False
        self._cancel = threading.Event()  # set by cancel(): in-flight requests are dropped, none retried
        self.context_guard: tuple[int, str] | None = None  # set by a managed server that cannot refuse
        # `transformers serve`: the model's generation config, sent per request with the sampling
        self.generation_base: dict | None = None
        # send a prompt as the token ids the lab rendered (a managed vLLM server of the same checkpoint,
        # which would tokenize the same text again), never to a server whose tokenizer the lab cannot know
        self.prompt_as_ids = False
        self.prompt_sent_as = ""  # how the last prompt went: "token_ids" or "text" (the result file says it)
        # a managed server's rendering tokenizer, loading since its server started (loading.rendering_tokenizer_soon)
        self.tokenizer_soon: Future | None = None

    @property
    def overlong_prompt(self) -> str:
        """What the server does with a prompt past its context: vLLM refuses one longer than the
        context by itself (400) and answers one that leaves too little room with fewer tokens
        ("shorten"); other servers are assumed to refuse ("reject")."""
        owners = {r.owner for r in self.replicas.replicas if r.owner}
        return "shorten" if owners == {"vllm"} and self.context_guard is None else "reject"

    def refusal(self, prompt: str, sampling: Sampling) -> str | None:
        """The lab's own refusal of an over-long prompt, for servers that would not refuse it."""
        if self.context_guard is None or self.tokenizer is None:
            return None
        length, source = self.context_guard
        n = len(self.tokenizer(prompt).input_ids)  # as the server counts it: with the special tokens it adds
        return overlong_error(n, int(sampling.max_tokens), length, source)

    # --- loading ---------------------------------------------------------------------
    def _open_clients(self) -> None:
        import openai

        # the SDK's own Timeout: it runs on an HTTP library of its choosing, whose types are not the lab's to pass
        timeout = openai.Timeout(self.timeout, connect=min(10.0, self.timeout))
        for replica in self.replicas.replicas:
            replica.client = openai.OpenAI(base_url=replica.url, api_key=self.api_key, timeout=timeout, max_retries=0)
        self._clients_open = True

    def _probe(self, replica: Replica) -> str | None:
        """Ask one replica what it serves and send it one short request with every field (what it
        refuses is learnt here, once). Returns why it cannot be used, or None."""
        import openai

        try:
            listed = read_models(replica.client, self.model_id)
        except openai.APIConnectionError as exc:
            return classify(exc, replica.url, self.model_id, self.timeout).message
        replica.models, replica.owner, replica.max_model_len = listed.ids, listed.owner, listed.max_model_len
        probe = replace(self.default_sampling, max_tokens=1, stop=None)
        result = self._attempt(replica, PROBE_PROMPT, probe)
        if isinstance(result, Failure):
            return result.message
        replica.token_ids = bool(result.token_ids)
        if not replica.token_ids:
            replica.refused.setdefault("return_token_ids", "no token ids in its answer")
        return None

    def load(self) -> None:
        start = time.perf_counter()
        self._open_clients()
        problems: dict[str, str] = {}
        if self.check:
            with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
                found = dict(zip(self.urls, pool.map(self._probe, self.replicas.replicas)))
            problems = {url: why for url, why in found.items() if why}
            if len(problems) == len(self.urls):
                self.close()
                first = next(iter(problems.values()))
                hint = ("start the server (vllm serve / transformers serve) or fix the URL" if "unreachable" in first
                        else "check the model name and the server's log")
                raise EngineLoadError(f"OpenAI-compatible {'endpoint' if len(self.urls) == 1 else 'endpoints'} "
                                      f"failed: {'; '.join(problems.values())}; {hint}")
            for replica in self.replicas.replicas:  # usable later if it comes back
                if replica.url in problems:
                    replica.last_error = problems[replica.url]
        live = [r for r in self.replicas.replicas if r.url not in problems]
        self.server_models = sorted({m for r in live for m in r.models})
        lengths = [r.max_model_len for r in live if r.max_model_len]
        self.max_model_len = self.asked_max_model_len or (min(lengths) if lengths else None)
        if self.asked_concurrency is None:
            self.concurrency = sum(SERVER_CONCURRENCY.get(r.owner or "", DEFAULT_CONCURRENCY)
                                   for r in self.replicas.replicas)
            self._slots = threading.BoundedSemaphore(self.concurrency)
        early = self.tokenizer_soon.result() if self.tokenizer_soon is not None else None
        # none early: a Hub model's files may have come with its server's start (vLLM downloads them)
        self.tokenizer = early if early is not None else rendering_tokenizer(self.option("tokenizer") or self.model_id)
        self.load_time_sec = time.perf_counter() - start
        self.loaded = True

    # --- one request -----------------------------------------------------------------
    def _attempt(self, replica: Replica, prompt: str, sampling: Sampling,
                 prompt_ids: Sequence[int] | None = None) -> Completion | Failure:
        """Send one streamed request to `replica`; a refused field is dropped and the request
        sent again at once (this is how a server's unknown fields are learnt). With `prompt_as_ids`
        the prompt goes as its token ids where the lab has them (`prompt_ids`)."""
        import openai

        resent = False
        while True:
            fields, left_out = request_fields(sampling, replica.refused, logprobs=self.logprobs_k)
            carried = GENERATION_CONFIG_CARRIES if self.generation_base is not None else ()
            blocked = {k: v for k, v in left_out.items() if not is_neutral(k, v) and k not in carried}
            if blocked:
                name, value = next(iter(blocked.items()))
                return Failure(f"server {replica.url} does not accept {name} ({replica.refused[name]}), so it "
                               f"cannot apply {name}={value}; use a server that does (vLLM) or leave {name} neutral", False)
            as_ids = self.prompt_as_ids and prompt_ids is not None
            body = completion_body(self.model_id, list(prompt_ids) if as_ids else prompt, sampling, replica.refused,
                                   self.logprobs_k)
            if self.generation_base is not None:
                body["generation_config"] = generation_config_field(sampling, self.generation_base)
            if self.ignore_eos:
                body["ignore_eos"] = True
            start = time.perf_counter()
            try:
                # the SDK's client sends the body as it is: `completions.create` would first walk it
                # through its type transforms, item by item (76 ms for a prompt of 8,000 token ids)
                stream = replica.client.post("/completions", body=body, cast_to=openai.types.Completion, stream=True,
                                             stream_cls=openai.Stream[openai.types.Completion])
                completion = read_stream(stream, start, self.tokenizer,
                                         0 if "logprobs" in replica.refused else self.logprobs_k,
                                         on_tokens=self._progress.add)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a message
                failure = classify(exc, replica.url, self.model_id, self.timeout)
                if failure.unreachable and not resent and not isinstance(exc, openai.APITimeoutError):
                    # a pooled keep-alive connection the server had just closed: once more, at once
                    resent = True
                    continue
                newly = refused_fields(failure.server_message, set(fields) - set(replica.refused)) \
                    if failure.status in (400, 422) else set()
                if not newly:
                    return failure
                for name in newly:
                    replica.refused[name] = f"{failure.status}: {failure.server_message}"
                continue
            self.last_sent = sent_sampling(fields)
            self.prompt_sent_as = "token_ids" if as_ids else "text"
            return completion

    def _request(self, prompt: str, sampling: Sampling, prompt_ids: Sequence[int] | None = None) -> Completion:
        """One request with retries, moving to another replica after a failure where there is one."""
        tried: set[str] = set()
        last: Failure | None = None
        cycles = 0
        with self._slots:
            for attempt in range(self.retries + 1):
                if self._cancel.is_set():
                    return Completion(text="", error="cancelled")
                if attempt and len(tried) >= len(self.replicas):
                    time.sleep(self.backoff_s * 2 ** cycles)  # every replica failed once: wait, then go round again
                    cycles += 1
                    tried.clear()
                replica = self.replicas.acquire(avoid=tried)
                result: Completion | Failure | None = None
                try:
                    result = self._attempt(replica, prompt, sampling, prompt_ids)
                finally:
                    failed = result if isinstance(result, Failure) else None
                    self.replicas.release(replica, failed.message if failed else None,
                                          unreachable=bool(failed and failed.unreachable))
                if isinstance(result, Completion):
                    return result
                last = result
                if not result.retryable:
                    return Completion(text="", error=result.message)
                tried.add(replica.url)
        assert last is not None
        return Completion(text="", error=f"{last.message} (after {self.retries + 1} attempts)")

    # --- the reference's likelihood --------------------------------------------------------
    def score_reference(self, prompt: str, reference: str) -> ReferenceScore:
        """Teacher forcing through the server: the prompt's and the reference's token ids in one
        `/v1/completions` request with `prompt_logprobs` (vLLM) and `max_tokens=1`; each reference
        token's log-probability is read at its position. Needs the model's tokenizer here."""
        if not self._clients_open:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        if self.tokenizer is None:
            return ReferenceScore([], error="no local tokenizer for this model: give tokenizer=PATH_OR_ID")
        pair = tokenize_pair(self.tokenizer, prompt, reference)
        if not pair.ref_ids:
            return ReferenceScore([], prompt_tokens=len(pair.prompt_ids), error="empty reference")
        # the ids go as they are (the prompt's special tokens counted in them); the request generates one token
        overflow = reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), self.max_model_len,
                                       SERVER_MIN_NEW_TOKENS)
        if overflow is not None:
            return ReferenceScore([], prompt_tokens=len(pair.prompt_ids), error=overflow)
        with self._slots:
            replica = self.replicas.acquire(avoid=set())
            failed = None
            try:
                # the SDK's typed `completions.create` walks every one of the thousands of ids through its
                # parameter transform (a quarter of the step's time): the same request, its body as JSON
                answer = replica.client.post("/completions", cast_to=object, body={
                    "model": self.model_id, "prompt": pair.prompt_ids + pair.ref_ids,
                    "max_tokens": SERVER_MIN_NEW_TOKENS, "temperature": 0.0, "prompt_logprobs": 0})
            except Exception as exc:  # noqa: BLE001 - every failure becomes a message
                failed = classify(exc, replica.url, self.model_id, self.timeout)
            finally:
                self.replicas.release(replica, failed.message if failed else None,
                                      unreachable=bool(failed and failed.unreachable))
        if failed is not None:
            return ReferenceScore([], prompt_tokens=len(pair.prompt_ids), error=failed.message)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        rows = choice.get("prompt_logprobs") if choice is not None else None
        if not isinstance(rows, list) or len(rows) < len(pair.prompt_ids) + len(pair.ref_ids):
            return ReferenceScore([], prompt_tokens=len(pair.prompt_ids),
                                  error="the server returned no prompt log-probabilities (vLLM does)")
        logprobs, tokens = [], []
        for position, token_id in enumerate(pair.ref_ids, start=len(pair.prompt_ids)):
            index = position - len(pair.prompt_ids)
            entry = (rows[position] or {}).get(str(token_id)) if isinstance(rows[position], dict) else None
            if not isinstance(entry, dict) or entry.get("logprob") is None:
                return ReferenceScore([], prompt_tokens=len(pair.prompt_ids),
                                      error=f"no log-probability for reference token {index}")
            try:  # a hostile or broken server: NaN, +inf, text or a 400-digit number is no log-probability
                logprobs.append(logprob_value(entry["logprob"], f"log-probability of reference token {index}"))
                decoded = entry.get("decoded_token")
                tokens.append("" if decoded is None else token_text(decoded, f"reference token {index}"))
            except MalformedLogprobs as exc:
                return ReferenceScore([], prompt_tokens=len(pair.prompt_ids), error=f"the server's {exc}")
        return ReferenceScore(logprobs, tokens, prompt_tokens=len(pair.prompt_ids), offsets=pair.ref_offsets)

    # --- protocol ---------------------------------------------------------------------
    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        if not self._clients_open:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        results: list = [None] * len(requests)
        if not requests:
            return results
        todo = self.admit(requests, sampling, results, on_done)
        if not todo:
            return results
        workers = min(self.concurrency, len(todo))
        self._cancel.clear()
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"openai-{self.name}")
        with self._progress.running():
            try:
                futures = {pool.submit(self._request, requests[i].prompt, sampling, requests[i].prompt_ids): i
                           for i in todo}
                for future in self._as_completed(futures):
                    index = futures[future]
                    try:
                        completion = future.result()
                    except Exception as exc:  # noqa: BLE001 - a bug in one request must not lose the others
                        completion = Completion(text="", error=f"{type(exc).__name__}: {exc}")
                    if self._cancel.is_set() and completion.error:
                        continue  # cut short by cancel(): not an answer, never recorded
                    self.finish(index, completion, results, on_done)
            finally:
                # after cancel() nothing waits for the dropped requests; otherwise every one has finished here
                pool.shutdown(wait=not self._cancel.is_set(), cancel_futures=True)
        return results

    def _as_completed(self, futures: dict) -> Iterator:
        """Finished futures as they finish; stops waiting within 0.1 s of cancel()."""
        pending = set(futures)
        while pending and not self._cancel.is_set():
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            yield from done
        yield from (f for f in pending if f.done() and not f.cancelled())

    def cancel(self) -> None:
        """Drop the requests in flight now: their connections are closed (the server aborts them) and
        the answers already finished stay delivered. The engine stays usable (fresh clients)."""
        self._cancel.set()
        if not self._clients_open:
            return
        old = [r.client for r in self.replicas.replicas]
        self._open_clients()
        for client in old:
            if client is not None:
                client.close()

    def close(self) -> None:
        for replica in self.replicas.replicas:
            if replica.client is not None:
                replica.client.close()
                replica.client = None
        self._clients_open = False
        self.loaded = False

    def refused(self) -> list[str]:
        """Request fields some replica refuses (the lab leaves them out there), sorted."""
        return sorted({k for r in self.replicas.replicas for k in list(r.refused)})

    def engine_settings(self) -> dict:
        """SPEC §8 `sampling` keys: the endpoints, concurrency, the server's max_model_len and
        what was actually sent (a field a server refused is recorded as null)."""
        settings: dict = {"base_url": self.base_url, "concurrency": self.concurrency}
        if len(self.urls) > 1:
            settings["endpoints"] = list(self.urls)
        if self.max_model_len:
            settings["max_model_len"] = self.max_model_len
        not_sent = [k for k in self.refused() if k in ("repetition_penalty", "top_k", "min_p", "seed", "stop")]
        if not_sent:
            settings["sampling_not_sent"] = not_sent
            settings.update({k: None for k in not_sent})
        if self.last_sent:
            settings["sampling_sent"] = dict(self.last_sent)
        settings["token_ids"] = any(r.token_ids for r in self.replicas.replicas)
        if self.prompt_sent_as:
            settings["prompt_sent_as"] = self.prompt_sent_as
        return settings

    def describe(self) -> EngineInfo:
        extra = f" (+{len(self.urls) - 1} replica{'s' if len(self.urls) > 2 else ''})" if len(self.urls) > 1 else ""
        parts = [", ".join(self.urls)]
        if self.server_models:
            listed = "listed" if self.model_id in self.server_models else "not listed"
            parts.append(f"model {listed} by /v1/models")
        if self.max_model_len:
            parts.append(f"max_model_len {self.max_model_len}")
        parts.append(f"concurrency {self.concurrency}")
        if self.refused():
            parts.append(f"server refuses {', '.join(self.refused())} (not sent)")
        down = [r.url for r in self.replicas.replicas if r.last_error]
        if down:
            parts.append(f"failing: {', '.join(down)}")
        if self.loaded and self.tokenizer is None:
            parts.append("no local tokenizer (identity-based prompt formats)")
        return EngineInfo(kind=self.kind, model=self.model_id, device=f"remote {self.base_url}{extra}",
                          notes="; ".join(parts), context_length=self.max_model_len)
