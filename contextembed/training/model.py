"""The model being trained: the checkpoint's model with LoRA adapters, a trainable separator row and the loss
(`doc_weight · L_doc + dist_weight · L_dist` over the Matryoshka dims, `within_weight · L_within`,
`keep_weight · L_keep` and `mix_weight · L_mix` when on, int8 QAT when on) in its forward, so transformers'
`Trainer` runs it as it is.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager

import torch
from torch import nn

try:
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import LoraLayer
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("training needs peft and accelerate: pip install 'contextembed[train]'") from error

from contextembed.batching import token_budget_batches
from contextembed.delta import read_delta
from contextembed.encoder import default_max_tokens_per_batch
from contextembed.modeling import cut_and_normalize, window_length
from contextembed.training.config import TrainConfig
from contextembed.training.losses import (
    chunk_scores,
    cosine_distance_loss,
    distillation_loss,
    document_loss,
    fake_quantize_int8,
    keep_loss,
    mixed_targets,
    within_document_loss,
)


class ContextTrainingModel(nn.Module):
    """The checkpoint's model with LoRA adapters, a trainable separator row and the loss in its forward.

    `teacher` (a frozen `ContextEmbedModel`, needed when `mix_weight > 0`) gives L_mix's targets; it is kept out of
    the module's parameters and state, so checkpoints, soups and deltas hold the trained model alone.
    """

    def __init__(self, model, config: TrainConfig, teacher=None):
        super().__init__()
        if config.losses.mix_weight > 0 and teacher is None:
            raise ValueError("mix_weight > 0 needs the teacher model whose two-pass vectors L_mix follows")
        self._teacher = (teacher.eval().requires_grad_(False),) if teacher is not None else ()
        self.config = config
        self.dims = sorted(set(config.losses.matryoshka_dims or model.config.matryoshka_dims) | {model.config.embedding_dim})
        bad = [d for d in self.dims if d > model.config.embedding_dim]
        if bad:
            raise ValueError(f"matryoshka_dims {bad} exceed the checkpoint's {model.config.embedding_dim} dimensions")
        for module in model.modules():  # dropout's random numbers cost more than they help here
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        model.backbone = get_peft_model(model.backbone, LoraConfig(
            r=config.adapters.lora_rank, lora_alpha=config.adapters.lora_alpha, lora_dropout=0.0, target_modules="all-linear"))
        for parameter in model.projection.parameters():
            parameter.requires_grad_(True)
        self.model = model
        embeddings = model.get_input_embeddings()
        self.separator_id = model.config.chunk_token_id
        self.separator = nn.Parameter(embeddings.weight[self.separator_id].detach().clone())
        self._hook = embeddings.register_forward_hook(self._use_trained_separator)
        # A fixed temperature, kept as a (frozen) parameter so that checkpoints and soups carry it.
        self.log_inverse_temperature = nn.Parameter(torch.tensor(-math.log(config.losses.temperature)),
                                                    requires_grad=False)
        self.quantize = False  # switched on for the last qat_fraction of the steps
        self._base_pass = False  # True while the untrained model (adapters off, separator row as built) runs
        # L_keep's reference projects with the projection as built (only kept when L_keep is on).
        self.base_projection = copy.deepcopy(model.projection).requires_grad_(False) if config.losses.keep_weight else None

    @torch.no_grad()
    def start_from_delta(self, path) -> None:
        """Set the adapters, the separator row and any projection to a delta's (a trained model, continued): the
        model then computes what `apply_delta` on the same checkpoint gives. Its modules, rank and scales must be
        this run's."""
        tensors, scales, _ = read_delta(path, self.separator_id)
        adapted = {}
        for name, module in self.model.backbone.named_modules():
            if isinstance(module, LoraLayer) and "default" in module.lora_A:
                adapted["backbone." + name.removeprefix("base_model.model.")] = module
        if set(adapted) != set(scales):
            raise ValueError(f"{str(path)!r} adapts other layers than this run: "
                             f"{sorted(set(adapted) ^ set(scales))[:4]}")
        for name, module in adapted.items():
            a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
            if (tensors[f"{name}.lora_A"].shape != a.shape or tensors[f"{name}.lora_B"].shape != b.shape
                    or not math.isclose(scales[name], module.scaling["default"])):
                raise ValueError(f"{str(path)!r} has LoRA rank {tensors[f'{name}.lora_A'].shape[0]} and scale "
                                 f"{scales[name]} at {name}; this run has rank {a.shape[0]} and scale "
                                 f"{module.scaling['default']}: set lora_rank and lora_alpha to the delta's")
            a.copy_(tensors[f"{name}.lora_A"])
            b.copy_(tensors[f"{name}.lora_B"])
        if "separator" in tensors:
            self.separator.copy_(tensors["separator"])
        if "projection.weight" in tensors:
            self.model.projection.weight.copy_(tensors["projection.weight"])

    def _use_trained_separator(self, module, args, output):
        if self._base_pass:
            return output
        is_separator = (args[0] == self.separator_id).unsqueeze(-1)
        return torch.where(is_separator, self.separator.to(output.dtype), output)

    @property
    def temperature(self) -> torch.Tensor:
        return torch.exp(-self.log_inverse_temperature)

    def forward(self, documents: dict, queries: dict, positives: torch.Tensor, relevance: torch.Tensor,
                plain: dict | None = None, window_head_tokens: int | None = None, alone: dict | None = None) -> dict:
        with _window_head_tokens(self.model.config, window_head_tokens):  # this batch's window head
            chunks = chunk_vectors(self.model, documents)  # (B, C, D), raw
        query_vectors = self.model(**queries, normalize=False).chunk_embeddings[:, 0]  # (Q, D)
        chunk_mask = documents["attention_mask"]
        doc_losses, dist_losses, within_losses = [], [], []
        for dim in self.dims:
            c, q = cut_and_normalize(chunks, dim), cut_and_normalize(query_vectors, dim)
            if self.quantize:
                c = fake_quantize_int8(c, self.model.config.int8_clip_sigmas)
                q = fake_quantize_int8(q, self.model.config.int8_clip_sigmas)
            scores = chunk_scores(q, c, chunk_mask)  # (Q, B, C)
            doc_losses.append(document_loss(scores, positives, self.temperature))
            dist_losses.append(distillation_loss(scores, positives, relevance, self.temperature,
                                                 self.config.losses.teacher_temperature))
            if self.config.losses.within_weight > 0:
                within_losses.append(within_document_loss(scores, positives, relevance, self.temperature,
                                                          self.config.losses.within_teacher_temperature))
        l_doc, l_dist = torch.stack(doc_losses).mean(), torch.stack(dist_losses).mean()
        loss = self.config.losses.doc_weight * l_doc + self.config.losses.dist_weight * l_dist
        parts = {"l_doc": l_doc.detach(), "l_dist": l_dist.detach()}
        if within_losses:
            l_within = torch.stack(within_losses).mean()
            loss = loss + self.config.losses.within_weight * l_within
            parts["l_within"] = l_within.detach()
        if plain is not None:
            l_keep = self._keep(plain, query_vectors, queries)
            loss = loss + self.config.losses.keep_weight * l_keep
            parts["l_keep"] = l_keep.detach()
        if self.config.losses.mix_weight > 0:
            if alone is None:
                raise ValueError("mix_weight > 0: the batch must carry each chunk alone ('alone')")
            l_mix = self._mix(documents, queries, alone, chunks, query_vectors, chunk_mask, window_head_tokens)
            loss = loss + self.config.losses.mix_weight * l_mix
            parts["l_mix"] = l_mix.detach()
        return {"loss": loss, **parts}

    def _mix(self, documents: dict, queries: dict, alone: dict, chunks: torch.Tensor, query_vectors: torch.Tensor,
             chunk_mask: torch.Tensor, window_head_tokens: int | None) -> torch.Tensor:
        """L_mix: at every Matryoshka dim, each chunk's distance to the teacher's `local_mix` vector of it (what
        `encode_documents(..., local_mix=...)` returns, cut to that dim) plus each query's distance to the
        teacher's query vector."""
        (teacher,) = self._teacher
        real = chunk_mask.bool()
        with torch.no_grad():
            with _window_head_tokens(teacher.config, window_head_tokens):
                contextual = chunk_vectors(teacher, documents)  # (B, C, D)
            alone_rows = one_chunk_vectors(teacher, alone)  # (chunks, D), document order
            if len(alone_rows) != int(real.sum()):
                raise ValueError(f"the batch carries {len(alone_rows)} chunks alone for {int(real.sum())} chunks")
            by_itself = torch.zeros_like(contextual)
            by_itself[real] = alone_rows.to(by_itself.dtype)
            teacher_queries = teacher(**queries, normalize=False).chunk_embeddings[:, 0]
        losses = []
        for dim in self.dims:
            targets = mixed_targets(contextual[..., :dim].float(), by_itself[..., :dim].float(), self.config.losses.local_mix)
            losses.append(cosine_distance_loss(chunks[..., :dim].float(), targets, real)
                          + cosine_distance_loss(query_vectors[..., :dim].float(), teacher_queries[..., :dim].float()))
        return torch.stack(losses).mean()

    def _keep(self, plain: dict, query_vectors: torch.Tensor, queries: dict) -> torch.Tensor:
        full = self.model.config.embedding_dim
        whole = self.model(**plain, normalize=False).chunk_embeddings[:, 0]  # (B, D): one chunk per document
        scores = cut_and_normalize(query_vectors, full) @ cut_and_normalize(whole, full).T
        base_whole, base_queries = (chunks[:, 0] for chunks in self.base_chunks(plain, queries))
        base_scores = cut_and_normalize(base_queries, full) @ cut_and_normalize(base_whole, full).T
        return keep_loss(scores, base_scores, self.config.losses.teacher_temperature)

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
        inner.config.matryoshka_dims = self.dims
        for parameter in inner.parameters():
            parameter.requires_grad_(True)
        return inner.eval()


