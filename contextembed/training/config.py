"""`TrainConfig`: everything a training run depends on, checked before any model is loaded.

Every field is checked for its type and range, so a configuration either trains or fails at once with a message
that names the field: a run that would loop forever or train one step and call itself trained is refused here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from contextembed.training.data import TRAINING_CHUNKERS

# The kind each field must have (JSON gives ints for whole floats, so a float field takes an int too).
_INT, _FLOAT, _BOOL = (int,), (int, float), (bool,)
POSITIVE_INTS = ("max_steps", "batch_size", "lora_rank", "save_steps", "soup_size", "top_n", "max_document_tokens",
                 "keep_chars", "logging_steps")
POSITIVE_FLOATS = ("learning_rate", "lora_alpha", "temperature", "teacher_temperature", "within_teacher_temperature")
NON_NEGATIVE_FLOATS = ("weight_decay", "doc_weight", "dist_weight", "evidence_weight", "keep_weight",
                       "within_weight", "mix_weight")
FRACTIONS = ("warmup_ratio", "decay_ratio", "qat_fraction", "mix_local")


@dataclass
class TrainConfig:
    """Everything a run depends on; saved beside its outputs (`train_config.json`)."""

    seed: int = 0
    max_steps: int = 1000
    max_minutes: float | None = None  # a hard stop; the schedule follows max_steps
    batch_size: int = 8
    learning_rate: float = 2e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.05
    decay_ratio: float = 0.2  # linear decay over the last part of the steps
    lora_rank: int = 16
    lora_alpha: float = 32.0
    doc_weight: float = 1.0
    dist_weight: float = 1.0
    temperature: float = 0.05
    learn_temperature: bool = False
    teacher_temperature: float = 0.1
    top_n: int = 8
    evidence_weight: float = 0.5
    # L_within: the teacher's order of the positive document's own chunks, at its own softer temperature
    within_weight: float = 0.0
    within_teacher_temperature: float = 0.2
    within_skip_answer: bool = False  # L_within over the chunks other than the answer (evidence against the rest)
    # A query with several answer spans: the chunks of all but the student's best span lowered to this relevance in
    # L_dist's and L_within's targets (L_within's alone when `redundant_answer_in_dist` is false; below
    # `evidence_weight`), so the supporting context ranks next. None: off.
    redundant_answer_relevance: float | None = None
    redundant_answer_in_dist: bool = True  # False: lowered in L_within's target only (L_dist keeps every answer)
    keep_weight: float = 0.0  # L_keep: the untrained model's plain whole-document ranking (against forgetting)
    keep_chars: int = 1200  # each document's opening, cut at a sentence end, is its whole-document text
    # A source's batches this many times per epoch; a key may also name a family generator ("people": the families
    # whose id starts "people/").
    source_repeats: dict[str, int] = field(default_factory=dict)
    matryoshka_dims: list[int] | None = None  # None: the checkpoint's dims
    qat_fraction: float = 0.3
    chunking_weights: dict[str, float] = field(
        default_factory=lambda: {"sentences": 0.5, "tokens": 0.3, "paragraphs": 0.2})
    max_document_tokens: int = 1536
    # Opening tokens carried into later windows, one amount drawn per batch (empty: the checkpoint's own), so a
    # model trains under the carried context it will run with and the amount can be chosen afterwards.
    window_head_choices: list[int] = field(default_factory=list)
    # The head's document_mix during training and in the saved checkpoint (None: the checkpoint's own), so a model
    # trains with the mix it will run with.
    document_mix: float | None = None
    # Start the adapters, the separator row and any projection from this delta (a trained model continued) instead
    # of fresh ones; its LoRA rank and scale must be the run's.
    init_delta: str | None = None
    # L_mix: each chunk's one-pass vector pulled onto the starting model's `encode_documents(..., local_mix=mix_local)`
    # vector of it (its contextual vector mixed with its vector encoded alone), and each query onto the starting
    # model's, so one pass learns what the second adds. The starting model is the checkpoint with `init_delta`.
    mix_weight: float = 0.0
    mix_local: float = 0.1
    save_steps: int = 200
    soup_size: int = 3
    bf16: bool = True
    logging_steps: int = 10

    @classmethod
    def from_file(cls, path: str | Path | None, **overrides) -> TrainConfig:
        """The defaults, updated by a JSON object in `path` (if any), then by the non-`None` `overrides`."""
        values = {}
        if path:
            try:
                values = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"cannot read the training config {str(path)!r} as JSON: {error}") from error
            if not isinstance(values, dict):
                raise ValueError(f"the training config {str(path)!r} must hold a JSON object of TrainConfig fields, "
                                 f"got a {type(values).__name__}")
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown training options in {path}: {sorted(unknown)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        """Raise a `ValueError` naming the first field that has the wrong type or an impossible value."""
        _check(self, "seed", _INT, lambda v: True, "an integer")
        for name in POSITIVE_INTS:
            _check(self, name, _INT, lambda v: v > 0, "a positive integer")
        for name in POSITIVE_FLOATS:
            _check(self, name, _FLOAT, lambda v: v > 0, "a positive number")
        for name in NON_NEGATIVE_FLOATS:
            _check(self, name, _FLOAT, lambda v: v >= 0, "a number >= 0")
        for name in FRACTIONS:
            _check(self, name, _FLOAT, lambda v: 0 <= v <= 1, "a number in [0, 1]")
        for name in ("learn_temperature", "bf16", "within_skip_answer", "redundant_answer_in_dist"):
            _check(self, name, _BOOL, lambda v: True, "true or false")
        if self.redundant_answer_relevance is not None:
            _check(self, "redundant_answer_relevance", _FLOAT, lambda v: 0 <= v <= 1,
                   "a number in [0, 1] (or null)")
        if self.init_delta is not None and not (isinstance(self.init_delta, str) and self.init_delta):
            raise ValueError(f"init_delta must be the path of a delta file (or null), got {self.init_delta!r}")
        if self.max_minutes is not None:
            _check(self, "max_minutes", _FLOAT, lambda v: v > 0, "a positive number of minutes (or null)")
        weights = self.chunking_weights
        if (not isinstance(weights, dict) or set(weights) - set(TRAINING_CHUNKERS)
                or any(not _is(w, _FLOAT) or w < 0 for w in weights.values()) or not any(weights.values())):
            raise ValueError(f"chunking_weights must map some of {TRAINING_CHUNKERS} to numbers >= 0, not all zero, got "
                             f"{weights!r}")
        repeats = self.source_repeats
        if not isinstance(repeats, dict) or any(not _is(n, _INT) or n < 1 for n in repeats.values()):
            raise ValueError(f"source_repeats must map sources to positive integers, got {repeats!r}")
        dims = self.matryoshka_dims
        if dims is not None and (not isinstance(dims, list) or not dims or any(not _is(d, _INT) or d <= 0
                                                                               for d in dims)):
            raise ValueError(f"matryoshka_dims must be a non-empty list of positive integers (or null), got {dims!r}")
        heads = self.window_head_choices
        if not isinstance(heads, list) or any(not _is(h, _INT) or h < 0 for h in heads):
            raise ValueError(f"window_head_choices must be a list of integers >= 0, got {heads!r}")
        mix = self.document_mix
        if mix is not None and not (_is(mix, _FLOAT) and 0 <= mix < 1):
            raise ValueError(f"document_mix must be a number in [0, 1) or null, got {mix!r}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be at least 2: the other documents of a batch are the negatives")


def _is(value, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and (kinds == _BOOL or not isinstance(value, bool))


def _check(config: TrainConfig, name: str, kinds: tuple[type, ...], ok, expected: str) -> None:
    value = getattr(config, name)
    if not _is(value, kinds) or not ok(value):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
