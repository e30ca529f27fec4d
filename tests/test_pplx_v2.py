"""pplx-embed-v2-context without remote code: a tiny random folder of the published layout, converted and loaded,
against the published computation written from stock transformers (`tests/pplx_v2_layout.py`).

Every test ends by checking that the folder's remote code never ran (its files write a marker when imported)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import contextembed
from contextembed.cli import main
from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor
from contextembed.pplx_v2 import convert_pplx_v2, is_pplx_v2_checkpoint

from tests.pplx_v2_layout import MARKER, Reference, int8, make_source, unit

DOCUMENTS = [
    ["The lease of 14 Harbor Street is signed.", "She pays the rent on the first day.", "", "Café naïve résumé."],
    ["One chunk only."],
    ["[D] a chunk that starts like the prefix", f"a literal {MARKER} inside a chunk", "  ", "the deposit"],
    ["two", "three", "one two three four five six seven eight nine ten " * 3],
]
QUERIES = ["who pays the rent?", "", f"[Q] {MARKER}", "Café"]


@pytest.fixture(scope="module")
def remote_marker(tmp_path_factory):
    return tmp_path_factory.mktemp("remote") / "the-remote-code-ran"


@pytest.fixture(scope="module")
def source(tmp_path_factory, remote_marker):
    return make_source(tmp_path_factory.mktemp("pplx-v2") / "source", marker=remote_marker)


@pytest.fixture(scope="module")
def converted(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("pplx-v2-converted") / "out"
    convert_pplx_v2(source, out, source_id="perplexity-ai/pplx-embed-v2-context-tiny")
    return out


@pytest.fixture(scope="module")
def reference(source):
    return Reference(source)


@pytest.fixture(scope="module")
def encoder(converted):
    return contextembed.load(converted)


@pytest.fixture(autouse=True)
def _remote_code_never_runs(remote_marker):
    yield
    assert not remote_marker.exists(), remote_marker.read_text()


def assert_codes_equal_but_for_rounding(codes: np.ndarray, tanh_x: torch.Tensor) -> int:
    """int8 codes equal to round(tanh(x) * 127), except by 1 where float noise crosses a rounding boundary (x * 127
    within 1e-3 of a half); returns how many such codes there were."""
    scaled = (tanh_x * 127).numpy()
    diff = np.abs(codes.astype(np.int64) - int8(tanh_x).numpy().astype(np.int64))
    assert diff.max(initial=0) <= 1
    near_half = np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-3
    assert np.all(near_half[diff == 1]), "a code differs by 1 away from a rounding boundary"
    return int((diff == 1).sum())


def test_the_remote_code_files_would_write_the_marker(source, remote_marker, tmp_path):
    """The check after every test can fail: a copy of the folder's remote code, run, writes its marker."""
    import runpy

    code = (source / "configuration_pplx_contextual.py").read_text()
    assert str(remote_marker) in code
    other = tmp_path / "marker-of-the-copy"
    (tmp_path / "copy.py").write_text(code.replace(str(remote_marker), str(other)))
    with pytest.raises(ImportError, match="must never run"):
        runpy.run_path(str(tmp_path / "copy.py"))
    assert other.exists()


