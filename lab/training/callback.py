"""`TB2LiteCallback`: replay TB2-lite on every checkpoint a `transformers.Trainer` saves (docs/training.md).

At each save (and, with `every_steps`, every N optimizer steps) the main process replays the chosen
steps on the checkpoint, writes `NAME-checkpoint-STEP.json` (and `.reference.json` with `reference=True`)
into the lab's results folder, imports them into the lab's store (a running `python app.py` shows them
at its next refresh) and logs `tb2lite/*` through the trainer's own log. Whatever goes wrong is one
warning line and `tb2lite/eval_failed = 1`; training goes on.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from lab.engines.registry import create_engine
from lab.settings import Settings
from lab.tb2lite import CORRECTED
from lab.training.distributed import capped_budget, sharded_model, world_size
from lab.training.evaluate import Outcome, RunPlan, evaluate_checkpoint, one_line
from lab.training.inprocess import in_memory_engine
from lab.training.metrics import timing_metrics
from lab.training.naming import checkpoint_stem, clean_series, default_series, fresh_series
from lab.training.options import EvalOptions, engine_spec
from lab.training.steps import training_steps
from lab.training.trainer_log import calling_trainer, log_metrics
from lab.training.vllm_checkpoints import CheckpointServer

logger = logging.getLogger("lab.training")


class TB2LiteCallback(TrainerCallback):
    """Evaluate while training (module docstring). Every argument is checked here, before training starts.

    replay: the replay source as `python -m lab replay --replay` takes it (None: $LAB_REPLAY, else the cached
    download); results: the folder for the result files (None: the lab's results/runs); tasks, limit, mode:
    which steps, as --tasks/--limit/--mode; engine: "transformers" (the model in memory) or "vllm" (the saved
    folder on a managed `vllm serve`); preset: a key of assets/models.yaml whose prompt options, contract and
    sampling apply (`?preset=KEY`); reference: also score the reference answers' likelihood (NLL per token);
    max_tokens: new tokens per answer; engine_options: more SPEC options (batch_size, contract,
    gpu_memory_utilization, kv_cache_gb …); name: the series' name (None: the trainer's run_name, else its
    output folder's name); every_steps: also evaluate the model in memory every N optimizer steps (transformers
    only); time_budget_s: seconds one evaluation may take; base_model: a LoRA checkpoint's base for vLLM when its
    adapter_config.json does not name it; tokenizer: renders the prompts (None: the trainer's processing_class);
    store: import into the lab's store (None: when `results` is the lab's runs folder or inside its results
    folder); trainer: the trainer to log through (None: the one that runs this callback).
    """

    def __init__(self, replay: str | None = None, results: str | Path | None = None, *,
                 tasks: list[str] | None = None, limit: int | None = None, mode: str = CORRECTED,
                 engine: str = "transformers", preset: str | None = None, reference: bool = False,
                 max_tokens: int | None = None, engine_options: dict[str, Any] | None = None, name: str | None = None,
                 every_steps: int | None = None, time_budget_s: float | None = None, base_model: str | None = None,
                 tokenizer: Any = None, store: bool | None = None, trainer: Any = None) -> None:
        self.options = EvalOptions(replay=replay, results=results, tasks=tasks, limit=limit, mode=mode, engine=engine,
                                   preset=preset, reference=reference, max_tokens=max_tokens,
                                   engine_options=dict(engine_options or {}), name=name, every_steps=every_steps,
                                   time_budget_s=time_budget_s, base_model=base_model, store=store)
        self.settings = Settings()
        self.replay_set, self.steps, self.selection = training_steps(self.options, self.settings)
        create_engine(engine_spec(engine, "/checkpoint-0", self.options.spec_options()))  # options checked, not loaded
        if name is not None:
            clean_series(name)
        self.tokenizer = tokenizer
        self.trainer = trainer
        self._given_trainer = trainer is not None
        self.series: str | None = None
        self.budget_s = self.options.time_budget_s
        self.disabled: str | None = None  # why this run cannot be evaluated (said once)
        self.server = None if self.options.in_memory else CheckpointServer(self.options)
        self.outcomes: dict[int, Outcome] = {}  # global step -> what its evaluation gave

    def attach(self, trainer) -> "TB2LiteCallback":
        """`trainer.add_callback(self)`, logging through `trainer`; returns self."""
        self.trainer, self._given_trainer = trainer, True
        trainer.add_callback(self)
        return self

    # --- the trainer's events ------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if not self._given_trainer:  # (again at each train(): one callback may serve several trainers)
            self.trainer = calling_trainer()
        self.outcomes = {}
        if not state.is_world_process_zero:
            return
        wanted = clean_series(self.options.name or default_series(args.output_dir, getattr(args, "run_name", None)))
        self.series = fresh_series(self.options.results, wanted) if state.global_step == 0 else wanted
        if self.series != wanted:
            logger.warning("TB2-lite: %s already holds checkpoint results of a series '%s'; this training run's are "
                           "'%s'", self.options.results, wanted, self.series)
        self.budget_s, note = capped_budget(self.options.time_budget_s, args)
        if note:
            logger.warning("TB2-lite: %s", note)
        reason = sharded_model(args) if self.options.in_memory else None
        if reason:
            self.disabled = (f"{reason}: the main process does not hold the whole model; evaluate the saved "
                             "checkpoints with engine='vllm'")
            logger.warning("TB2-lite: no evaluation while training: %s", self.disabled)

    def on_step_end(self, args, state, control, **kwargs):
        every = self.options.every_steps
        if every and state.global_step % every == 0 and not control.should_save:  # a save evaluates it anyway
            self._evaluate(args, state, control, kwargs, saved=False)

    def on_save(self, args, state, control, **kwargs):
        self._evaluate(args, state, control, kwargs, saved=True)

    def on_train_end(self, args, state, control, **kwargs):
        if self.server is not None:
            self.server.close()

    # --- one evaluation ------------------------------------------------------------------------
    def _evaluate(self, args, state, control, kwargs: dict, saved: bool) -> None:
        """Evaluate the checkpoint of `state.global_step` on the main process; log what it gave."""
        step = int(state.global_step)
        if not state.is_world_process_zero or self.disabled or step in self.outcomes:
            return
        if self.series is None:  # a loop that did not call on_train_begin
            self.on_train_begin(args, state, None)
        started = time.perf_counter()
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}"
        engine = None
        try:
            engine = self._engine(folder, kwargs)
            plan = self._plan(args, state, folder, saved and folder.is_dir())
            outcome = evaluate_checkpoint(engine, self.steps, plan, self._importer())
        except Exception as exc:  # noqa: BLE001 - an engine that cannot start is a failed evaluation, not a stop
            outcome = Outcome(error=one_line(exc))
        finally:
            if engine is not None and self.server is None:
                engine.close()  # the in-memory engine lets go of the model (the model itself stays)
        seconds = time.perf_counter() - started
        self.outcomes[step] = outcome
        if outcome.error:
            logger.warning("TB2-lite evaluation of %s-%d failed after %.1f s: %s", PREFIX_CHECKPOINT_DIR, step,
                           seconds, outcome.error)
        if outcome.store_line and outcome.store_line.startswith("warning"):
            logger.warning("TB2-lite: %s", outcome.store_line)
        log_metrics(self.trainer, state, control, {**outcome.metrics, **timing_metrics(seconds, bool(outcome.error))})

    def _engine(self, folder: Path, kwargs: dict):
        """The loaded engine for this checkpoint: the model in memory, or the saved folder on vLLM."""
        if self.server is not None:
            return self.server.engine_for(folder)
        tokenizer = self.tokenizer or _tokenizer_of(kwargs.get("processing_class")) or _saved_tokenizer(folder)
        return in_memory_engine(kwargs["model"], tokenizer, folder, self.options)

    def _plan(self, args, state, folder: Path, saved: bool) -> RunPlan:
        out_dir = Path(self.options.results)
        training = {
            "global_step": int(state.global_step),
            "epoch": float(state.epoch) if state.epoch is not None else None,
            "run_name": getattr(args, "run_name", None),
            "series": self.series,
            "output_dir": str(args.output_dir),
            "checkpoint": str(folder) if saved else None,
            "saved": saved,
            "max_steps": int(state.max_steps) if state.max_steps else None,
            "world_size": world_size(args),
            "trainer": type(self.trainer).__name__ if self.trainer is not None else None,
        }
        taken = self._stored_names()
        return RunPlan(out_dir=out_dir, stem=checkpoint_stem(out_dir, self.series, state.global_step, taken),
                       eval_path=str(self.replay_set.path), replay_fingerprint=self.replay_set.fingerprint,
                       replay_steps=len(self.replay_set.steps), selection=self.selection,
                       extra={"training": training}, reference=self.options.reference,
                       budget_s=self.budget_s, taken=taken)

    def _stored_names(self):
        """The store's check of run names (a run whose file is gone), when the files go into the store."""
        if not self.options.imports_into_store(self.settings):
            return None
        from lab.store.autoimport import store_run_names

        return store_run_names(self.settings)

    def _importer(self) -> Callable[[Path], str] | None:
        """Import into the lab's store as `python -m lab replay` does (triage flags included), when wanted."""
        if not self.options.imports_into_store(self.settings):
            return None
        from lab.store.autoimport import import_new_run
        from lab.triage import refresh_step_flags

        def import_file(path: Path) -> str:
            try:
                return import_new_run(self.settings, path, after_import=refresh_step_flags)
            except Exception as exc:  # noqa: BLE001 - the file is written; the lab imports it at its next start
                return f"warning: {path.name} not imported into the results database now ({one_line(exc)})"

        return import_file


def _tokenizer_of(processing_class: Any) -> Any:
    """The tokenizer of a trainer's processing_class (a processor holds one as `.tokenizer`)."""
    if processing_class is None:
        return None
    return getattr(processing_class, "tokenizer", None) or processing_class


def _saved_tokenizer(folder: Path) -> Any:
    """The tokenizer saved with the checkpoint, when there is one."""
    if not (folder / "tokenizer_config.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)
