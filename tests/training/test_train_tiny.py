"""A seconds-long training run on a tiny random backbone: the loss falls and a contextual task goes from chance
to solved; the delta rebuilds the trained model from the starting one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import contextembed
from contextembed.delta import apply_delta
from contextembed.modeling import ContextEmbedModel
from contextembed.training import TrainConfig, train
from contextembed.training.data import TrainingDocument, TrainingQuery, write_documents

ENTITIES = ["one", "two", "three", "street", "company", "table", "apartment", "landlord"]
BODY = ["a date and a year", "the rent is monthly", "she is the tenant"]


def tiny_family() -> tuple[list[TrainingDocument], list[list[str]], list[str]]:
    """Eight documents whose only difference is the entity in their first sentence; the question about the rent
    names the entity, and the rent sentence is word for word the same in all of them."""
    documents, chunk_lists, queries = [], [], []
    for i, entity in enumerate(ENTITIES):
        sentences = [f"the lease of the {entity}", *BODY]
        text, spans = "", []
        for sentence in sentences:
            spans.append((len(text), len(text) + len(sentence)))
            text += sentence + " "
        query = f"rent of the {entity}"
        documents.append(TrainingDocument(f"tiny/{i}", "tiny", "tiny", text.strip(), spans, [spans[0], (spans[1][0], spans[-1][1])],
                                          [TrainingQuery(query, answer=[spans[2]], evidence=[spans[0]])]))
        chunk_lists.append(sentences)
        queries.append(query)
    return documents, chunk_lists, queries


def answer_at_1(encoder, chunk_lists, queries) -> float:
    """The share of queries whose best chunk in the whole corpus is their own document's rent sentence."""
    vectors = encoder.encode_documents(chunk_lists)
    rows = [(d, c) for d, v in enumerate(vectors) for c in range(len(v))]
    scores = encoder.encode_queries(queries) @ np.concatenate(vectors).T
    return float(np.mean([rows[int(np.argmax(s))] == (i, 2) for i, s in enumerate(scores)]))


@pytest.fixture(scope="module")
def trained(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    documents, chunk_lists, queries = tiny_family()
    write_documents(out / "data.jsonl", documents)
    # 200 steps: at 120 the task ended at 6/8 when this file ran after four other test files in one process (not
    # alone, not in the full suite; the cause was not found), which is not "solved".
    config = TrainConfig.from_dict(seed=0, max_steps=200, batch_size=8, learning_rate=2e-2, lora_rank=8, lora_alpha=8,
                         save_steps=50, soup_size=2, logging_steps=10, bf16=False, qat_fraction=0.25,
                         chunking_weights={"sentences": 1.0}, temperature=0.1, warmup_ratio=0.0)
    checkpoint = train(built["bert"][0], out / "data.jsonl", out / "run", config)
    return out, checkpoint, chunk_lists, queries


def test_the_loss_falls_and_the_contextual_task_is_solved(built, trained):
    out, checkpoint, chunk_lists, queries = trained
    log = [json.loads(line) for line in (out / "run" / "train_log.jsonl").read_text().splitlines()]
    losses = [entry["loss"] for entry in log if "loss" in entry]
    assert losses[-1] < 0.5 * losses[0]
    assert {"l_doc", "l_dist"} <= set(next(entry for entry in log if "loss" in entry))
    before = answer_at_1(contextembed.load(str(built["bert"][0])), chunk_lists, queries)
    after = answer_at_1(contextembed.load(str(checkpoint)), chunk_lists, queries)
    assert before <= 0.25  # chance among eight identical sentences, give or take
    assert after == 1.0


def test_the_delta_rebuilds_the_trained_model(built, trained):
    out, checkpoint, chunk_lists, _ = trained
    rebuilt = ContextEmbedModel.from_pretrained(built["bert"][0])
    apply_delta(rebuilt, out / "run" / "delta.safetensors")
    trained_model = ContextEmbedModel.from_pretrained(checkpoint)
    for (name, a), b in zip(rebuilt.state_dict().items(), trained_model.state_dict().values()):
        assert (a - b).abs().max() <= 1e-5, name
    assert (out / "run" / "delta.safetensors").stat().st_size < 0.5 * (checkpoint / "model.safetensors").stat().st_size


def test_bad_configs_name_the_field(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"max_step": 3}))
    with pytest.raises(ValueError, match=r"unknown training options .*\['max_step'\]"):
        TrainConfig.from_file(tmp_path / "run.json")
    with pytest.raises(ValueError, match="batch_size must be at least 2"):
        TrainConfig.from_file(None, batch_size=1)
    with pytest.raises(ValueError, match="chunking_weights must map some of"):
        TrainConfig.from_file(None, chunking_weights={"words": 1.0})


