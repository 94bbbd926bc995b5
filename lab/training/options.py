"""The options of an evaluation while training, checked once when the callback is made (one LabError line each).

A mistake (a wrong type, a value out of range, an unknown preset, an engine option the engine does not take,
no step selected, a replay file that is not there, a results folder that is a file) surfaces at the line that
builds the callback, before any training, never hours later at the first save. The types are a pydantic model
(strict: `True` is no number, "no" is no boolean); the bounds and the hints are data (options.yaml).
"""
from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError,
                      field_validator, model_validator)

from lab.errors import LabError
from lab.settings import Settings
from lab.tb2lite import CORRECTED

OPTIONS_PATH = Path(__file__).with_name("options.yaml")
# SPEC option names an in-memory evaluation sets itself: the model is used where it sits, as it is
IN_MEMORY_OWN = ("device", "dtype", "lora", "name")
Number = Union[StrictInt, StrictFloat]
OptionValue = Union[StrictStr, StrictBool, StrictInt, StrictFloat]


@functools.lru_cache(maxsize=1)
def training_defaults() -> dict:
    """lab/training/options.yaml."""
    return yaml.safe_load(OPTIONS_PATH.read_text(encoding="utf-8"))


def _limit(name: str) -> int:
    return int(training_defaults()["limits"][name])


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _text_path(value: Union[str, os.PathLike], what: str) -> Path:
    text = os.fspath(value)
    if "\0" in text or not text.strip():
        raise ValueError(f"{what} path is empty or holds a NUL character")
    return Path(text).expanduser()


def checked_folder(path: Path) -> Path:
    """`path` when it is, or can become, a folder this process writes into: not a file, not under a file, and
    its nearest existing folder writable."""
    probe = path
    while not probe.exists():
        if probe.is_symlink():
            raise ValueError(f"{probe} is a link to nothing")
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"{probe} is a file, not a folder" if probe == path else f"{probe} (above it) is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{probe} is not writable by this process")
    return path


def option_value(key: str, value: str) -> str:
    """An engine option's value checked against options.yaml's rule for it (type and range), when it has one."""
    rule = training_defaults()["engine_option_rules"].get(key)
    if rule is None:
        return value
    if rule["type"] in ("int", "number"):
        try:
            number = int(value) if rule["type"] == "int" else float(value)
        except ValueError:
            raise ValueError(f"{key}={value!r:.60} is not {'a whole number' if rule['type'] == 'int' else 'a number'}") \
                from None
        if not math.isfinite(number) or not rule["min"] <= number <= rule["max"]:
            raise ValueError(f"{key}={value!r:.60} is out of range ({rule['min']} to {rule['max']})")
    elif value not in [str(v) for v in rule["values"]]:
        raise ValueError(f"{key}={value!r:.60}: use one of {', '.join(map(str, rule['values']))}")
    return value


