"""The training losses against hand-computed cases: a batch of 2 documents with 3 chunk slots each."""

from __future__ import annotations

import math
import random
import re

import pytest
import torch

from contextembed.training.data import (
    TRAINING_CHUNKERS,
    TrainingDocument,
    TrainingQuery,
    chunk_document,
    word_labels,
)
from contextembed.training.losses import (
    chunk_relevance,
    chunk_scores,
    distillation_loss,
    document_loss,
    fake_quantize_int8,
    within_document_loss,
)

QUERIES = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # (Q=2, D=2)
CHUNKS = torch.tensor([[[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]],  # document 0: three chunks
                       [[0.8, 0.6], [0.0, -1.0], [0.0, 0.0]]])  # document 1: two chunks and a padding slot
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
POSITIVES = torch.tensor([0, 1])


def test_document_loss_by_hand():
    scores = chunk_scores(QUERIES, CHUNKS, MASK)
    # query 0: best chunk of doc 0 is 1.0, of doc 1 is 0.8; query 1: 1.0 and 0.6; tau = 0.5
    expected = (-math.log(math.exp(2.0) / (math.exp(2.0) + math.exp(1.6)))
                - math.log(math.exp(1.2) / (math.exp(2.0) + math.exp(1.2)))) / 2
    assert document_loss(scores, POSITIVES, 0.5).item() == pytest.approx(expected, abs=1e-6)


def test_distillation_loss_by_hand():
    scores = chunk_scores(QUERIES, CHUNKS, MASK)
    relevance = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, float("-inf")]])  # the positive document's chunks
    total = 0.0
    for q in range(2):
        flat = [float(s) for s in scores[q].flatten() if s > float("-inf")]
        log_z = math.log(sum(math.exp(s) for s in flat))
        own = [float(s) for s in scores[q, POSITIVES[q]] if s > float("-inf")]
        r = [float(x) for x in relevance[q] if x > float("-inf")]
        z_t = sum(math.exp(x / 0.5) for x in r)
        total += sum(math.exp(x / 0.5) / z_t * (math.log(math.exp(x / 0.5) / z_t) - (s - log_z)) for x, s in zip(r, own))
    assert distillation_loss(scores, POSITIVES, relevance, 1.0, 0.5).item() == pytest.approx(total / 2, abs=1e-6)


def test_distillation_is_zero_when_the_student_matches_the_teacher():
    # One document in the batch, so the student's softmax runs over the positive's chunks alone.
    scores = torch.tensor([[[0.3, -0.2, 0.9]]])
    assert distillation_loss(scores, torch.tensor([0]), scores[:, 0] * 2.0, 0.5, 1.0).item() == pytest.approx(0.0,
                                                                                                             abs=1e-7)
    assert distillation_loss(scores, torch.tensor([0]), scores[:, 0], 0.5, 1.0).item() > 0.01


def test_within_document_loss_by_hand():
    scores = chunk_scores(QUERIES, CHUNKS, MASK)
    relevance = torch.tensor([[1.0, 0.75, 0.0], [0.0, 1.0, float("-inf")]])
    total = 0.0
    for q in range(2):
        own = [float(s) for s in scores[q, POSITIVES[q]] if s > float("-inf")]  # the positive's chunks only
        log_z = math.log(sum(math.exp(s / 0.5) for s in own))
        r = [float(x) for x in relevance[q] if x > float("-inf")]
        z_t = sum(math.exp(x / 0.2) for x in r)
        total += sum(math.exp(x / 0.2) / z_t * (math.log(math.exp(x / 0.2) / z_t) - (s / 0.5 - log_z))
                     for x, s in zip(r, own))
    assert within_document_loss(scores, POSITIVES, relevance, 0.5, 0.2).item() == pytest.approx(total / 2, abs=1e-6)