class TestPublishedComputation:
    def test_documents_equal_the_reference(self, encoder, reference):
        vectors = encoder.encode_documents(DOCUMENTS)
        codes = encoder.encode_documents(DOCUMENTS, precision="int8")
        off_by_one = 0
        for document, got, got_codes in zip(DOCUMENTS, vectors, codes):
            tanh_x, _ = reference.document(document)
            assert got.shape == (len(document), 16) and got_codes.dtype == np.int8
            np.testing.assert_allclose(got, unit(tanh_x).numpy(), atol=1e-4, rtol=0)
            off_by_one += assert_codes_equal_but_for_rounding(got_codes, tanh_x)
        assert off_by_one <= 2, off_by_one  # counted: float noise may cross a boundary, rarely
        assert np.all(vectors[0][2] == 0) and np.all(codes[0][2] == 0)  # the empty chunk: a zero vector

    def test_queries_equal_the_reference(self, encoder, reference):
        vectors = encoder.encode_queries(QUERIES)
        codes = encoder.encode_queries(QUERIES, precision="int8")
        for query, got, got_codes in zip(QUERIES, vectors, codes):
            tanh_x = reference.query(query)
            np.testing.assert_allclose(got, unit(tanh_x).numpy(), atol=1e-4, rtol=0)
            assert assert_codes_equal_but_for_rounding(got_codes[None], tanh_x[None]) <= 1

    def test_matryoshka_cut_takes_the_first_values_of_tanh_then_normalises(self, encoder, reference):
        assert encoder.config.matryoshka_dims == [8, 16] and encoder.config.default_precision == "int8"
        cut = encoder.encode_documents(DOCUMENTS[:1], output_dim=8)[0]
        cut_codes = encoder.encode_documents(DOCUMENTS[:1], output_dim=8, precision="int8")[0]
        tanh_x, _ = reference.document(DOCUMENTS[0])
        np.testing.assert_allclose(cut, unit(tanh_x, 8).numpy(), atol=1e-4, rtol=0)
        np.testing.assert_array_equal(cut_codes, encoder.encode_documents(DOCUMENTS[:1], precision="int8")[0][:, :8])
        query = encoder.encode_queries(QUERIES[:1], output_dim=8)[0]
        np.testing.assert_allclose(query, unit(reference.query(QUERIES[0]), 8).numpy(), atol=1e-4, rtol=0)

    def test_padding_and_batch_invariance(self, encoder):
        together = encoder.encode_documents(DOCUMENTS, batch_size=4)
        for document, vectors in zip(DOCUMENTS, together):
            np.testing.assert_allclose(vectors, encoder.encode_documents([document])[0], atol=1e-5, rtol=0)
        queries = encoder.encode_queries(QUERIES, batch_size=4)
        np.testing.assert_allclose(queries, np.concatenate([encoder.encode_queries([q]) for q in QUERIES]),
                                   atol=1e-5, rtol=0)

    def test_a_query_is_not_a_one_chunk_document(self, encoder, converted):
        """The card's warning: a query encoded as a document is a silent error. Their inputs differ as published:
        the query starts with the `[Q] ` token and pools it; the document's `[D] ` is text and pools into none."""
        processor = ContextEmbedProcessor.from_pretrained(converted)
        query_id = processor.tokenizer.convert_tokens_to_ids("[Q] ")
        document_id = processor.tokenizer.convert_tokens_to_ids("[D] ")
        (query,) = processor.tokenize_documents([["the rent"]], task="query")
        (document,) = processor.tokenize_documents([["the rent"]], task="document")
        assert query["input_ids"][0] == query_id and set(query["chunk_ids"]) == {0}
        assert document_id not in document["input_ids"] and document["chunk_ids"][0] == -1
        as_query = encoder.encode_queries(["the rent"])[0]
        as_document = encoder.encode_documents([["the rent"]])[0][0]
        assert float(as_query @ as_document) < 0.9999

    def test_markers_are_never_pooled_and_a_literal_one_never_splits_a_chunk(self, converted, reference):
        processor = ContextEmbedProcessor.from_pretrained(converted)
        marker_id = processor.chunk_token_id
        (one,) = processor.tokenize_documents([["a chunk with no marker"]], task="document")
        assert marker_id not in one["input_ids"]  # one chunk: the marker is absent
        (several,) = processor.tokenize_documents([DOCUMENTS[2]], task="document")
        ids, chunk_ids = np.array(several["input_ids"]), np.array(several["chunk_ids"])
        assert several["num_chunks"] == 4 and set(chunk_ids[chunk_ids >= 0]) == {0, 1, 2, 3}
        pooled_markers = chunk_ids[ids == marker_id]
        assert sorted(pooled_markers.tolist()) == [-1, -1, -1, 1]  # three boundaries unpooled; the literal in chunk 1
        assert several["input_ids"] == reference.document(DOCUMENTS[2])[1]  # the reference's one tokenisation

    def test_the_prefix_id_belongs_to_the_query_only(self, converted):
        processor = ContextEmbedProcessor.from_pretrained(converted)
        with pytest.raises(ValueError, match="titles are not part of pplx-embed-v2-context's input"):
            processor.tokenize_documents([["a"]], task="document", titles=["Lease"])
        with pytest.raises(ValueError, match="query 0 has 2 chunks: a query is one text"):
            processor.tokenize_documents([["a", "b"]], task="query")
        with pytest.raises(ValueError, match="document 0, chunk 1 is empty"):
            processor.tokenize_documents([["a", ""]], task="document", empty_chunks="error")


