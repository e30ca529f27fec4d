"""The training objective of SPEC §2, as pure functions on score tensors.

- L_doc: InfoNCE over documents, a document scored by its best chunk, s(q, d) = max_c q·c, the other
  documents of the batch as negatives.
- L_dist: forward KL from a teacher's chunk distribution to the student's. The teacher's chunk relevance
  r_j is the mean of the top-n token scores inside chunk j; p_T = softmax(r / τ_T) over the positive
  document's chunks (zero elsewhere); p_S = softmax(q·c / τ) over every chunk of every document in the batch.
- L_within (optional): the same teacher at a softer τ_T against the student's softmax over the positive
  document's chunks alone, so the supporting context keeps its place inside its document.
- Redundant answers (optional): where a query has several answer spans (an ingredient list, a section's
  paragraphs), one of them (the student's best) keeps the top; the others are lowered below the evidence in both
  teacher targets.
- L_mix (optional): the one-pass student pulled onto a teacher's two-pass vectors, each chunk's contextual vector
  mixed with its vector encoded alone (`encode_documents(..., local_mix=w)`), so one pass learns what the second
  pass adds.
- int8 quantisation-aware training: the deterministic int8 scheme of the checkpoint, with a straight-through
  gradient.

Shapes: Q queries, B documents, C chunks per document (padded), D dimensions.
"""

from __future__ import annotations

import torch

from contextembed.quantization import int8_scale