def test_within_document_loss_ignores_other_documents():
    """Other documents' chunks get no gradient and cannot change the term; L_dist, over the whole batch, does
    push them down: the difference this term exists for."""
    scores = chunk_scores(QUERIES, CHUNKS, MASK).requires_grad_(True)
    relevance = torch.tensor([[1.0, 0.75, 0.0], [0.0, 1.0, float("-inf")]])
    within_document_loss(scores, POSITIVES, relevance, 0.5, 0.2).backward()
    assert torch.all(scores.grad[0, 1] == 0) and torch.all(scores.grad[1, 0] == 0)
    assert torch.any(scores.grad[0, 0] != 0)
    shifted = scores.detach().clone()
    shifted[0, 1] += 5.0  # another document's chunks score far higher for query 0
    assert within_document_loss(shifted, POSITIVES, relevance, 0.5, 0.2).item() == pytest.approx(
        within_document_loss(scores.detach(), POSITIVES, relevance, 0.5, 0.2).item(), abs=1e-6)
    assert distillation_loss(shifted, POSITIVES, relevance, 0.5, 0.2) > distillation_loss(
        scores.detach(), POSITIVES, relevance, 0.5, 0.2)


def test_within_document_loss_without_other_chunks_is_zero_not_nan():
    """A document that is its answer and padding has nothing to order: the term is 0 and adds no NaN gradient."""
    scores = torch.tensor([[[2.0, float("-inf")]]], requires_grad=True)
    relevance = torch.tensor([[1.0, float("-inf")]])
    loss = within_document_loss(scores, torch.tensor([0]), relevance, 0.5, 0.2)
    assert loss.item() == 0.0
    (loss + scores[0, 0, 0]).backward()
    assert torch.isfinite(scores.grad).all()


def test_chunk_relevance_is_the_mean_of_the_top_n_token_scores():
    scores = torch.tensor([1.0, 0.5, 0.0, 0.0, 0.5, 0.5, 0.5])
    owners = torch.tensor([0, 0, 0, 0, 1, 1, -1])
    assert chunk_relevance(scores, owners, 3, top_n=2).tolist() == [0.75, 0.5, float("-inf")]


def test_quantisation_matches_the_int8_codes_and_passes_gradients_straight():
    from contextembed.quantization import int8_scale, quantize

    x = torch.nn.functional.normalize(torch.randn(4, 64), dim=-1).requires_grad_()
    y = fake_quantize_int8(x, 5.0)
    codes = quantize(x.detach().numpy(), "int8", 5.0)
    assert torch.allclose(y.detach(), torch.from_numpy(codes).float() / int8_scale(64, 5.0))
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def test_gold_labels_follow_any_chunking(built):
    text = "Recipe: Soup. Boil water. Serve hot."
    document = TrainingDocument("d", "s", "f", text, [(0, 13), (14, 25), (26, 36)], [(0, 36)],
                                [TrainingQuery("q", answer=[(26, 36)], evidence=[(0, 13)])])
    labels = word_labels(text, document.queries[0])
    assert [score for *_, score in labels] == [0.5, 0.5, 0.0, 0.0, 1.0, 1.0]
    tokenizer = built["bert"][2].tokenizer
    for chunking in TRAINING_CHUNKERS:
        chunks = chunk_document(document, chunking, tokenizer, window=4, rng=random.Random(0))
        assert all(text[c.start : c.end] == c.text for c in chunks)


def words(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character spans of the words of text[start:end], as offsets into `text`."""
    return [(start + m.start(), start + m.end()) for m in re.finditer(r"\S+", text[start:end])]


@pytest.mark.parametrize("seed", range(5))
def test_fragments_split_sentences_without_losing_a_word(seed):
    text = "10. Late payment is charged at five percent. The tenant pays for water and power. Pets: no. Rent is due."
    sentences = [(m.start(), m.end()) for m in re.finditer(r"[^.]+\.", text)]
    sentences = [(s + len(text[s:e]) - len(text[s:e].lstrip()), e) for s, e in sentences]
    document = TrainingDocument("d", "s", "f", text, sentences, [], [TrainingQuery("q", answer=[sentences[1]])])
    chunks = chunk_document(document, "fragments", rng=random.Random(seed))
    assert sorted(w for c in chunks for w in words(text, c.start, c.end)) == words(text)  # every word, once
    assert all(any(s <= c.start and c.end <= e for s, e in sentences) for c in chunks)  # never across sentences
    assert len(chunks) >= len(sentences)
    again = chunk_document(document, "fragments", rng=random.Random(seed))
    assert [c.text for c in again] == [c.text for c in chunks]  # the batch's own seed decides