class TestEveryPathGivesTheSameVectors:
    def test_load_converts_the_original_folder_in_memory(self, source, encoder):
        direct = contextembed.load(source)
        assert is_pplx_v2_checkpoint(source) and direct.config.head_activation == "tanh"
        for a, b in zip(direct.encode_documents(DOCUMENTS), encoder.encode_documents(DOCUMENTS)):
            np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
        np.testing.assert_array_equal(direct.encode_queries(QUERIES, precision="int8"),
                                      encoder.encode_queries(QUERIES, precision="int8"))

    def test_transformers_auto_classes_after_the_import(self, converted, encoder):
        from transformers import AutoModel, AutoProcessor

        config = json.loads((converted / "config.json").read_text())
        assert config["model_type"] == "contextembed" and "auto_map" not in json.dumps(config)
        assert not list(converted.glob("*.py"))
        model, processor = AutoModel.from_pretrained(converted), AutoProcessor.from_pretrained(converted)
        assert isinstance(model, ContextEmbedModel) and processor.input_layout == "pplx-v2"
        with torch.no_grad():
            documents = model(**processor(DOCUMENTS, task="document"))
            queries = model(**processor(QUERIES, task="query"))
        for row, expected in enumerate(encoder.encode_documents(DOCUMENTS)):
            np.testing.assert_allclose(documents.chunk_embeddings[row, : len(expected)].numpy(), expected, atol=1e-6)
        np.testing.assert_allclose(queries.chunk_embeddings[:, 0].numpy(), encoder.encode_queries(QUERIES), atol=1e-6)
        with torch.no_grad():  # the int8 codes from the model's own output: its head before normalising, x 127
            raw = model(**processor(QUERIES, task="query"), normalize=False).chunk_embeddings[:, 0]
        np.testing.assert_array_equal(torch.round(raw * 127).numpy(), encoder.encode_queries(QUERIES, precision="int8"))

    def test_sentence_transformers_tells_queries_from_documents(self, converted, encoder):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(converted))
        assert model.prompts == {"query": "[Q] ", "document": "[D] "} and model.default_prompt_name == "document"
        np.testing.assert_allclose(model.encode_query(QUERIES), encoder.encode_queries(QUERIES), atol=1e-6)
        chunked = contextembed.as_chunked(DOCUMENTS)
        for name, got in (("encode_document", model.encode_document(chunked, output_value="token_embeddings")),
                          ("encode", model.encode(chunked, output_value="token_embeddings"))):
            for vectors, expected in zip(got, encoder.encode_documents(DOCUMENTS)):
                np.testing.assert_allclose(vectors.numpy(), expected, atol=1e-6, err_msg=name)

    def test_export_refuses_the_backbone_before_tracing(self, converted):
        from contextembed.backends import export

        with pytest.raises(ValueError, match="qwen3_5_text backbone, which export does not support"):
            export(converted, "onnx")
        assert not (converted / "onnx").exists()

    def test_the_cli_converts(self, source, tmp_path, capsys):
        assert main(["convert", str(source), str(tmp_path / "out")]) == 0
        assert "separator <|chunk_sep|>, head tanh" in capsys.readouterr().out
        assert contextembed.load(tmp_path / "out").config.int8_scheme == "bounded"


