"""`TrainConfig`: everything a training run depends on, grouped by concern and checked before any model is loaded.

A config is four groups plus the seed (JSON: `{"seed": 0, "data": {...}, "losses": {...}, "schedule": {...},
"adapters": {...}}`); every field is checked for its type and range, so a configuration either trains or fails at once
with a message that names the field (`losses.temperature must be a positive number, got 0`). A run that would loop
forever or train one step and call itself trained is refused here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from contextembed.training.data import TRAINING_CHUNKERS


@dataclass
class DataConfig:
    """Which documents a step sees and how they are chunked."""

    batch_size: int = 8  # documents of one family per step; the others of the batch are the negatives
    chunking_weights: dict[str, float] = field(
        default_factory=lambda: {"sentences": 0.5, "tokens": 0.3, "paragraphs": 0.2})  # one chunker drawn per batch
    max_document_tokens: int = 1536  # longer documents are left out (logged)
    # A source's batches this many times per epoch; a key may also name a family generator ("people": the families
    # whose id starts "people/").
    source_repeats: dict[str, int] = field(default_factory=dict)
    # Opening tokens carried into later windows, one amount drawn per batch (empty: the checkpoint's own), so a
    # model trains under the window head it will run with.
    window_head_choices: list[int] = field(default_factory=list)


@dataclass
class LossConfig:
    """The loss: `doc_weight · L_doc + dist_weight · L_dist` over the Matryoshka dims, plus the optional terms."""

    doc_weight: float = 1.0
    dist_weight: float = 1.0
    temperature: float = 0.05
    teacher_temperature: float = 0.1  # of L_dist's teacher targets
    top_n: int = 8  # a chunk's relevance is the mean of its top-n token scores
    evidence_weight: float = 0.5  # an evidence word's teacher score, relative to an answer word's 1
    # L_within: the teacher's order of the positive document's own chunks, at its own softer temperature
    within_weight: float = 0.0
    within_teacher_temperature: float = 0.2
    keep_weight: float = 0.0  # L_keep: the untrained model's plain whole-document ranking (against forgetting)
    keep_chars: int = 1200  # each document's opening, cut at a sentence end, is its whole-document text
    # L_mix: each chunk's one-pass vector pulled onto the starting model's `encode_documents(..., local_mix=...)`
    # vector of it, and each query onto the starting model's, so one pass learns what the second pass adds.
    mix_weight: float = 0.0
    local_mix: float = 0.1
    matryoshka_dims: list[int] | None = None  # None: the checkpoint's dims
    qat_fraction: float = 0.3  # int8 quantisation-aware training over the last part of the steps


@dataclass
class ScheduleConfig:
    """Steps, learning rate, checkpoints and the soup."""

    max_steps: int = 1000
    max_minutes: float | None = None  # a hard stop; the schedule follows max_steps
    learning_rate: float = 2e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.05
    decay_ratio: float = 0.2  # linear decay over the last part of the steps
    save_steps: int = 200
    soup_size: int = 3  # the result is the mean of the last soup_size checkpoints
    bf16: bool = True
    logging_steps: int = 10


@dataclass
class AdapterConfig:
    """What is trained: LoRA on every linear layer (plus the separator row and any projection)."""

    lora_rank: int = 16
    lora_alpha: float = 32.0
    # Start the adapters, the separator row and any projection from this delta (a trained model continued);
    # its LoRA rank and scale must be the run's.
    init_delta: str | None = None


SECTIONS = {"data": DataConfig, "losses": LossConfig, "schedule": ScheduleConfig, "adapters": AdapterConfig}
# Each field's checks: (allowed types, test, what the message says it must be).
_INT, _FLOAT, _BOOL = (int,), (int, float), (bool,)  # JSON gives ints for whole floats, so a float field takes an int
_POSITIVE_INT = (_INT, lambda v: v > 0, "a positive integer")
_POSITIVE = (_FLOAT, lambda v: v > 0, "a positive number")
_NON_NEGATIVE = (_FLOAT, lambda v: v >= 0, "a number >= 0")
_FRACTION = (_FLOAT, lambda v: 0 <= v <= 1, "a number in [0, 1]")
CHECKS = {
    "batch_size": _POSITIVE_INT, "max_document_tokens": _POSITIVE_INT,
    "doc_weight": _NON_NEGATIVE, "dist_weight": _NON_NEGATIVE, "temperature": _POSITIVE,
    "teacher_temperature": _POSITIVE, "top_n": _POSITIVE_INT, "evidence_weight": _NON_NEGATIVE,
    "within_weight": _NON_NEGATIVE, "within_teacher_temperature": _POSITIVE, "keep_weight": _NON_NEGATIVE,
    "keep_chars": _POSITIVE_INT, "mix_weight": _NON_NEGATIVE, "local_mix": _FRACTION, "qat_fraction": _FRACTION,
    "max_steps": _POSITIVE_INT, "learning_rate": _POSITIVE, "weight_decay": _NON_NEGATIVE,
    "warmup_ratio": _FRACTION, "decay_ratio": _FRACTION, "save_steps": _POSITIVE_INT, "soup_size": _POSITIVE_INT,
    "bf16": (_BOOL, lambda v: True, "true or false"), "logging_steps": _POSITIVE_INT,
    "lora_rank": _POSITIVE_INT, "lora_alpha": _POSITIVE,
}


@dataclass
class TrainConfig:
    """Everything a run depends on; saved beside its outputs (`train_config.json`)."""

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    losses: LossConfig = field(default_factory=LossConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    adapters: AdapterConfig = field(default_factory=AdapterConfig)

    @classmethod
    def from_dict(cls, values: dict | None = None, *, where: str = "the training config", **overrides) -> TrainConfig:
        """A checked config from its JSON form (`{"seed", "data", "losses", "schedule", "adapters"}`), updated by
        `overrides` given by field name (`max_steps=5`, `temperature=0.1`: each name is in one group); an override
        of `None` is ignored.

        >>> TrainConfig.from_dict({"schedule": {"max_steps": 5}}, temperature=0.1).losses.temperature
        0.1
        >>> TrainConfig.from_dict({"losses": {"temprature": 0.1}})
        Traceback (most recent call last):
        ...
        ValueError: unknown training options in the training config: ['losses.temprature']
        """
        values = {} if values is None else values
        if not isinstance(values, dict):
            raise ValueError(f"{where} must hold a JSON object ({{'seed', 'data', 'losses', 'schedule', "
                             f"'adapters'}}), got a {type(values).__name__}")
        unknown = sorted(set(values) - {"seed", *SECTIONS})
        groups = {}
        for name, kind in SECTIONS.items():
            group = values.get(name, {})
            if not isinstance(group, dict):
                raise ValueError(f"{where}: {name} must be an object of {kind.__name__} fields, got {group!r}")
            unknown += [f"{name}.{key}" for key in sorted(set(group) - {f.name for f in fields(kind)})]
            groups[name] = dict(group)
        if unknown:
            raise ValueError(f"unknown training options in {where}: {unknown}")
        seed = values.get("seed", 0)
        for key, value in overrides.items():
            if value is None:
                continue
            if key == "seed":
                seed = value
                continue
            section = next((name for name, kind in SECTIONS.items() if key in {f.name for f in fields(kind)}), None)
            if section is None:
                raise ValueError(f"unknown training option {key!r}")
            groups[section][key] = value
        config = cls(seed, **{name: SECTIONS[name](**groups[name]) for name in SECTIONS})
        config.validate()
        return config

    @classmethod
    def from_file(cls, path: str | Path | None, **overrides) -> TrainConfig:
        """The defaults, updated by the JSON object in `path` (if any), then by the non-`None` `overrides`."""
        values = {}
        if path:
            try:
                values = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"cannot read the training config {str(path)!r} as JSON: {error}") from error
        return cls.from_dict(values, where=repr(str(path)) if path else "the training config", **overrides)

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self) -> None:
        """Raise a `ValueError` naming the first field that has the wrong type or an impossible value."""
        if not _is(self.seed, _INT):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        for section in SECTIONS:
            group = getattr(self, section)
            for name, (kinds, ok, expected) in CHECKS.items():
                if hasattr(group, name) and not (_is(getattr(group, name), kinds) and ok(getattr(group, name))):
                    raise ValueError(f"{section}.{name} must be {expected}, got {getattr(group, name)!r}")
        self._validate_data()
        losses, schedule, adapters = self.losses, self.schedule, self.adapters
        dims = losses.matryoshka_dims
        if dims is not None and (not isinstance(dims, list) or not dims
                                 or any(not _is(d, _INT) or d <= 0 for d in dims)):
            raise ValueError(f"losses.matryoshka_dims must be a non-empty list of positive integers (or null), got "
                             f"{dims!r}")
        if schedule.max_minutes is not None and not (_is(schedule.max_minutes, _FLOAT) and schedule.max_minutes > 0):
            raise ValueError(f"schedule.max_minutes must be a positive number of minutes (or null), got "
                             f"{schedule.max_minutes!r}")
        if adapters.init_delta is not None and not (isinstance(adapters.init_delta, str) and adapters.init_delta):
            raise ValueError(f"adapters.init_delta must be the path of a delta file (or null), got "
                             f"{adapters.init_delta!r}")

    def _validate_data(self) -> None:
        data = self.data
        weights = data.chunking_weights
        if (not isinstance(weights, dict) or set(weights) - set(TRAINING_CHUNKERS)
                or any(not _is(w, _FLOAT) or w < 0 for w in weights.values()) or not any(weights.values())):
            raise ValueError(f"data.chunking_weights must map some of {TRAINING_CHUNKERS} to numbers >= 0, not all "
                             f"zero, got {weights!r}")
        repeats = data.source_repeats
        if not isinstance(repeats, dict) or any(not _is(n, _INT) or n < 1 for n in repeats.values()):
            raise ValueError(f"data.source_repeats must map sources to positive integers, got {repeats!r}")
        heads = data.window_head_choices
        if not isinstance(heads, list) or any(not _is(h, _INT) or h < 0 for h in heads):
            raise ValueError(f"data.window_head_choices must be a list of integers >= 0, got {heads!r}")
        if data.batch_size < 2:
            raise ValueError("data.batch_size must be at least 2: the other documents of a batch are the negatives")


def _is(value, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and (kinds == _BOOL or not isinstance(value, bool))