def test_documents_longer_than_the_window_train_through_the_windows(built):
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.batches import BatchCollator
    from contextembed.training.model import ContextTrainingModel

    model = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]),
                                 TrainConfig.from_dict(lora_rank=4, chunking_weights={"sentences": 1.0}))
    documents, _, _ = tiny_family()
    long = documents[0]
    sentences = [long.text] * 12  # ~100 tokens: the tiny model's window is 64
    text = " ".join(sentences)
    spans = [(i * (len(long.text) + 1), i * (len(long.text) + 1) + len(long.text)) for i in range(12)]
    documents[0] = TrainingDocument("long", "tiny", "tiny", text, spans, spans,
                                    [TrainingQuery("rent", answer=[spans[5]], evidence=[spans[0]])])
    collator = BatchCollator(documents, ContextEmbedProcessor.from_pretrained(built["bert"][0]), model.config)
    batch = collator([{"documents": [0, 1, 2], "seed": 0}])
    assert batch["documents"]["token_attention_mask"][0].sum() > 64  # this row runs in windows
    out = model(**batch)
    out["loss"].backward()
    # LoRA's B factors start at zero, so the gradient reaches the B factors first (the pooler is never used).
    grads = [p.grad for name, p in model.named_parameters() if "lora_B" in name and "pooler" not in name]
    assert all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    assert model.separator.grad is not None and model.separator.grad.abs().sum() > 0


def test_each_batch_carries_one_of_the_head_choices_into_later_windows(built):
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.batches import BatchCollator
    from contextembed.training.model import ContextTrainingModel

    config = TrainConfig.from_dict(lora_rank=4, chunking_weights={"sentences": 1.0}, window_head_choices=[0, 8])
    model = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config)
    documents, _, _ = tiny_family()
    long = documents[0]
    spans = [(i * (len(long.text) + 1), i * (len(long.text) + 1) + len(long.text)) for i in range(12)]
    documents[0] = TrainingDocument("long", "tiny", "tiny", " ".join([long.text] * 12), spans, spans,
                                    [TrainingQuery("rent", answer=[spans[9]], evidence=[spans[0]])])
    collator = BatchCollator(documents, ContextEmbedProcessor.from_pretrained(built["bert"][0]), config)
    assert {collator([{"documents": [0, 1, 2], "seed": s}])["window_head_tokens"] for s in range(12)} == {0, 8}
    batch = collator([{"documents": [0, 1, 2], "seed": 0}])
    before = model.model.config.window_head_tokens
    with torch.no_grad():
        losses = {head: model(**{**batch, "window_head_tokens": head})["loss"].item() for head in (0, 8)}
    assert losses[0] != losses[8]  # the long row's later windows see the carried opening or not
    assert model.model.config.window_head_tokens == before  # the checkpoint's own amount is left as it was


def test_a_run_resumes_from_its_last_checkpoint(built, tmp_path):
    documents, _, _ = tiny_family()
    write_documents(tmp_path / "data.jsonl", documents)
    options = dict(batch_size=8, learning_rate=1e-2, lora_rank=4, save_steps=10, soup_size=2, logging_steps=5,
                   bf16=False, chunking_weights={"sentences": 1.0})
    train(built["bert"][0], tmp_path / "data.jsonl", tmp_path / "run", TrainConfig.from_dict(max_steps=20, **options))
    train(built["bert"][0], tmp_path / "data.jsonl", tmp_path / "run", TrainConfig.from_dict(max_steps=30, **options),
          resume=True)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    steps = [entry["step"] for entry in log if "loss" in entry]
    assert steps[0] == 5 and steps[-1] == 30  # the resumed run's state carries the first run's log