def chunk_vectors(model, inputs: dict, max_tokens: int | None = None) -> torch.Tensor:
    """The raw chunk vectors `(B, C, D)` of the documents in `inputs`, what `model(**inputs)` gives, with less padding.

    A batch whose rows all fit one window is one call to the model, padded to its longest row (so that the model
    can return its hidden states); training needs only the chunk vectors, so it runs such a batch in passes of
    similar lengths (`token_budget_batches`): a single call pads such a batch to its longest row. A batch with a longer
    row is one call: the model already runs its
    short rows and windows together by length. Padding is masked, so each chunk's vector is the same either way.
    """
    lengths = inputs["token_attention_mask"].sum(1).tolist()
    if not lengths or max(lengths) > window_length(model.config, inputs.get("max_seq_length")):
        return model(**inputs, normalize=False).chunk_embeddings
    return _by_length(model, inputs, lengths, max_tokens)


def one_chunk_vectors(model, inputs: dict, max_tokens: int | None = None) -> torch.Tensor:
    """The raw vector of each one-chunk document in `inputs`, `(N, D)` in their order, run in passes of similar
    lengths (`token_budget_batches`, as `encode_documents` runs them) instead of one pass padded to the longest.

    A training batch's chunks alone, padded in one pass, would be several times their tokens; padding is masked, so
    each row's vector is the same either way. `max_tokens`: padded tokens per pass (default: `encode_documents`' for the device).
    """
    return _by_length(model, inputs, inputs["token_attention_mask"].sum(1).tolist(), max_tokens)[:, 0]