def chunk_scores(queries: torch.Tensor, chunks: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
    """q·c for every query and every chunk of every document, -inf on padding chunks: (Q, B, C).

    >>> q = torch.tensor([[1.0, 0.0]])
    >>> c = torch.tensor([[[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]])
    >>> chunk_scores(q, c, torch.tensor([[1, 1], [1, 0]])).tolist()
    [[[0.5, 1.0], [0.0, -inf]]]
    """
    scores = torch.einsum("qd,bcd->qbc", queries, chunks)
    return scores.masked_fill(chunk_mask[None] == 0, float("-inf"))


def document_loss(scores: torch.Tensor, positives: torch.Tensor, temperature: torch.Tensor | float) -> torch.Tensor:
    """L_doc: cross-entropy of each query's positive document among the batch, documents scored by MaxSim.

    Args:
        scores: (Q, B, C) from `chunk_scores`.
        positives: (Q,) index of each query's document.
        temperature: τ (a float, or a learnable scalar tensor).

    >>> s = torch.tensor([[[0.9, 0.1], [0.2, float("-inf")]]])     # one query, two documents
    >>> round(document_loss(s, torch.tensor([0]), 1.0).item(), 4)    # -log(e^0.9 / (e^0.9 + e^0.2))
    0.4032
    """
    document_scores = scores.max(dim=-1).values  # (Q, B)
    return torch.nn.functional.cross_entropy(document_scores / temperature, positives)


def chunk_relevance(token_scores: torch.Tensor, token_chunks: torch.Tensor, num_chunks: int, top_n: int = 8
                    ) -> torch.Tensor:
    """Teacher chunk relevance: the mean of the top-n token scores inside each chunk: (T,) -> (C,).

    A chunk with fewer than `top_n` tokens averages all of them; a chunk with no token gets -inf (never a
    target). Tokens with chunk -1 belong to no chunk.

    >>> scores = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.0, 0.0])
    >>> chunk_relevance(scores, torch.tensor([0, 0, 1, 1, 1, -1]), num_chunks=3, top_n=2).tolist()
    [0.5, 0.5, -inf]
    """
    relevance = torch.full((num_chunks,), float("-inf"))
    for chunk in range(num_chunks):
        inside = token_scores[token_chunks == chunk]
        if len(inside):
            relevance[chunk] = inside.topk(min(top_n, len(inside))).values.mean()
    return relevance


def distillation_loss(scores: torch.Tensor, positives: torch.Tensor, relevance: torch.Tensor,
                      temperature: torch.Tensor | float, teacher_temperature: float) -> torch.Tensor:
    """L_dist = KL(p_T ‖ p_S), averaged over queries.

    Args:
        scores: (Q, B, C) from `chunk_scores`.
        positives: (Q,) index of each query's document.
        relevance: (Q, C) teacher relevance of the positive document's chunks (-inf for padding / empty).
        temperature: τ of the student distribution, over all B·C chunks of the batch.
        teacher_temperature: τ_T of the teacher distribution, over the positive document's chunks.

    >>> s = torch.tensor([[[2.0, 0.0], [1.0, float("-inf")]]])
    >>> r = torch.tensor([[2.0, 0.0]])
    >>> p_s = torch.softmax(torch.tensor([2.0, 0.0, 1.0]), 0)          # the student over all three chunks
    >>> p_t = torch.softmax(torch.tensor([2.0, 0.0]), 0)               # the teacher over the positive's two
    >>> expected = (p_t * (p_t.log() - p_s[:2].log())).sum()
    >>> bool(torch.isclose(distillation_loss(s, torch.tensor([0]), r, 1.0, 1.0), expected))
    True
    """
    n_queries, n_docs, n_chunks = scores.shape
    student = torch.log_softmax((scores / temperature).reshape(n_queries, -1), dim=-1)  # (Q, B*C)
    positive_student = student.reshape(n_queries, n_docs, n_chunks)[torch.arange(n_queries), positives]  # (Q, C)
    return _teacher_kl(relevance, teacher_temperature, positive_student)


def within_document_loss(scores: torch.Tensor, positives: torch.Tensor, relevance: torch.Tensor,
                          temperature: torch.Tensor | float, teacher_temperature: float) -> torch.Tensor:
    """L_within = KL(p_T ‖ p_S), with the student's softmax over the positive document's own chunks only.

    L_dist's student distribution spans every chunk of the batch, so at a sharp τ_T its gradient pushes down the
    chunks that compete most with the answer: the supporting context, first of all. This term orders the positive
    document's chunks among themselves (answer, then evidence, then the rest) at its own, softer τ_T, and says
    nothing about other documents: a shift of all of one document's scores leaves it unchanged.

    Args: as `distillation_loss`.

    >>> s = torch.tensor([[[2.0, 0.0], [5.0, float("-inf")]]])        # the other document's 5.0 plays no part
    >>> r = torch.tensor([[2.0, 0.0]])
    >>> p_s = torch.softmax(torch.tensor([2.0, 0.0]), 0)
    >>> p_t = torch.softmax(torch.tensor([1.0, 0.0]), 0)               # τ_T = 2
    >>> expected = (p_t * (p_t.log() - p_s.log())).sum()
    >>> bool(torch.isclose(within_document_loss(s, torch.tensor([0]), r, 1.0, 2.0), expected))
    True
    >>> float(within_document_loss(s + 3.0, torch.tensor([0]), r, 1.0, 2.0)) == float(within_document_loss(
    ...     s, torch.tensor([0]), r, 1.0, 2.0))
    True
    """
    positive = scores[torch.arange(scores.shape[0]), positives]  # (Q, C), -inf on padding
    return _teacher_kl(relevance, teacher_temperature, torch.log_softmax(positive / temperature, dim=-1))


def _teacher_kl(relevance: torch.Tensor, teacher_temperature: float, student: torch.Tensor) -> torch.Tensor:
    """KL(softmax(relevance / τ_T) ‖ p_S) over the positive's chunks, averaged over queries; `student` is log p_S
    there, (Q, C). Chunks with relevance -inf have teacher mass exactly 0 and add nothing, whatever the student."""
    teacher = torch.softmax(relevance / teacher_temperature, dim=-1)
    terms = teacher * (torch.log(teacher.clamp(min=1e-12)) - student)
    return terms.where(teacher > 0, torch.zeros_like(terms)).sum(-1).mean()


def keep_loss(scores: torch.Tensor, base_scores: torch.Tensor, temperature: torch.Tensor | float) -> torch.Tensor:
    """L_keep = KL(p_base ‖ p), averaged over queries: the untrained model's ranking of whole documents, kept.

    Both score matrices are (Q, B): each query against every document of the batch encoded whole as one chunk
    (plain retrieval, no context to learn), by the model in training and by the same model with its adapters
    switched off. It holds ordinary retrieval where the contextual losses have nothing to say.

    >>> base = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    >>> abs(float(keep_loss(base, base, 0.05))) < 1e-9
    True
    >>> bool(keep_loss(base.flip(-1), base, 0.05) > 1.0)
    True
    """
    target = torch.softmax(base_scores / temperature, dim=-1)
    student = torch.log_softmax(scores / temperature, dim=-1)
    return (target * (torch.log(target.clamp(min=1e-12)) - student)).sum(-1).mean()


def mixed_targets(contextual: torch.Tensor, alone: torch.Tensor, weight: float) -> torch.Tensor:
    """Unit vectors of `(1 - w) · contextual + w · alone` over the last axis, both sides normalised first: what
    `encode_documents(..., local_mix=w)` returns for these chunks (a zero row stays zero).

    >>> [round(x, 4) for x in mixed_targets(torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 3.0]]), 0.5)[0].tolist()]
    [0.7071, 0.7071]
    >>> same = torch.tensor([[0.6, 0.8], [0.0, 0.0]])
    >>> torch.allclose(mixed_targets(same, same, 0.1), same)
    True
    """
    unit = torch.nn.functional.normalize
    return unit((1 - weight) * unit(contextual, dim=-1) + weight * unit(alone, dim=-1), dim=-1)


def cosine_distance_loss(vectors: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
                         ) -> torch.Tensor:
    """The mean of 1 - cos(v, t) over the rows (the last axis is the vector) where `mask` is true.

    >>> v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]])
    >>> t = torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    >>> float(cosine_distance_loss(v, t, torch.tensor([True, True, False])))
    0.5
    """
    distance = 1 - torch.nn.functional.cosine_similarity(vectors, targets.to(vectors.dtype), dim=-1)
    if mask is not None:
        distance = distance[mask.bool()]
    return distance.mean()


def fake_quantize_int8(vectors: torch.Tensor, clip_sigmas: float) -> torch.Tensor:
    """The checkpoint's int8 scheme applied in float, with a straight-through gradient (identity backward).

    >>> x = torch.tensor([[0.5, -0.5, 0.5, -0.5]], requires_grad=True)
    >>> y = fake_quantize_int8(x, clip_sigmas=2.0)
    >>> [round(v, 4) for v in y[0].tolist()], bool(torch.equal(torch.autograd.grad(y.sum(), x)[0], torch.ones(1, 4)))
    ([0.5039, -0.5039, 0.5039, -0.5039], True)
    """
    scale = int8_scale(vectors.shape[-1], clip_sigmas)
    quantized = torch.clamp(torch.round(vectors * scale), -127, 127) / scale
    return vectors + (quantized - vectors).detach()