def test_the_keep_loss_compares_with_the_starting_model(built):
    """L_keep's reference is the checkpoint as built, however far training has moved the adapters and the
    separator row; with L_keep on, the batch carries whole-document inputs and the loss part is reported."""
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.batches import BatchCollator
    from contextembed.training.model import ContextTrainingModel

    start = ContextEmbedModel.from_pretrained(built["bert"][0]).eval()
    config = TrainConfig.from_dict(lora_rank=4, keep_weight=0.5, chunking_weights={"sentences": 1.0})
    model = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config)
    with torch.no_grad():  # training has happened: adapters and separator row far from where they started
        for name, parameter in model.named_parameters():
            if "lora_B" in name or name == "separator":
                parameter.normal_()
    documents, _, _ = tiny_family()
    batch = BatchCollator(documents, ContextEmbedProcessor.from_pretrained(built["bert"][0]), config)(
        [{"documents": [0, 1, 2], "seed": 0}])
    assert batch["plain"]["attention_mask"].shape[1] == 1  # each document whole, as one chunk
    for inputs in (batch["documents"], batch["plain"]):
        with torch.no_grad():
            expected = start(**inputs, normalize=False).chunk_embeddings
            trained = model.model(**inputs, normalize=False).chunk_embeddings
        assert torch.allclose(model.base_chunks(inputs)[0], expected, atol=1e-5)
        assert not torch.allclose(trained, expected, atol=1e-2)
    out = model(**batch)
    assert out["l_keep"] > 0
    out["loss"].backward()
    assert model.separator.grad is not None


def test_the_within_document_term_is_added_and_reported(built):
    """With within_weight on, the loss is L_doc + L_dist + within_weight · L_within, the part logged beside them."""
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.batches import BatchCollator
    from contextembed.training.model import ContextTrainingModel

    documents, _, _ = tiny_family()
    outputs = {}
    for weight in (0.0, 2.0):
        config = TrainConfig.from_dict(lora_rank=4, within_weight=weight, chunking_weights={"sentences": 1.0})
        torch.manual_seed(0)
        model = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config)
        batch = BatchCollator(documents, ContextEmbedProcessor.from_pretrained(built["bert"][0]), config)(
            [{"documents": [0, 1, 2], "seed": 0}])
        with torch.no_grad():
            outputs[weight] = model(**batch)
    assert "l_within" not in outputs[0.0]
    with_term = outputs[2.0]
    assert with_term["l_within"] > 0
    assert with_term["loss"].item() == pytest.approx(
        (with_term["l_doc"] + with_term["l_dist"] + 2.0 * with_term["l_within"]).item(), rel=1e-5)
    assert with_term["l_doc"].item() == pytest.approx(outputs[0.0]["l_doc"].item(), rel=1e-5)


def test_source_repeats_add_passes_over_one_source():
    from contextembed.training.batches import PlannedBatches

    docs = [TrainingDocument(str(i), "long" if i < 4 else "short", "long" if i < 4 else "short", "x", [(0, 1)], [],
                             [TrainingQuery("q", [(0, 1)])]) for i in range(12)]
    plain = PlannedBatches(docs, TrainConfig.from_dict(max_steps=1, batch_size=4))  # one epoch each
    repeated = PlannedBatches(docs, TrainConfig.from_dict(max_steps=1, batch_size=4, source_repeats={"long": 3}))
    assert sorted(docs[b[0]].source for b in plain.batches) == ["long", "short", "short"]
    assert sorted(docs[b[0]].source for b in repeated.batches) == ["long"] * 3 + ["short"] * 2
    assert all(sorted(b) == [0, 1, 2, 3] for b in repeated.batches if docs[b[0]].source == "long")
    with pytest.raises(ValueError, match="source_repeats"):
        TrainConfig.from_dict(source_repeats={"long": 0}).validate()
    with pytest.raises(ValueError, match=r"source_repeats names sources \['wiki'\] that no training document has"):
        PlannedBatches(docs, TrainConfig.from_dict(max_steps=1, batch_size=4, source_repeats={"wiki": 2}))


def test_source_repeats_may_name_a_family_generator():
    from contextembed.training.batches import PlannedBatches

    docs = [TrainingDocument(str(i), "pydocs", f"{'people' if i < 4 else 'named'}/page/{i // 4}", "x", [(0, 1)], [],
                             [TrainingQuery("q", [(0, 1)])]) for i in range(12)]
    repeated = PlannedBatches(docs, TrainConfig.from_dict(max_steps=1, batch_size=4, source_repeats={"people": 3}))
    assert sorted(docs[b[0]].family for b in repeated.batches) == ["named/page/1", "named/page/2"] + ["people/page/0"] * 3
    with pytest.raises(ValueError, match=r"\['scoped'\] .* family generators: \['named', 'people'\]"):
        PlannedBatches(docs, TrainConfig.from_dict(max_steps=1, batch_size=4, source_repeats={"scoped": 2}))