def _by_length(model, inputs: dict, lengths: list[int], max_tokens: int | None) -> torch.Tensor:
    """The raw chunk vectors `(B, C, D)` of `inputs`, its rows run in the passes of `token_budget_batches` and put
    back in their order."""
    device = inputs["input_ids"].device
    passes = token_budget_batches(lengths, batch_size=len(lengths),
                                  max_tokens=max_tokens or default_max_tokens_per_batch(device))
    parts, window = [], inputs.get("max_seq_length")
    for rows in passes:
        index, width = torch.tensor(rows, device=device), max(lengths[i] for i in rows)
        parts.append(model(input_ids=inputs["input_ids"][index, :width],
                           token_attention_mask=inputs["token_attention_mask"][index, :width],
                           chunk_ids=inputs["chunk_ids"][index, :width], attention_mask=inputs["attention_mask"][index],
                           max_seq_length=window[index] if torch.is_tensor(window) and window.dim() else window,
                           normalize=False).chunk_embeddings)
    order = torch.tensor([i for rows in passes for i in rows], device=device)
    return torch.cat(parts)[torch.argsort(order)]


@contextmanager
def _window_head_tokens(config, window_head_tokens: int | None):
    """`config.window_head_tokens` set for the block (left as it is for `None`), then restored."""
    saved = config.window_head_tokens
    if window_head_tokens is not None:
        config.window_head_tokens = window_head_tokens
    try:
        yield
    finally:
        config.window_head_tokens = saved
