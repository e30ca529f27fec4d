"""Fine-tune a contextembed checkpoint with the recipe of SPEC §2, on transformers' `Trainer`.

What is trained: LoRA adapters on the backbone's linear layers (peft), the separator's embedding row (one
vector; the rest of the embedding matrix stays frozen), a projection if the checkpoint has one, and optionally
the temperature. Each step is one batch of documents from one family, chunked by a strategy drawn for that
batch; documents longer than the window train through the same windows (and head carry) as inference.
The loss is `doc_weight · L_doc + dist_weight · L_dist`, averaged over the Matryoshka dims, plus
`within_weight · L_within` (the positive document's own chunks in the teacher's order) and
`keep_weight · L_keep` when on (the starting model's plain whole-document ranking of the batch, kept) and
`mix_weight · L_mix` when on (the starting model's two-pass `local_mix` vectors, learnt in one pass; with
`init_delta` the run continues a trained model's adapters); in the last
`qat_fraction` of the steps both queries and chunks pass through the int8 scheme with a straight-through
gradient. The result is a soup (the average of the last checkpoints' trained weights), saved both as a full
checkpoint and as a small delta (LoRA factors + separator row) over the starting weights.

The run's parts: `config` (`TrainConfig`, checked before anything loads), `batches` (which documents each step
sees and their teacher targets), `model` (the loss step) and this module (the loop, its callbacks, the soup).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

try:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from contextembed.training.model import ContextTrainingModel
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("training needs peft and accelerate: pip install 'contextembed[train]'") from error

from contextembed.delta import apply_delta, save_delta
from contextembed.training.batches import BatchCollator, PlannedBatches
from contextembed.training.config import TrainConfig
from contextembed.training.data import TrainingDocument, read_documents

logger = logging.getLogger(__name__)


def train(checkpoint: str | Path, data: str | Path, output_dir: str | Path, config: TrainConfig,
          resume: bool = False) -> Path:
    """Train, soup and save. Returns the folder of the trained checkpoint (`output_dir/checkpoint`).

    `resume=True` continues from the last checkpoint in `output_dir/checkpoints`, and is an error when there is
    none (a run that silently started over would spend the budget twice).
    """
    from contextembed.checkpoint import save_checkpoint
    from contextembed.modeling import ContextEmbedConfig, ContextEmbedModel, ContextEmbedProcessor

    config.validate()
    output_dir = Path(output_dir)
    last = _last_checkpoint(output_dir / "checkpoints") if resume else None
    if resume and last is None:
        raise ValueError(f"--resume: {str(output_dir)!r} has no checkpoint to continue from (checkpoints/"
                         "checkpoint-N); run without --resume to start a new run")
    scheme = ContextEmbedConfig.from_pretrained(checkpoint).int8_scheme
    if config.losses.qat_fraction > 0 and scheme != "unit":
        raise ValueError(f"int8 QAT trains the unit-vector int8 scheme, and {checkpoint} codes with "
                         f"int8_scheme={scheme!r}: set qat_fraction to 0")
    documents = read_documents(data)
    processor = ContextEmbedProcessor.from_pretrained(checkpoint)
    documents = _fit_length(documents, processor, config.data.max_document_tokens)
    torch.manual_seed(config.seed)
    base = ContextEmbedModel.from_pretrained(checkpoint, dtype=torch.float32)
    batches = PlannedBatches(documents, config)  # refuses data that forms no batch, before any writing
    teacher = None
    if config.losses.mix_weight > 0:  # L_mix's teacher: the starting model (the checkpoint with init_delta), frozen
        teacher = ContextEmbedModel.from_pretrained(checkpoint, dtype=torch.float32)
        if config.adapters.init_delta:
            apply_delta(teacher, config.adapters.init_delta)
    model = ContextTrainingModel(base, config, teacher=teacher)
    if config.adapters.init_delta:
        model.start_from_delta(config.adapters.init_delta)
    logger.info("training %d parameters (LoRA rank %d, separator row%s)",
                sum(p.numel() for p in model.parameters() if p.requires_grad), config.adapters.lora_rank,
                ", projection" if any(p.requires_grad for p in base.projection.parameters()) else "")
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")

    trainer = LossPartsTrainer(model=model, args=_training_arguments(config, output_dir), train_dataset=batches,
                               data_collator=BatchCollator(documents, processor, config),
                               callbacks=[Schedule(model, config)])
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    trainer.save_model(str(output_dir / "checkpoints" / f"checkpoint-{trainer.state.global_step}"))
    with open(output_dir / "train_log.jsonl", "w", encoding="utf-8") as f:
        for entry in trainer.state.log_history:
            f.write(json.dumps(entry) + "\n")

    model.load_state_dict(_soup(output_dir / "checkpoints", config.schedule.soup_size, model), strict=False)
    delta = model.delta()
    merged = model.merged()
    save_delta(output_dir / "delta.safetensors", delta, merged.config,
               extra={"steps": trainer.state.global_step, "seed": config.seed})
    return save_checkpoint(merged, processor, output_dir / "checkpoint")


class Schedule(TrainerCallback):
    """int8 QAT for the last `qat_fraction` of the steps, and the `max_minutes` hard stop."""

    def __init__(self, model: ContextTrainingModel, config: TrainConfig):
        self.model, self.config = model, config
        self.start = time.monotonic()

    def on_step_begin(self, args, state, control, **kwargs):
        self.model.quantize = state.global_step >= (1 - self.config.losses.qat_fraction) * self.config.schedule.max_steps

    def on_step_end(self, args, state, control, **kwargs):
        minutes = self.config.schedule.max_minutes
        if minutes is not None and time.monotonic() - self.start > 60 * minutes:
            logger.warning("time budget of %.1f minutes reached at step %d of %d: the result is trained for fewer "
                           "steps than planned", minutes, state.global_step, self.config.schedule.max_steps)
            control.should_training_stop = control.should_save = True


def _training_arguments(config: TrainConfig, output_dir: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(output_dir / "checkpoints"), max_steps=config.schedule.max_steps, per_device_train_batch_size=1,
        learning_rate=config.schedule.learning_rate, weight_decay=config.schedule.weight_decay, warmup_steps=config.schedule.warmup_ratio,
        lr_scheduler_type="warmup_stable_decay",
        lr_scheduler_kwargs={"num_decay_steps": int(config.schedule.decay_ratio * config.schedule.max_steps)},
        bf16=config.schedule.bf16, use_cpu=not torch.cuda.is_available(), logging_steps=config.schedule.logging_steps,
        save_steps=config.schedule.save_steps, save_total_limit=config.schedule.soup_size, seed=config.seed,
        dataloader_num_workers=0, remove_unused_columns=False, report_to="none", disable_tqdm=False)


class LossPartsTrainer(Trainer):
    """`Trainer` that logs the loss parts (L_doc, L_dist, L_within, L_keep and L_mix when on) beside the total
    loss."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        parts = getattr(self, "_parts", {})
        for name in ("l_doc", "l_dist", "l_within", "l_keep", "l_mix"):
            if name in outputs:
                parts.setdefault(name, []).append(float(outputs[name]))
        self._parts = parts
        return (outputs["loss"], outputs) if return_outputs else outputs["loss"]

    def log(self, logs, *args, **kwargs):
        parts = getattr(self, "_parts", None)
        if parts and "loss" in logs:
            logs.update({name: round(sum(v) / len(v), 4) for name, v in parts.items()})
            logs["temperature"] = round(float(self.model.temperature), 4)
            self._parts = {}
        super().log(logs, *args, **kwargs)