def test_a_run_continues_from_a_delta(built, trained):
    """`init_delta` starts the adapters and the separator row where a delta left them: the training model then
    computes what `apply_delta` on the same checkpoint gives; a delta of another rank is refused by name."""
    from contextembed.training.model import ContextTrainingModel

    out, _, _, _ = trained
    delta = out / "run" / "delta.safetensors"
    documents, chunk_lists, _ = tiny_family()
    merged = ContextEmbedModel.from_pretrained(built["bert"][0]).eval()
    apply_delta(merged, delta)
    inputs = contextembed.load(str(built["bert"][0])).processor(chunk_lists, task="document")
    config = TrainConfig.from_dict(lora_rank=8, lora_alpha=8, init_delta=str(delta), chunking_weights={"sentences": 1.0})
    fresh = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config).eval()
    continued = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config).eval()
    continued.start_from_delta(delta)
    with torch.no_grad():
        expected = merged(**inputs, normalize=False).chunk_embeddings
        assert torch.allclose(continued.model(**inputs, normalize=False).chunk_embeddings, expected, atol=1e-5)
        assert not torch.allclose(fresh.model(**inputs, normalize=False).chunk_embeddings, expected, atol=1e-3)
    other_rank = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]),
                                      TrainConfig.from_dict(lora_rank=4, lora_alpha=8, chunking_weights={"sentences": 1.0}))
    with pytest.raises(ValueError, match="has LoRA rank 8 and scale 1.0 .* this run has rank 4"):
        other_rank.start_from_delta(delta)
    with pytest.raises(ValueError, match="init_delta must be the path of a delta file"):
        TrainConfig.from_dict(init_delta="").validate()


def test_the_mix_term_follows_encode_documents_with_local_mix(built):
    """L_mix's targets are what `encode_documents(..., local_mix=w)` returns: with the student still equal to its
    teacher (fresh adapters), L_mix is the mean distance of each contextual chunk vector to that two-pass vector
    plus nothing for the queries, and it is zero at w = 0."""
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.batches import BatchCollator
    from contextembed.training.model import ContextTrainingModel

    documents, chunk_lists, queries = tiny_family()
    encoder = contextembed.load(str(built["bert"][0]))
    picked = [0, 1, 2]
    losses = {}
    for w in (0.0, 0.5):
        config = TrainConfig.from_dict(lora_rank=4, mix_weight=2.0, local_mix=w, chunking_weights={"sentences": 1.0},
                             matryoshka_dims=[16])
        teacher = ContextEmbedModel.from_pretrained(built["bert"][0])
        model = ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config, teacher=teacher)
        batch = BatchCollator(documents, ContextEmbedProcessor.from_pretrained(built["bert"][0]), config)(
            [{"documents": picked, "seed": 0}])
        assert batch["alone"]["attention_mask"].shape == (4 * len(picked), 1)  # each sentence, by itself
        losses[w] = model(**batch)
    assert abs(float(losses[0.0]["l_mix"])) < 1e-5
    assert float(losses[0.5]["loss"].detach()) == pytest.approx(float(
        losses[0.5]["l_doc"] + losses[0.5]["l_dist"] + 2.0 * losses[0.5]["l_mix"].detach()), rel=1e-5)
    full = encoder.config.embedding_dim
    expected = []
    for dim in (16, full):
        contextual = encoder.encode_documents([chunk_lists[i] for i in picked], output_dim=dim)
        mixed = encoder.encode_documents([chunk_lists[i] for i in picked], output_dim=dim, local_mix=0.5)
        expected.append(np.mean([1 - float(a @ b) for c, m in zip(contextual, mixed) for a, b in zip(c, m)]))
    assert float(losses[0.5]["l_mix"]) == pytest.approx(float(np.mean(expected)), abs=1e-4)
    losses[0.5]["loss"].backward()
    (model_grad,) = [p.grad for name, p in model.named_parameters() if name == "separator"]
    assert model_grad is not None and model_grad.abs().sum() > 0
    with pytest.raises(ValueError, match="mix_weight > 0 needs the teacher model"):
        ContextTrainingModel(ContextEmbedModel.from_pretrained(built["bert"][0]), config)