class TestBackbone:
    @pytest.mark.parametrize("attention", ["eager", "sdpa"])
    def test_full_attention_layers_are_bidirectional(self, converted, attention):
        """A token's state changes when a later token changes: only the full-attention layers can carry that back
        (the Gated-DeltaNet layers are causal). The same model made causal is the control that shows the check can
        fail."""
        model = ContextEmbedModel.from_pretrained(converted, attn_implementation=attention).eval()
        assert model.backbone.config._attn_implementation == attention
        assert {"linear_attention", "full_attention"} == set(model.backbone.config.layer_types)
        ids = torch.randint(5, 300, (1, 24))
        edited = ids.clone()
        edited[0, 20] = 7

        def first_states(backbone):
            with torch.no_grad():
                return [backbone(input_ids=x).last_hidden_state[0, :10] for x in (ids, edited)]

        a, b = first_states(model.backbone)
        assert (a - b).abs().max() > 1e-4
        model.backbone.config.is_causal = True
        a, b = first_states(model.backbone)
        assert (a - b).abs().max() == 0

    def test_sdpa_gives_the_eager_reference(self, converted, reference):
        sdpa = contextembed.load(converted, attn_implementation="sdpa")
        for document in DOCUMENTS:
            np.testing.assert_allclose(sdpa.encode_documents([document])[0], unit(reference.document(document)[0]),
                                       atol=1e-4, rtol=0)

    def test_bf16_backbone_keeps_the_projection_in_fp32(self, source, converted, encoder):
        for loaded in (contextembed.load(converted, dtype="bfloat16"), contextembed.load(source, dtype="bfloat16")):
            assert loaded.model.backbone.dtype == torch.bfloat16
            assert loaded.model.projection.weight.dtype == torch.float32
            for a, b in zip(loaded.encode_documents(DOCUMENTS), encoder.encode_documents(DOCUMENTS)):
                cosines = (a * b).sum(1)[np.abs(b).sum(1) > 0]
                assert cosines.min() > 0.98


class TestSources:
    def test_a_projection_listed_in_the_index_loads_the_same(self, tmp_path, remote_marker, encoder):
        listed = make_source(tmp_path / "listed", marker=remote_marker, index_lists_head=True)
        index = json.loads((listed / "model.safetensors.index.json").read_text())["weight_map"]
        assert index["contextual_projection.weight"] == "contextual_head.safetensors"
        for a, b in zip(contextembed.load(listed).encode_documents(DOCUMENTS), encoder.encode_documents(DOCUMENTS)):
            np.testing.assert_allclose(a, b, atol=1e-6)

    def test_documents_past_document_length_run_in_windows(self, tmp_path, remote_marker):
        """The published model raises past `document_length`; contextembed runs such a document in windows (its
        extension), one vector per chunk, and inside the length it is the reference."""
        short = make_source(tmp_path / "short", marker=remote_marker, document_length=48)
        encoder = contextembed.load(short)
        assert encoder.config.max_seq_length == 48
        long = [f"chunk {i} of the lease and the rent" for i in range(12)]
        vectors = encoder.encode_documents([long])[0]
        assert vectors.shape == (12, 16) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
        with pytest.raises(ValueError, match="more than max_seq_length=48"):
            encoder.encode_documents([long], long_documents="error")
        np.testing.assert_allclose(encoder.encode_documents([long[:2]])[0],
                                   unit(Reference(short).document(long[:2])[0]), atol=1e-4)

    def test_bad_sources_are_named(self, source, built, tmp_path):
        with pytest.raises(ValueError, match="not a pplx-embed-v2-context checkpoint"):
            convert_pplx_v2(built["qwen3"][0])
        cases = {
            "no projection": (lambda p: (p / "contextual_head.safetensors").unlink(),
                              "has no contextual_projection.weight"),
            "layer type": (lambda p: _edit(p, lambda c: c["text_config"].update(
                layer_types=["sliding_attention", "full_attention"] * 2)), "only linear_attention and full_attention"),
            "embedding_dim": (lambda p: _edit(p, lambda c: c.update(embedding_dim=12)), r"has shape \(16, 32\), "
                              r"expected \(12, 32\)"),
            "fewer layers": (lambda p: _edit(p, lambda c: c["text_config"].update(
                num_hidden_layers=2, layer_types=["linear_attention", "full_attention"])), "unexpected keys"),
            "damaged shard": (lambda p: (p / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 100),
                              "damaged or truncated"),
            "no query token": (lambda p: _edit(p, lambda c: c.update(query_prefix="<query>")),
                               "has no token '<query>'"),
        }
        for name, (damage, message) in cases.items():
            broken = shutil.copytree(source, tmp_path / name.replace(" ", "-"))
            damage(broken)
            with pytest.raises(ValueError, match=message):
                convert_pplx_v2(broken)


def _edit(folder, change) -> None:
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))