def _fit_length(documents, processor, max_tokens: int) -> list[TrainingDocument]:
    """Drop documents longer than `max_tokens` (sentence chunking), with a log line saying how many."""
    lengths = [len(r["input_ids"]) for r in processor.tokenize_documents(
        [[d.text[s:e] for s, e in d.sentences] for d in documents], task="document")]
    kept = [d for d, n in zip(documents, lengths) if n <= max_tokens]
    if not kept:
        raise ValueError(f"every one of the {len(documents)} training documents is longer than "
                         f"max_document_tokens={max_tokens} tokens: raise max_document_tokens")
    if len(kept) < len(documents):
        logger.warning("left out %d of %d documents longer than %d tokens", len(documents) - len(kept),
                       len(documents), max_tokens)
    return kept


def _last_checkpoint(folder: Path) -> Path | None:
    checkpoints = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return checkpoints[-1] if checkpoints else None


def _soup(folder: Path, size: int, model: ContextTrainingModel) -> dict[str, torch.Tensor]:
    """The mean of the trained weights of the last `size` checkpoints (a model soup of one run)."""
    from safetensors.torch import load_file

    checkpoints = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[-size:]
    names = set(model.trained_state())
    states = [load_file(c / "model.safetensors") for c in checkpoints]
    soup = {name: torch.stack([s[name].float() for s in states]).mean(0) for name in names if name in states[0]}
    logger.info("soup of %s", ", ".join(c.name for c in checkpoints))
    return soup
