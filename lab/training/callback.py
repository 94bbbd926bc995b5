"""`TB2LiteCallback`: replay TB2-lite on every checkpoint a `transformers.Trainer` saves (docs/training.md).

At each save (and, with `every_steps`, every N optimizer steps) the checkpoint is replayed on the chosen
steps, `NAME-checkpoint-STEP.json` (and `.reference.json` with `reference=True`) is written into the lab's
results folder and imported into the lab's store (a running `python app.py` shows it at its next refresh),
and `tb2lite/*` goes to the trainer's own log at the save's global step. In the training's turn (the
default) the main process replays the model in memory and training waits; with `background=True` the save
is queued and a worker process evaluates the saved folder beside training (lab.training.worker), its
results handed to the log as they arrive. With `subset_tasks=K` each save replays K tasks, and the
checkpoints the series judgement cannot rule out as the best get the whole replay at the end. Every
evaluation's state is on disk (lab.training.jobs): `python -m lab training finish` completes what a run
left. Whatever goes wrong is one warning line and `tb2lite/eval_failed = 1`; training goes on.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from lab.engines.registry import create_engine
from lab.errors import LabError
from lab.settings import Settings
from lab.tb2lite import CORRECTED
from lab.training.checkpoint_job import JobContext, run_job
from lab.training.distributed import capped_budget, sharded_model, world_size
from lab.training.inprocess import has_tokenizer, in_memory_engine, in_memory_spec, saved_tokenizer
from lab.training.jobs import Job, JobBook, finish_command
from lab.training.evaluate import one_line
from lab.training.metrics import for_kind, timing_metrics
from lab.training.naming import clean_series, default_series, fresh_series
from lab.training.options import EvalOptions, engine_spec, training_defaults
from lab.training.plan import SeriesPlan, local_path, settings_record
from lab.training.series_state import SeriesState, delivery_line
from lab.training.steps import training_steps
from lab.training.storing import importer, stored_names
from lab.training.subset import stratified_tasks, subset_record, subset_steps
from lab.training.trainer_log import calling_trainer, log_at_step, log_metrics
from lab.training.vllm_checkpoints import CheckpointServer

logger = logging.getLogger("lab.training")


class _AtTrainEnd(TrainerCallback):
    """Put first in the trainer's callbacks: the end-of-training wait runs before any integration (TensorBoard,
    W&B, MLflow) closes its writer, so the results that arrive during it still reach them."""

    def __init__(self, owner: "TB2LiteCallback") -> None:
        self.owner = owner

    def on_train_end(self, args, state, control, **kwargs):
        self.owner._end(args, state, control)


class TB2LiteCallback(TrainerCallback):
    """Evaluate while training (module docstring). Every argument is checked here, before training starts.

    replay: the replay source as `python -m lab replay --replay` takes it (None: $LAB_REPLAY, else the cached
    download); results: the folder for the result files (None: the lab's results/runs); tasks, limit, mode:
    which steps, as --tasks/--limit/--mode; engine: "transformers" (the model in memory; beside training its
    saved folder) or "vllm" (the saved folder on a managed `vllm serve`); preset: a key of assets/models.yaml;
    reference: also score the reference answers' likelihood; max_tokens: new tokens per answer;
    engine_options: more SPEC options; name: the series' name (None: the trainer's run_name, else its output
    folder's name); every_steps: also evaluate the model in memory every N optimizer steps; time_budget_s:
    seconds one evaluation may take; base_model: a LoRA checkpoint's base for vLLM; tokenizer: renders the
    prompts (None: the trainer's processing_class); store: import into the lab's store (None: when `results`
    is inside the lab's results folder); trainer: the trainer to log through (None: the one that runs this
    callback). background: evaluate beside training in a worker process; queue: "all" or "latest" (saves
    overtaken by a newer one are skipped); wait_at_end_s: how long train() waits at its end for what is queued
    (None: until all is done); device: where the worker loads a checkpoint for engine="transformers" ("cpu",
    "cuda:1"; None: the model's device) or the GPU of its vLLM server; subset_tasks, subset_seed: replay K
    tasks (balanced over source groups, chosen once with the seed) at each save, the whole selection for the
    checkpoints the series judgement keeps.
    """

    def __init__(self, replay: str | None = None, results: str | Path | None = None, *,
                 tasks: list[str] | None = None, limit: int | None = None, mode: str = CORRECTED,
                 engine: str = "transformers", preset: str | None = None, reference: bool = False,
                 max_tokens: int | None = None, engine_options: dict[str, Any] | None = None, name: str | None = None,
                 every_steps: int | None = None, time_budget_s: float | None = None, base_model: str | None = None,
                 tokenizer: Any = None, store: bool | None = None, trainer: Any = None, background: bool = False,
                 queue: str = "all", wait_at_end_s: float | None = training_defaults()["wait_at_end_s"],
                 device: str | None = None, subset_tasks: int | None = None, subset_seed: int = 0) -> None:
        self.options = EvalOptions(replay=replay, results=results, tasks=tasks, limit=limit, mode=mode, engine=engine,
                                   preset=preset, reference=reference, max_tokens=max_tokens,
                                   engine_options={} if engine_options is None else engine_options, name=name,
                                   every_steps=every_steps, time_budget_s=time_budget_s, base_model=base_model,
                                   store=store, background=background, queue=queue, wait_at_end_s=wait_at_end_s,
                                   device=device, subset_tasks=subset_tasks, subset_seed=subset_seed)
        self.settings = Settings()
        self.replay_set, self.steps, self.selection = training_steps(self.options, self.settings)
        create_engine(engine_spec(engine, "/checkpoint-0", self.options.spec_options()))  # options checked, not loaded
        self.subset = None
        if subset_tasks is not None:
            chosen = stratified_tasks(self.steps, subset_tasks, subset_seed)
            self.subset = subset_record(self.steps, chosen, subset_tasks, subset_seed)
        if name is not None:
            clean_series(name)
        self.tokenizer = _checked_tokenizer(tokenizer)
        self.trainer = _checked_trainer(trainer)
        self._given_trainer = trainer is not None
        self.series: str | None = None
        self.budget_s = self.options.time_budget_s
        self.disabled: str | None = None  # why this run cannot be evaluated (said once)
        in_turn_server = not self.options.in_memory and not self.options.background
        self.server = CheckpointServer(self.options) if in_turn_server else None
        self.outcomes: dict[int, Job] = {}  # global step -> its evaluation in the training's turn
        self.state: SeriesState | None = None
        self._guard = _AtTrainEnd(self)
        self._ended = False

    def attach(self, trainer) -> "TB2LiteCallback":
        """`trainer.add_callback(self)`, logging through `trainer`; returns self."""
        self.trainer, self._given_trainer = trainer, True
        trainer.add_callback(self)
        return self

    @property
    def book(self) -> JobBook | None:
        return self.state.book if self.state is not None else None

    # --- the trainer's events ------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if not self._given_trainer:  # (again at each train(): one callback may serve several trainers)
            self.trainer = calling_trainer()
        self.outcomes, self._ended = {}, False
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
        reason = sharded_model(args) if self.options.in_memory and not self.options.background else None
        if reason:
            self.disabled = (f"{reason}: the main process does not hold the whole model; evaluate the saved "
                             "checkpoints with engine='vllm' or background=True")
            logger.warning("TB2-lite: no evaluation while training: %s", self.disabled)
        self._begin_series(args)

    def _begin_series(self, args) -> None:
        """The series' state folder and plan; the worker started early beside training (its imports overlap the
        first steps); the end-of-training wait placed before the integrations close."""
        book = JobBook(Path(args.output_dir).absolute() / str(training_defaults()["state_folder"]) / self.series)
        try:
            earlier = book.plan().get("subset") if book.exists() else None
        except LabError as exc:  # a state file broken by hand: this run's state starts again beside it
            logger.warning("TB2-lite: %s; this run writes it again", exc)
            earlier = None
        subset = earlier or self.subset  # chosen once per series: a resumed run keeps its first subset
        book.write_plan(SeriesPlan(options=self.options.model_dump(mode="json"), series=self.series,
                                   replay_path=local_path(str(self.replay_set.path)),
                                   replay_fingerprint=self.replay_set.fingerprint, replay_steps=len(self.replay_set.steps),
                                   selection=self.selection, subset=subset, budget_s=self.budget_s,
                                   settings=settings_record(self.settings), output_dir=str(Path(args.output_dir).absolute()),
                                   cwd=os.getcwd()).to_dict())
        book.begin()
        if self.state is not None and self.state.worker.running:  # an earlier train()'s worker: it stops, keeping its work
            if self.state.has_work():
                logger.warning("TB2-lite: the evaluation worker of the earlier training run stops; finish what it left "
                               "with: %s", finish_command(self.state.book.folder))
            self.state.worker.stop()
        self.state = SeriesState(book, self.options, subset)
        if subset is not None:
            self.subset = subset
        if self.options.background and not self.disabled:
            self.state.worker.start()
        handler = getattr(self.trainer, "callback_handler", None)
        if handler is not None and not any(c is self._guard for c in handler.callbacks):
            # a new list: the handler is iterating over the old one now (inserting into it would call this again)
            handler.callbacks = [self._guard, *handler.callbacks]

    def on_step_end(self, args, state, control, **kwargs):
        every = self.options.every_steps
        if every and state.global_step % every == 0 and not control.should_save:  # a save evaluates it anyway
            self._evaluate(args, state, control, kwargs, saved=False)
        if self.options.background and self.state is not None and state.is_world_process_zero:
            self.state.look(lambda job: self._deliver(job, args, state, control))

    def on_save(self, args, state, control, **kwargs):
        if self.options.background:
            self._queue(args, state, kwargs)
        else:
            self._evaluate(args, state, control, kwargs, saved=True)

    def on_train_end(self, args, state, control, **kwargs):
        self._end(args, state, control)  # (a loop without a Trainer: the guard did not run it first)
        if self.server is not None:
            self.server.close()

    def _end(self, args, state, control) -> None:
        """The end of training on the main process: wait for the series (lab.training.series_state)."""
        if self._ended or self.state is None or not state.is_world_process_zero:
            return
        self._ended = True
        if self.server is not None:
            self.server.close()  # (the whole replays at the end load their checkpoints in a worker of their own)
        wait_s, note = capped_budget(self.options.wait_at_end_s, args)
        if note and self.options.wait_at_end_s is not None:
            logger.warning("TB2-lite: at the end of training %s", note)
        try:
            self.state.end(int(state.global_step), wait_s, lambda job: self._deliver(job, args, state, control))
        except Exception as exc:  # noqa: BLE001 - the end of the evaluations is a line; training has ended well
            logger.warning("TB2-lite: the evaluations' state in %s could not be finished now (%s); finish them with "
                           "python -m lab training finish %s", self.state.book.folder, exc, self.state.book.folder)

    # --- evaluations ---------------------------------------------------------------------------
    def _training_block(self, args, state, folder: Path, saved: bool) -> dict:
        return {
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

    def _kind(self) -> str:
        return "subset" if self.subset else "save"

    def _checkpoint(self, args, state) -> tuple[int, Path] | None:
        """(the global step, its checkpoint folder) when this process evaluates it now, else None."""
        step = int(state.global_step)
        if not state.is_world_process_zero or self.disabled or step in self.outcomes:
            return None
        if self.state is None:  # a loop that did not call on_train_begin
            self.on_train_begin(args, state, None)
        return step, Path(args.output_dir).absolute() / f"{PREFIX_CHECKPOINT_DIR}-{step}"

    def _queue(self, args, state, kwargs: dict) -> None:
        """background=True: write the save's job and return (the worker reads the saved folder)."""
        at = self._checkpoint(args, state)
        if at is None:
            return
        step, folder = at
        try:
            spec = self._saved_spec(folder, kwargs) if self.options.in_memory else None
            job = Job(step, self._kind(), str(folder), spec, self._training_block(args, state, folder, True))
            self.outcomes[step] = self.state.queue(job)
            self.state.keep_worker()
        except Exception as exc:  # noqa: BLE001 - a save that cannot be queued is a line; training goes on
            logger.warning("TB2-lite: %s-%d not queued for evaluation: %s", PREFIX_CHECKPOINT_DIR, step, exc)

    def _saved_spec(self, folder: Path, kwargs: dict) -> str:
        """The SPEC the worker loads this checkpoint with: as the model in memory is, on `device`."""
        tokenizer_dir = None
        if not has_tokenizer(folder):
            tokenizer = self.tokenizer or _tokenizer_of(kwargs.get("processing_class"))
            if tokenizer is None:
                raise LabError("no tokenizer to render prompts with: give the Trainer a processing_class, or the "
                               "callback tokenizer=")
            tokenizer_dir = saved_tokenizer(tokenizer, self.state.book.folder / "tokenizer")
        return in_memory_spec(kwargs["model"], folder, self.options, self.options.device, tokenizer_dir)

    def _evaluate(self, args, state, control, kwargs: dict, saved: bool) -> None:
        """Evaluate the checkpoint of `state.global_step` on the main process, now; log what it gave."""
        at = self._checkpoint(args, state)
        if at is None:
            return
        step, folder = at
        job = Job(step, self._kind(), str(folder), None, self._training_block(args, state, folder, saved))
        try:
            job.spec = in_memory_spec(kwargs["model"], folder, self.options) if self.options.in_memory else None
            ctx = self._context(lambda _job: self._engine(folder, kwargs))
            job = run_job(ctx, job, record=saved)
            if saved:
                self.state.record(job)
        except Exception as exc:  # noqa: BLE001 - the series' state unreadable or unwritable: a line, training goes on
            job.status, job.reason = "failed", one_line(exc)
            job.metrics = timing_metrics(0.0, True)
        self.outcomes[step] = job
        line = delivery_line(job)
        if line:
            logger.warning("%s", line)
        log_metrics(self.trainer, state, control, for_kind(job.metrics, job.kind))

    def _context(self, engine_for) -> JobContext:
        plan = SeriesPlan.from_dict(self.state.book.plan())
        steps = subset_steps(self.steps, self.subset["tasks"]) if self.subset else self.steps
        release = (lambda engine: engine.close()) if self.server is None else (lambda engine: None)
        return JobContext(self.state.book, plan, self.steps, steps, engine_for, release,
                          import_file=importer(self.options, self.settings),
                          taken=stored_names(self.options, self.settings))

    def _engine(self, folder: Path, kwargs: dict):
        """The loaded engine for this checkpoint: the model in memory, or the saved folder on vLLM."""
        if self.server is not None:
            return self.server.engine_for(folder)
        tokenizer = self.tokenizer or _tokenizer_of(kwargs.get("processing_class")) or _saved_tokenizer(folder)
        return in_memory_engine(kwargs["model"], tokenizer, folder, self.options)

    def _deliver(self, job: Job, args, state, control) -> None:
        """A result from beside training: its numbers at its save's global step; a line when it failed."""
        line = delivery_line(job)
        if line:
            logger.warning("%s", line)
        if job.metrics:
            log_at_step(self.trainer, args, state, control, job.step, for_kind(job.metrics, job.kind),
                        str(training_defaults()["step_metric"]))


def _checked_tokenizer(tokenizer: Any) -> Any:
    """`tokenizer` when it can render prompts (a tokenizer, or a processor holding one), else a LabError."""
    if tokenizer is None or callable(getattr(_tokenizer_of(tokenizer), "apply_chat_template", None)):
        return tokenizer
    raise LabError(f"tokenizer={tokenizer!r:.60}: give a tokenizer object (AutoTokenizer.from_pretrained(...)) or a "
                   "processor holding one, or None for the trainer's processing_class")


def _checked_trainer(trainer: Any) -> Any:
    from transformers import Trainer

    if trainer is None or isinstance(trainer, Trainer):
        return trainer
    raise LabError(f"trainer={trainer!r:.60}: give the transformers Trainer to log through (or None for the one that "
                   "runs the callback)")


def _tokenizer_of(processing_class: Any) -> Any:
    """The tokenizer of a trainer's processing_class (a processor holds one as `.tokenizer`)."""
    if processing_class is None:
        return None
    return getattr(processing_class, "tokenizer", None) or processing_class


def _saved_tokenizer(folder: Path) -> Any:
    """The tokenizer saved with the checkpoint, when there is one."""
    if not has_tokenizer(folder):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)