def test_the_mix_teacher_reads_chunks_alone_in_passes_of_similar_length(built):
    """L_mix's teacher runs a batch's chunks alone in passes of similar length, not one pass padded to the longest:
    padding is masked, so each chunk keeps the vector of the single pass, in the batch's order (a chunk longer than
    the window included)."""
    from contextembed.batching import token_budget_batches
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.model import one_chunk_vectors

    model = ContextEmbedModel.from_pretrained(built["bert"][0]).eval()
    processor = ContextEmbedProcessor.from_pretrained(built["bert"][0])
    inputs = dict(processor([["word " * n] for n in (3, 100, 1, 57, 20, 9, 40, 2)], task="document"))
    lengths = inputs["token_attention_mask"].sum(1).tolist()
    assert len(token_budget_batches(lengths, len(lengths), max_tokens=128)) > 2  # several passes, out of order
    with torch.no_grad():
        one_pass = model(**inputs, normalize=False).chunk_embeddings[:, 0]
        by_length = one_chunk_vectors(model, inputs, max_tokens=128)
    assert by_length.shape == one_pass.shape
    torch.testing.assert_close(by_length, one_pass, atol=1e-5, rtol=1e-5)


def test_document_passes_by_length_give_the_one_call_vectors_and_gradients(built):
    """Training runs a batch that fits one window in passes of similar length (the model itself pads it to its
    longest row, to return hidden states): every chunk keeps its one-call vector, in the batch's order, padding
    chunks stay zero, and the gradient is the one-call gradient. A batch with a row longer than a window is the one
    call."""
    from contextembed.batching import token_budget_batches
    from contextembed.modeling import ContextEmbedProcessor
    from contextembed.training.model import chunk_vectors

    model = ContextEmbedModel.from_pretrained(built["bert"][0]).eval()
    processor = ContextEmbedProcessor.from_pretrained(built["bert"][0])
    window = model.config.max_seq_length
    short = [["word " * n, "rent " * (n % 3 + 1)] for n in (2, 9, 1, 6, 4)] + [["tenant"] * 4, ["she"]]
    inputs = dict(processor(short, task="document"))
    lengths = inputs["token_attention_mask"].sum(1).tolist()
    assert max(lengths) <= window and len(token_budget_batches(lengths, len(lengths), max_tokens=64)) > 2

    def vectors_and_grad(run):
        model.zero_grad()
        vectors = run()
        (vectors * torch.linspace(-1, 1, vectors.shape[-1])).sum().backward()
        return vectors.detach(), model.projection.weight.grad.clone()

    one_call, one_call_grad = vectors_and_grad(lambda: model(**inputs, normalize=False).chunk_embeddings)
    by_length, by_length_grad = vectors_and_grad(lambda: chunk_vectors(model, inputs, max_tokens=64))
    assert by_length.shape == one_call.shape == (len(short), 4, one_call.shape[-1])
    torch.testing.assert_close(by_length, one_call, atol=1e-5, rtol=1e-5)
    assert by_length[-1, 1:].abs().max() == 0  # a one-chunk document's padding chunks
    torch.testing.assert_close(by_length_grad, one_call_grad, atol=1e-4, rtol=1e-4)

    long = dict(processor(short[:3] + [["lease " * 3] * (window // 4)], task="document"))
    assert long["token_attention_mask"].sum(1).max() > window
    with torch.no_grad():
        torch.testing.assert_close(chunk_vectors(model, long, max_tokens=64),
                                   model(**long, normalize=False).chunk_embeddings, atol=1e-5, rtol=1e-5)


def test_a_run_with_the_mix_term_continues_a_delta_and_lowers_it(built, trained, tmp_path):
    out, _, _, _ = trained
    documents, _, _ = tiny_family()
    write_documents(tmp_path / "data.jsonl", documents)
    config = TrainConfig.from_dict(max_steps=30, batch_size=8, learning_rate=1e-2, lora_rank=8, lora_alpha=8, save_steps=10,
                         soup_size=1, logging_steps=5, bf16=False, qat_fraction=0.0, warmup_ratio=0.0,
                         chunking_weights={"sentences": 1.0}, doc_weight=0.0, dist_weight=0.0, mix_weight=1.0,
                         local_mix=0.5, init_delta=str(out / "run" / "delta.safetensors"))
    train(built["bert"][0], tmp_path / "data.jsonl", tmp_path / "run", config)
    log = [entry for entry in map(json.loads, (tmp_path / "run" / "train_log.jsonl").read_text().splitlines())
           if "l_mix" in entry]
    assert log[-1]["l_mix"] < 0.5 * log[0]["l_mix"]
