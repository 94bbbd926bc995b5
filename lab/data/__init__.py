"""Replay data: records, validation, cumulative history, sources and downloads (SPEC §1–§2)."""
from lab.data.context import StepContext, split_context
from lab.data.conversations import dev_subset, step_record, steps_from_conversations
from lab.data.history import builder_parse_ref, flatten_history, normalize_messages, ref_is_scored
from lab.data.download import Expected, file_sha256
from lab.data.replay import MODES, ReplaySet, bucket_counts, check_replay_file, load_replay
from lab.data.sources import ReplaySource, cached_replay_path, download_replay, resolve_replay_source
from lab.data.step import Step, bucket_of

__all__ = [
    "Expected",
    "MODES",
    "ReplaySet",
    "ReplaySource",
    "Step",
    "StepContext",
    "bucket_counts",
    "bucket_of",
    "builder_parse_ref",
    "check_replay_file",
    "cached_replay_path",
    "dev_subset",
    "file_sha256",
    "download_replay",
    "flatten_history",
    "load_replay",
    "normalize_messages",
    "ref_is_scored",
    "resolve_replay_source",
    "split_context",
    "step_record",
    "steps_from_conversations",
]