def _option_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class EvalOptions(BaseModel):
    """What to replay at each checkpoint, on which engine, where the files go, how long it may take, and
    whether it runs beside training (a worker process) or in the training's own turn."""

    model_config = ConfigDict(extra="forbid", frozen=False)

    replay: Optional[Union[StrictStr, Path]] = None
    results: Optional[Union[StrictStr, Path]] = Field(None, validate_default=True)
    tasks: Optional[list[StrictStr]] = None
    limit: Optional[StrictInt] = Field(None, ge=1)
    mode: StrictStr = CORRECTED
    engine: StrictStr = "transformers"
    preset: Optional[StrictStr] = None
    reference: StrictBool = False
    max_tokens: Optional[StrictInt] = Field(None, ge=1)
    engine_options: dict[StrictStr, OptionValue] = Field(default_factory=dict)
    name: Optional[StrictStr] = None
    every_steps: Optional[StrictInt] = Field(None, ge=1)
    time_budget_s: Optional[Number] = Field(None, gt=0)
    base_model: Optional[StrictStr] = None
    store: Optional[StrictBool] = None
    background: StrictBool = False
    queue: Literal["all", "latest"] = "all"
    wait_at_end_s: Optional[Number] = Field(default_factory=lambda: training_defaults()["wait_at_end_s"], ge=0)
    device: Optional[StrictStr] = None
    subset_tasks: Optional[StrictInt] = Field(None, ge=1)
    subset_seed: StrictInt = Field(0, ge=0)

    def __init__(self, **data: Any) -> None:
        """The options, or a LabError of one line naming the argument, its value and what to give instead."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise LabError(_one_line(exc, data)) from None

    @field_validator("replay")
    @classmethod
    def _replay(cls, value):
        return None if value is None else str(_text_path(value, "the replay"))

    @field_validator("results")
    @classmethod
    def _results(cls, value):
        return checked_folder(_text_path(value, "the results").absolute()) if value is not None else Settings().runs_dir

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value):
        if value is not None and (not value or len(value) > _limit("tasks") or not all(t.strip() for t in value)):
            raise ValueError(f"at most {_limit('tasks')} task ids, none empty")
        return value

    @field_validator("limit", "every_steps", "max_tokens")
    @classmethod
    def _bounded(cls, value, info):
        cap = _limit(info.field_name)
        if value is not None and value > cap:
            raise ValueError(f"at most {cap}")
        return value

    @field_validator("time_budget_s", "wait_at_end_s")
    @classmethod
    def _seconds(cls, value):
        if value is not None and (not math.isfinite(value) or value > _limit("seconds")):
            raise ValueError(f"a finite number of seconds, at most {_limit('seconds')}")
        return None if value is None else float(value)

    @field_validator("engine")
    @classmethod
    def _engine(cls, value):
        if value not in training_defaults()["engines"]:
            raise ValueError(f"use one of {', '.join(training_defaults()['engines'])}")
        return value

    @field_validator("engine_options")
    @classmethod
    def _engine_options(cls, value):
        if len(value) > _limit("engine_options"):
            raise ValueError(f"at most {_limit('engine_options')} options")
        out = {}
        for key, raw in value.items():
            text = _option_text(raw)
            if isinstance(raw, float) and not math.isfinite(raw):
                raise ValueError(f"{key}={raw!r} is not a finite number")
            if any(c in key + text for c in "&?#") or "=" in key or not (key + text).isprintable():
                raise ValueError(f"{key!r}: {text!r:.60}: names and values may not hold '&', '?', '#' (a name no '=') "
                                 "or unprintable characters")
            if len(text) > _limit("engine_option_chars") or not key.strip():
                raise ValueError(f"{key!r:.60}: a name and a value of at most {_limit('engine_option_chars')} characters")
            out[key] = option_value(key.strip().lstrip("-").lower().replace("-", "_"), text)
        return out

    @field_validator("name")
    @classmethod
    def _name(cls, value):
        if value is not None and (not value.strip() or len(value) > _limit("name_chars") or "\0" in value):
            raise ValueError(f"a name of 1 to {_limit('name_chars')} characters")
        return value

    @field_validator("base_model")
    @classmethod
    def _base_model(cls, value):
        if value is not None and (not value.strip() or value.strip().startswith("-") or any(c in value for c in "?&#\0")):
            raise ValueError("not a folder or Hub id")
        return None if value is None else value.strip()

    @field_validator("device")
    @classmethod
    def _device(cls, value):
        if value is not None and not re.fullmatch(training_defaults()["device_pattern"], value):
            raise ValueError("not a device")
        return value

    @model_validator(mode="after")
    def _together(self) -> "EvalOptions":
        if self.every_steps is not None and (not self.in_memory or self.background):
            raise LabError("every_steps evaluates the model in memory between saves: it needs engine='transformers' "
                           "and background=False (vLLM and the background worker read saved checkpoints only)")
        if self.device is not None and not self.background:
            raise LabError(f"device={self.device!r} places the evaluation beside training: it needs background=True "
                           "(in the training's turn the model is replayed where it is)")
        if self.device is not None and not self.in_memory and not self.device.startswith("cuda:"):
            raise LabError(f"device={self.device!r}: a vLLM server is placed on a GPU by number ('cuda:1'), or "
                           "leave it out for the GPUs this process sees")
        if self.in_memory:
            own = sorted(set(self.engine_options) & set(IN_MEMORY_OWN))
            if own:
                raise LabError(f"engine_options {own}: engine='transformers' replays the model as it is (its dtype and "
                               "adapter; beside training its device is device=); leave these out")
        if self.time_budget_s is None and training_defaults()["time_budget_s"] is not None:
            self.time_budget_s = float(training_defaults()["time_budget_s"])
        return self

    @property
    def in_memory(self) -> bool:
        """Whether the engine is an in-process kind (transformers: the model in memory, or beside training its
        saved folder in the worker's memory); a server engine (vllm) runs apart and reads saved checkpoints."""
        from lab.engines.registry import engine_class

        return not engine_class(self.engine).managed

    def spec_options(self) -> dict[str, str]:
        """The SPEC options every checkpoint's engine gets: the preset, the user's, max_tokens."""
        options = {"preset": self.preset} if self.preset else {}
        options.update({k: str(v) for k, v in self.engine_options.items()})
        if self.max_tokens is not None:
            options["max_tokens"] = str(self.max_tokens)
        return options

    def imports_into_store(self, settings: Settings) -> bool:
        """Whether each file goes into the lab's store as it is written: `store` when given, else when the
        results folder is the lab's runs folder or inside its results folder (which the store reads)."""
        if self.store is not None:
            return bool(self.store)
        out = Path(self.results).resolve()
        runs, results = Path(settings.runs_dir).resolve(), Path(settings.results_dir).resolve()
        return out == runs or out.is_relative_to(results)


def _one_line(exc: ValidationError, given: dict[str, Any]) -> str:
    """The first problem of a ValidationError as `name=VALUE: what is wrong; what to give`."""
    err = exc.errors(include_url=False)[0]
    field = str(err["loc"][0]) if err["loc"] else "options"
    if err["type"] == "extra_forbidden":
        return f"{field}: not an option of the callback"
    hint = training_defaults()["hints"].get(field, "")
    message = str(err.get("msg", "")).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    named = field if field == "engine_options" and err["type"] == "value_error" else \
        f"{field}={_shown(given.get(field, err.get('input')))}"  # (an engine option's line names the option itself)
    return f"{named}: {message}" + (f"; {hint}" if hint and hint not in message else "")


def engine_spec(kind: str, target: str, options: dict[str, str]) -> str:
    """`KIND:TARGET?key=value&…`, the SPEC `python -m lab replay --engine` takes for the same checkpoint."""
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"{kind}:{target}" + (f"?{query}" if query else "")
