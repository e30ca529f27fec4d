"""Fine-tune a contextembed checkpoint with the recipe of SPEC §2, on transformers' `Trainer`.

What is trained: LoRA adapters on the backbone's linear layers (peft), the separator's embedding row (one
vector; the rest of the embedding matrix stays frozen), a projection if the checkpoint has one, and optionally
the temperature. Each step is one batch of documents from one family, chunked by a strategy drawn for that
batch; documents longer than the window train through the same windows (and head carry) as inference.
The loss is `doc_weight · L_doc + dist_weight · L_dist`, averaged over the Matryoshka dims, plus
`keep_weight · L_keep` when on (the starting model's plain whole-document ranking of the batch, kept); in the last
`qat_fraction` of the steps both queries and chunks pass through the int8 scheme with a straight-through
gradient. The result is a soup (the average of the last checkpoints' trained weights), saved both as a full
checkpoint and as a small delta (LoRA factors + separator row) over the starting weights.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

try:
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import LoraLayer
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("training needs peft and accelerate: pip install 'contextembed[train]'") from error
from transformers import Trainer, TrainerCallback, TrainingArguments

from contextembed.training.data import (
    CHUNKINGS,
    TOKEN_WINDOW_SIZES,
    TrainingDocument,
    chunk_document,
    family_batches,
    read_documents,
    word_labels,
)
from contextembed.delta import save_delta
from contextembed.training.losses import (
    chunk_relevance,
    chunk_scores,
    cut_and_normalize,
    distillation_loss,
    document_loss,
    fake_quantize_int8,
    keep_loss,
)

logger = logging.getLogger(__name__)


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
    keep_weight: float = 0.0  # L_keep: the untrained model's plain whole-document ranking (against forgetting)
    keep_chars: int = 1200  # each document's opening, cut at a sentence end, is its whole-document text
    source_repeats: dict[str, int] = field(default_factory=dict)  # a source's batches this many times per epoch
    matryoshka_dims: list[int] | None = None  # None: the checkpoint's dims
    qat_fraction: float = 0.3
    chunking_weights: dict[str, float] = field(
        default_factory=lambda: {"sentences": 0.5, "tokens": 0.3, "paragraphs": 0.2})
    max_document_tokens: int = 1536
    save_steps: int = 200
    soup_size: int = 3
    bf16: bool = True
    logging_steps: int = 10

    @classmethod
    def from_file(cls, path: str | Path | None, **overrides) -> TrainConfig:
        values = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown training options in {path}: {sorted(unknown)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if set(self.chunking_weights) - set(CHUNKINGS) or not any(self.chunking_weights.values()):
            raise ValueError(f"chunking_weights must weigh some of {CHUNKINGS}, got {self.chunking_weights}")
        for name in ("max_steps", "batch_size", "lora_rank", "save_steps", "soup_size", "top_n"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.keep_weight, (int, float)) or self.keep_weight < 0:
            raise ValueError(f"keep_weight must be a number >= 0, got {self.keep_weight!r}")
        if not 0 <= self.qat_fraction <= 1:
            raise ValueError(f"qat_fraction must be in [0, 1], got {self.qat_fraction!r}")
        if any(not isinstance(n, int) or n < 1 for n in self.source_repeats.values()):
            raise ValueError(f"source_repeats must map sources to positive integers, got {self.source_repeats}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be at least 2: the other documents of a batch are the negatives")


class ContextTrainingModel(nn.Module):
    """The checkpoint's model with LoRA adapters, a trainable separator row and the loss in its forward."""

    def __init__(self, model, config: TrainConfig):
        super().__init__()
        self.config = config
        self.dims = sorted(set(config.matryoshka_dims or model.config.allowed_dims) | {model.config.full_dim})
        bad = [d for d in self.dims if d > model.config.full_dim]
        if bad:
            raise ValueError(f"matryoshka_dims {bad} exceed the checkpoint's {model.config.full_dim} dimensions")
        for module in model.modules():  # dropout's random numbers cost more than they help here
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        model.backbone = get_peft_model(model.backbone, LoraConfig(
            r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0, target_modules="all-linear"))
        for parameter in model.projection.parameters():
            parameter.requires_grad_(True)
        self.model = model
        embeddings = model.get_input_embeddings()
        self.separator_id = model.config.chunk_token_id
        self.separator = nn.Parameter(embeddings.weight[self.separator_id].detach().clone())
        self._hook = embeddings.register_forward_hook(self._use_trained_separator)
        self.log_inverse_temperature = nn.Parameter(torch.tensor(-math.log(config.temperature)),
                                                    requires_grad=config.learn_temperature)
        self.quantize = False  # switched on for the last qat_fraction of the steps
        self._base_pass = False  # True while the untrained model (adapters off, separator row as built) runs
        # L_keep's reference projects with the projection as built (only kept when L_keep is on).
        self.base_projection = copy.deepcopy(model.projection).requires_grad_(False) if config.keep_weight else None

    def _use_trained_separator(self, module, args, output):
        if self._base_pass:
            return output
        is_separator = (args[0] == self.separator_id).unsqueeze(-1)
        return torch.where(is_separator, self.separator.to(output.dtype), output)

    @property
    def temperature(self) -> torch.Tensor:
        return torch.exp(-self.log_inverse_temperature)

    def forward(self, documents: dict, queries: dict, positives: torch.Tensor, relevance: torch.Tensor,
                plain: dict | None = None) -> dict:
        chunks = self.model(**documents, normalize=False).chunk_embeddings  # (B, C, D), raw
        query_vectors = self.model(**queries, normalize=False).chunk_embeddings[:, 0]  # (Q, D)
        chunk_mask = documents["attention_mask"]
        doc_losses, dist_losses = [], []
        for dim in self.dims:
            c, q = cut_and_normalize(chunks, dim), cut_and_normalize(query_vectors, dim)
            if self.quantize:
                c = fake_quantize_int8(c, self.model.config.int8_clip_sigmas)
                q = fake_quantize_int8(q, self.model.config.int8_clip_sigmas)
            scores = chunk_scores(q, c, chunk_mask)  # (Q, B, C)
            doc_losses.append(document_loss(scores, positives, self.temperature))
            dist_losses.append(distillation_loss(scores, positives, relevance, self.temperature,
                                                 self.config.teacher_temperature))
        l_doc, l_dist = torch.stack(doc_losses).mean(), torch.stack(dist_losses).mean()
        loss = self.config.doc_weight * l_doc + self.config.dist_weight * l_dist
        parts = {"l_doc": l_doc.detach(), "l_dist": l_dist.detach()}
        if plain is not None:
            l_keep = self._keep(plain, query_vectors, queries)
            loss = loss + self.config.keep_weight * l_keep
            parts["l_keep"] = l_keep.detach()
        return {"loss": loss, **parts}

    def _keep(self, plain: dict, query_vectors: torch.Tensor, queries: dict) -> torch.Tensor:
        full = self.model.config.full_dim
        whole = self.model(**plain, normalize=False).chunk_embeddings[:, 0]  # (B, D): one chunk per document
        scores = cut_and_normalize(query_vectors, full) @ cut_and_normalize(whole, full).T
        base_whole, base_queries = (chunks[:, 0] for chunks in self.base_chunks(plain, queries))
        base_scores = cut_and_normalize(base_queries, full) @ cut_and_normalize(base_whole, full).T
        return keep_loss(scores, base_scores, self.config.teacher_temperature)

    @torch.no_grad()
    def base_chunks(self, *inputs: dict) -> list[torch.Tensor]:
        """Raw chunk vectors of the starting checkpoint for each input batch: adapters off (switched once for all
        of them), separator row and projection as built."""
        if self.base_projection is None:
            raise ValueError("the starting model's vectors are kept only for L_keep: set keep_weight > 0")
        trained_projection, self.model.projection = self.model.projection, self.base_projection
        self._base_pass = True
        try:
            with self.model.backbone.disable_adapter():
                return [self.model(**batch, normalize=False).chunk_embeddings for batch in inputs]
        finally:
            self.model.projection, self._base_pass = trained_projection, False

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The weights this run changes (LoRA factors, separator, projection, temperature)."""
        return {name: p.detach().clone() for name, p in self.named_parameters()
                if p.requires_grad or name == "log_inverse_temperature"}

    def delta(self) -> dict:
        """The LoRA factors (named by the plain model's module names), the separator row and any projection."""
        tensors, scales = {}, {}
        for name, module in self.model.backbone.named_modules():
            if isinstance(module, LoraLayer) and "default" in module.lora_A:
                plain = "backbone." + name.removeprefix("base_model.model.")
                tensors[f"{plain}.lora_A"] = module.lora_A["default"].weight
                tensors[f"{plain}.lora_B"] = module.lora_B["default"].weight
                scales[plain] = float(module.scaling["default"])
        tensors["separator"] = self.separator
        if isinstance(self.model.projection, nn.Linear):
            tensors["projection.weight"] = self.model.projection.weight
        return {**tensors, "__scales__": scales}

    def merged(self):
        """The plain `ContextEmbedModel`: LoRA merged into the backbone, the separator written into its row."""
        inner = self.model
        self._hook.remove()
        inner.backbone = inner.backbone.merge_and_unload()
        with torch.no_grad():
            inner.get_input_embeddings().weight[self.separator_id] = self.separator
        inner.config.matryoshka_dims = self.dims if len(self.dims) > 1 else None
        for parameter in inner.parameters():
            parameter.requires_grad_(True)
        return inner.eval()


class BatchCollator:
    """Turns one planned batch (document indices) into model inputs and teacher targets.

    One chunking strategy is drawn per batch; each document contributes one of its queries. Randomness comes
    from the batch's own seed, so a resumed run sees the same batches.
    """

    def __init__(self, documents: list[TrainingDocument], processor, config: TrainConfig):
        self.documents, self.processor, self.config = documents, processor, config
        names = [n for n in CHUNKINGS if config.chunking_weights.get(n, 0) > 0]
        self.chunkings, self.weights = names, [config.chunking_weights[n] for n in names]

    def __call__(self, items: list[dict]) -> dict:
        (item,) = items
        rng = random.Random(item["seed"])
        chunking = rng.choices(self.chunkings, self.weights)[0]
        window = rng.choice(TOKEN_WINDOW_SIZES)
        docs = [self.documents[i] for i in item["documents"]]
        chunk_lists = [chunk_document(d, chunking, self.processor.tokenizer, window) for d in docs]
        queries = [rng.choice(d.queries) for d in docs]
        documents = self.processor([[c.text for c in chunks] for chunks in chunk_lists], task="document")
        query_inputs = self.processor([q.text for q in queries], task="query")
        num_chunks = documents["attention_mask"].shape[1]
        relevance = torch.stack([
            self._relevance(d, q, chunks, num_chunks) for d, q, chunks in zip(docs, queries, chunk_lists)])
        batch = {"documents": dict(documents), "queries": dict(query_inputs),
                 "positives": torch.arange(len(docs)), "relevance": relevance}
        if self.config.keep_weight > 0:
            batch["plain"] = dict(self.processor([[_opening(d, self.config.keep_chars)] for d in docs],
                                                 task="document"))
        return batch

    def _relevance(self, document, query, chunks, num_chunks) -> torch.Tensor:
        labels = np.array(word_labels(document.text, query, self.config.evidence_weight)).reshape(-1, 3)
        starts = np.array([c.start for c in chunks])
        ends = np.array([c.end for c in chunks])
        # Chunks are in document order: a word belongs to the last chunk starting at or before it, if it fits.
        owner = np.searchsorted(starts, labels[:, 0], side="right") - 1
        inside = (owner >= 0) & (labels[:, 1] <= ends[owner.clip(min=0)])
        owner = np.where(inside, owner, -1)
        return chunk_relevance(torch.tensor(labels[:, 2], dtype=torch.float32), torch.from_numpy(owner),
                               num_chunks, self.config.top_n)


class PlannedBatches(torch.utils.data.Dataset):
    """Step i's batch: document indices of one family, and a seed for its chunking and queries."""

    def __init__(self, documents: list[TrainingDocument], config: TrainConfig):
        sources = {d.source for d in documents}
        unknown = sorted(set(config.source_repeats) - sources)
        if unknown:
            raise ValueError(f"source_repeats names sources {unknown} that no training document has "
                             f"(sources: {sorted(sources)})")
        repeated = {source: [i for i, d in enumerate(documents) if d.source == source]
                    for source in config.source_repeats}
        self.batches: list[list[int]] = []
        epoch = 0
        while len(self.batches) < config.max_steps:
            seed = config.seed * 1000 + epoch
            batches = family_batches(documents, config.batch_size, seed=seed)
            for source, members in repeated.items():  # extra passes over one source, reshuffled
                subset = [documents[i] for i in members]
                for k in range(1, config.source_repeats[source]):
                    batches += [[members[j] for j in b] for b in family_batches(subset, config.batch_size, seed + k)]
            random.Random(seed).shuffle(batches)
            self.batches += batches
            epoch += 1
        self.seed = config.seed

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict:
        return {"documents": self.batches[index], "seed": self.seed * 1_000_003 + index}


def train(checkpoint: str | Path, data: str | Path, output_dir: str | Path, config: TrainConfig,
          resume: bool = False) -> Path:
    """Train, soup and save. Returns the folder of the trained checkpoint (`output_dir/checkpoint`)."""
    from contextembed.checkpoint import save_checkpoint
    from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor

    config.validate()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "train_config.json").write_text(json.dumps(asdict(config), indent=2) + "\n", encoding="utf-8")
    torch.manual_seed(config.seed)
    base = ContextEmbedModel.from_pretrained(checkpoint, dtype=torch.float32)
    if config.qat_fraction > 0 and base.config.int8_scheme != "unit":
        raise ValueError(f"int8 QAT trains the unit-vector int8 scheme, and {checkpoint} codes with "
                         f"int8_scheme={base.config.int8_scheme!r}: set qat_fraction to 0")
    documents = read_documents(data)
    processor = ContextEmbedProcessor.from_pretrained(checkpoint)
    documents = _fit_length(documents, processor, config.max_document_tokens)
    model = ContextTrainingModel(base, config)
    logger.info("training %d parameters (LoRA rank %d, separator row%s)",
                sum(p.numel() for p in model.parameters() if p.requires_grad), config.lora_rank,
                ", projection" if any(p.requires_grad for p in base.projection.parameters()) else "")

    class Schedule(TrainerCallback):
        def __init__(self):
            self.start = time.monotonic()

        def on_step_begin(self, args, state, control, **kwargs):
            model.quantize = state.global_step >= (1 - config.qat_fraction) * config.max_steps

        def on_step_end(self, args, state, control, **kwargs):
            if config.max_minutes is not None and time.monotonic() - self.start > 60 * config.max_minutes:
                logger.warning("time budget of %.1f minutes reached at step %d", config.max_minutes,
                               state.global_step)
                control.should_training_stop = control.should_save = True

    args = TrainingArguments(
        output_dir=str(output_dir / "checkpoints"), max_steps=config.max_steps, per_device_train_batch_size=1,
        learning_rate=config.learning_rate, weight_decay=config.weight_decay, warmup_steps=config.warmup_ratio,
        lr_scheduler_type="warmup_stable_decay",
        lr_scheduler_kwargs={"num_decay_steps": int(config.decay_ratio * config.max_steps)},
        bf16=config.bf16, use_cpu=not torch.cuda.is_available(), logging_steps=config.logging_steps,
        save_steps=config.save_steps, save_total_limit=config.soup_size, seed=config.seed,
        dataloader_num_workers=0, remove_unused_columns=False, report_to="none", disable_tqdm=False)
    trainer = LossPartsTrainer(model=model, args=args, train_dataset=PlannedBatches(documents, config),
                               data_collator=BatchCollator(documents, processor, config), callbacks=[Schedule()])
    last = _last_checkpoint(output_dir / "checkpoints") if resume else None
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    trainer.save_model(str(output_dir / "checkpoints" / f"checkpoint-{trainer.state.global_step}"))
    with open(output_dir / "train_log.jsonl", "w", encoding="utf-8") as f:
        for entry in trainer.state.log_history:
            f.write(json.dumps(entry) + "\n")

    model.load_state_dict(_soup(output_dir / "checkpoints", config.soup_size, model), strict=False)
    delta = model.delta()
    merged = model.merged()
    save_delta(output_dir / "delta.safetensors", delta, merged.config,
               extra={"steps": trainer.state.global_step, "seed": config.seed})
    return save_checkpoint(merged, processor, output_dir / "checkpoint")


class LossPartsTrainer(Trainer):
    """`Trainer` that logs the loss parts (L_doc, L_dist, L_keep when on) beside the total loss."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        parts = getattr(self, "_parts", {})
        for name in ("l_doc", "l_dist", "l_keep"):
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


def _opening(document: TrainingDocument, max_chars: int) -> str:
    """The document's first sentences, up to `max_chars` characters (at least its first sentence)."""
    end = document.sentences[0][1]
    for _, sentence_end in document.sentences[1:]:
        if sentence_end > max_chars:
            break
        end = sentence_end
    return document.text[:end]


def _fit_length(documents, processor, max_tokens: int) -> list[TrainingDocument]:
    """Drop documents longer than `max_tokens` (sentence chunking), with a log line saying how many."""
    lengths = [len(r["input_ids"]) for r in processor.tokenize_documents(
        [[d.text[s:e] for s, e in d.sentences] for d in documents], task="document")]
    kept = [d for d, n in zip(documents, lengths) if n <= max_tokens]
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
