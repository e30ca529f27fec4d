"""The ContextEmbedder facade on a tiny model: shapes, options, determinism and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import contextembed
from contextembed import ChunkedEmbeddings, ContextEmbedder
from contextembed.encoder import token_budget_batches

DOCS = [["the lease", "rent is two", "she is the tenant"], ["one"], "a raw string is one chunk",
        [f"chunk {i}" for i in range(9)]]


@pytest.fixture
def encoder(built):
    path, _, _ = built["bert"]
    return contextembed.load(str(path))


class TestEncodeDocuments:
    def test_one_array_per_document(self, encoder):
        vectors = encoder.encode_documents(DOCS)
        assert [v.shape for v in vectors] == [(3, 16), (1, 16), (1, 16), (9, 16)]
        assert all(v.dtype == np.float32 for v in vectors)
        assert np.allclose(np.linalg.norm(np.concatenate(vectors), axis=1), 1, atol=1e-5)

    def test_batch_size_and_token_budget_do_not_change_vectors(self, encoder):
        reference = encoder.encode_documents(DOCS, batch_size=1)
        for kwargs in ({"batch_size": 32}, {"max_tokens_per_batch": 40}, {"batch_size": 2}):
            for a, b in zip(reference, encoder.encode_documents(DOCS, **kwargs)):
                assert np.abs(a - b).max() <= 1e-5

    def test_matryoshka_dim_and_tensors(self, encoder):
        vectors = encoder.encode_documents(DOCS, output_dim=8, convert_to_tensor=True)
        assert all(isinstance(v, torch.Tensor) and v.shape[1] == 8 for v in vectors)
        full = encoder.encode_documents(DOCS, normalize=False)
        cut = full[0][:, :8] / np.linalg.norm(full[0][:, :8], axis=1, keepdims=True)
        assert np.allclose(vectors[0].numpy(), cut, atol=1e-6)

    @pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
    def test_quantised_codes_are_identical_across_calls(self, encoder, precision):
        a = encoder.encode_documents(DOCS, precision=precision, batch_size=2)
        b = encoder.encode_documents(DOCS, precision=precision, batch_size=2)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))

    @pytest.mark.parametrize("precision", ["int8", "uint8"])
    def test_codes_across_batch_compositions_differ_by_at_most_one(self, encoder, precision):
        # The documented guarantee: float vectors agree to ~1e-6 across batch compositions, so a coordinate on
        # a rounding boundary may land on either side; nothing moves further.
        a = encoder.encode_documents(DOCS, precision=precision, batch_size=1)
        b = encoder.encode_documents(list(reversed(DOCS)), precision=precision, batch_size=32)[::-1]
        floats = encoder.encode_documents(DOCS, batch_size=1)
        floats_b = encoder.encode_documents(list(reversed(DOCS)), batch_size=32)[::-1]
        assert max(np.abs(x - y).max() for x, y in zip(floats, floats_b)) <= 1e-5
        assert all(np.abs(x.astype(int) - y.astype(int)).max() <= 1 for x, y in zip(a, b))

    def test_raw_text_with_a_chunker_carries_offsets(self, encoder):
        text = "The lease is for one year. Rent is two. She is the tenant."
        (result,) = encoder.encode_documents([text], chunker="sentences")
        assert isinstance(result, ChunkedEmbeddings)
        assert result.embeddings.shape == (3, 16)
        assert [text[c.start : c.end] for c in result.chunks] == [c.text for c in result.chunks]

    def test_strict_long_documents(self, encoder):
        with pytest.raises(ValueError, match=r"document 0 has \d+ tokens, more than max_seq_length=64"):
            encoder.encode_documents([["one two three"] * 40], long_documents="error")
        assert encoder.encode_documents([["one two three"] * 40])[0].shape == (40, 16)

    def test_progress_bar(self, encoder, capsys):
        encoder.encode_documents(DOCS, batch_size=1, show_progress_bar=True)
        assert "Encoding documents" in capsys.readouterr().err

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"output_dim": 12}, r"output_dim must be one of \[8, 16\], got 12"),
            ({"precision": "int4"}, "precision must be one of"),
            ({"precision": "int8", "normalize": False}, "keep normalize=True"),
            ({"batch_size": 0}, "batch_size must be a positive integer"),
            ({"max_tokens_per_batch": -1}, "max_tokens_per_batch must be a positive integer"),
            ({"chunker": "words"}, "chunker must be one of"),
            ({"long_documents": "drop"}, "long_documents must be one of"),
        ],
    )
    def test_bad_options(self, encoder, kwargs, message):
        docs = ["some raw text."] if "chunker" in kwargs else DOCS
        with pytest.raises(ValueError, match=message):
            encoder.encode_documents(docs, **kwargs)

    def test_documents_the_encoder_refuses(self, encoder):
        with pytest.raises(ValueError, match="wrap a single document in a list"):
            encoder.encode_documents("just a string")
        with pytest.raises(ValueError, match="with a chunker, document 0 must be raw text"):
            encoder.encode_documents([["already", "chunked"]], chunker="sentences")
        with pytest.raises(ValueError, match="document 1 produced no chunks"):
            encoder.encode_documents(["fine.", "   "], chunker="sentences")
        with pytest.raises(ValueError, match=r"documents\[0\] must be a non-empty list of chunk strings, got an empty"):
            encoder.encode_documents([[]])


class TestLocalMix:
    """`local_mix`: each chunk's vector mixed with the same chunk encoded alone, one vector per chunk still."""

    def test_the_mix_of_the_two_encodings(self, encoder):
        contextual = encoder.encode_documents(DOCS)
        alone = encoder.encode_documents([[c] for d in DOCS for c in ([d] if isinstance(d, str) else d)])
        mixed = encoder.encode_documents(DOCS, local_mix=0.3)
        assert [m.shape for m in mixed] == [c.shape for c in contextual]  # never fewer vectors than chunks
        rows = np.cumsum([0] + [len(c) for c in contextual])
        for m, c, a, b in zip(mixed, contextual, rows[:-1], rows[1:]):
            expected = 0.7 * c + 0.3 * np.concatenate(alone[a:b])
            assert np.abs(m - expected / np.linalg.norm(expected, axis=1, keepdims=True)).max() <= 1e-5

    def test_ends_and_one_chunk_documents(self, encoder):
        plain = encoder.encode_documents(DOCS)
        assert all(np.array_equal(a, b) for a, b in zip(plain, encoder.encode_documents(DOCS, local_mix=0)))
        each_alone = encoder.encode_documents(DOCS, local_mix=1.0)
        assert np.abs(each_alone[0] - np.concatenate(encoder.encode_documents([[c] for c in DOCS[0]]))).max() <= 1e-5
        mixed = encoder.encode_documents(DOCS, local_mix=0.5)
        assert np.abs(mixed[1] - plain[1]).max() <= 1e-5  # a one-chunk document (like a query) is unchanged

    def test_context_still_tells_copies_apart(self, encoder):
        # Two documents that differ only in their first chunk: the shared chunk's vectors differ while any of the
        # contextual part is left, and are the same vector at local_mix=1.
        copies = [["acme wrote this.", "the rent is due."], ["zenith wrote this.", "the rent is due."]]
        for weight, differ in ((0.0, True), (0.5, True), (1.0, False)):
            a, b = encoder.encode_documents(copies, local_mix=weight)
            assert (np.abs(a[1] - b[1]).max() > 1e-4) == differ

    def test_codes_chunkers_windows_and_empty_chunks(self, encoder):
        floats = encoder.encode_documents(DOCS, local_mix=0.2)
        codes = encoder.encode_documents(DOCS, local_mix=0.2, precision="int8")
        expected = [contextembed.quantize(f, "int8", encoder.config.int8_clip_sigmas) for f in floats]
        assert all(np.array_equal(c, e) for c, e in zip(codes, expected))
        (result,) = encoder.encode_documents(["The lease is for one year. Rent is two."], chunker="sentences",
                                             local_mix=0.2)
        assert result.embeddings.shape == (2, 16)
        assert encoder.encode_documents([["one two three"] * 40], local_mix=0.2)[0].shape == (40, 16)  # windows
        (kept,) = encoder.encode_documents([["a chunk", " ", "another"]], empty_chunks="zero", local_mix=0.2)
        assert not kept[1].any() and np.allclose(np.linalg.norm(kept[[0, 2]], axis=1), 1, atol=1e-5)

    def test_the_encoder_attribute_sets_every_call(self, encoder):
        mixed = encoder.encode_documents(DOCS, local_mix=0.3)
        plain = encoder.encode_documents(DOCS)
        encoder.local_mix = 0.3
        try:
            assert all(np.array_equal(a, b) for a, b in zip(encoder.encode_documents(DOCS), mixed))
            assert all(np.array_equal(a, b) for a, b in zip(encoder.encode_documents(DOCS, local_mix=0), plain))
            encoder.local_mix = 2
            with pytest.raises(ValueError, match=r"local_mix must be a number in \[0, 1\], got 2"):
                encoder.encode_documents(DOCS)
        finally:
            encoder.local_mix = 0.0

    @pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), True, "0.1"])
    def test_bad_weights(self, encoder, weight):
        with pytest.raises(ValueError, match=r"local_mix must be a number in \[0, 1\], got"):
            encoder.encode_documents(DOCS, local_mix=weight)

    def test_needs_unit_vectors(self, encoder):
        with pytest.raises(ValueError, match="local_mix mixes unit vectors: keep normalize=True"):
            encoder.encode_documents(DOCS, local_mix=0.1, normalize=False)


class TestEncodeQueries:
    def test_queries(self, encoder):
        q = encoder.encode_queries(["who is the tenant", "rent"])
        assert q.shape == (2, 16)
        one = encoder.encode_queries(["who is the tenant"])
        assert np.abs(q[:1] - one).max() <= 1e-5

    def test_query_equals_one_chunk_document_without_prefixes(self, encoder):
        assert np.allclose(encoder.encode_queries(["rent"]), encoder.encode_documents([["rent"]])[0], atol=1e-6)

    def test_query_prefix_is_applied(self, backbone_dirs, tmp_path):
        contextembed.build_checkpoint(backbone_dirs["bert"], tmp_path, query_prefix="query: ")
        encoder = contextembed.load(str(tmp_path))
        assert not np.allclose(encoder.encode_queries(["rent"]), encoder.encode_documents([["rent"]])[0])

    def test_bad_queries(self, encoder):
        with pytest.raises(ValueError, match="wrap a single query in a list"):
            encoder.encode_queries("rent")
        with pytest.raises(ValueError, match="query 1 must be a str, got int"):
            encoder.encode_queries(["rent", 3])

    def test_scoring_end_to_end(self, encoder):
        """A document's score is its best chunk's cosine with the query, computed by hand from the vectors."""
        docs = encoder.encode_documents(DOCS)
        query = encoder.encode_queries(["rent is two"])
        scores = contextembed.maxsim(query, docs)
        expected = [max(float(np.dot(query[0].astype(np.float64), c.astype(np.float64))) for c in d) for d in docs]
        np.testing.assert_allclose(scores[0], expected, atol=1e-6)
        assert all(-1 - 1e-6 <= s <= 1 + 1e-6 for s in expected) and len(set(np.round(expected, 6))) > 1


class TestEncodeTokenized:
    """Rows the processor has tokenised already (the server tokenises each request once, to check it) embed to
    exactly what the text methods give."""

    @pytest.mark.parametrize("precision", ["float32", "int8"])
    def test_document_rows_give_the_document_vectors(self, encoder, precision):
        rows = encoder.processor.tokenize_documents(DOCS, task="document")
        got = encoder.encode_tokenized(rows, precision=precision, output_dim=8, max_tokens_per_batch=40)
        expected = encoder.encode_documents(DOCS, precision=precision, output_dim=8, max_tokens_per_batch=40)
        assert len(got) == len(DOCS)
        for a, b in zip(got, expected):
            assert a.shape == b.shape and a.dtype == b.dtype  # one vector per chunk
            np.testing.assert_array_equal(a, b)

    def test_query_rows_give_the_query_vectors(self, encoder):
        queries = ["who is the tenant", "rent"]
        rows = encoder.processor.tokenize_documents([[q] for q in queries], task="query")
        np.testing.assert_array_equal(np.concatenate(encoder.encode_tokenized(rows)), encoder.encode_queries(queries))

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"output_dim": 12}, r"output_dim must be one of \[8, 16\], got 12"),
            ({"precision": "int4"}, "precision must be one of"),
            ({"batch_size": None}, "batch_size must be a positive integer, got None"),
            ({"max_tokens_per_batch": 0}, "max_tokens_per_batch must be a positive integer"),
        ],
    )
    def test_bad_options_of_tokenized_rows(self, encoder, kwargs, message):
        rows = encoder.processor.tokenize_documents(DOCS, task="document")
        with pytest.raises(ValueError, match=message):
            encoder.encode_tokenized(rows, **kwargs)

    def test_no_rows(self, encoder):
        assert encoder.encode_tokenized([]) == []


def test_token_budget_batches_cover_every_document_once():
    lengths = [5, 90, 7, 6, 33, 33, 2, 64]
    batches = token_budget_batches(lengths, batch_size=3, max_tokens=70)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= 70


def brute_force_cost(lengths, batch_size, max_tokens, pass_tokens):
    """The cheapest cost over every partition of the documents into allowed passes (tiny inputs only)."""
    best = {(): 0}

    def cheapest(left: tuple) -> float:
        if left not in best:
            first, rest = left[0], left[1:]
            options = []
            for mask in range(2 ** len(rest)):
                members = (first, *(r for k, r in enumerate(rest) if mask >> k & 1))
                padded = max(lengths[i] for i in members) * len(members)
                if len(members) > batch_size or (len(members) > 1 and padded > max_tokens):
                    continue
                options.append(padded + pass_tokens + cheapest(tuple(r for r in rest if r not in members)))
            best[left] = min(options)
        return best[left]

    return cheapest(tuple(range(len(lengths))))


@pytest.mark.parametrize("seed", range(30))
def test_token_budget_batches_are_the_cheapest_allowed_passes(seed):
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in rng.integers(1, 60, size=int(rng.integers(1, 8)))]
    batch_size, max_tokens, pass_tokens = int(rng.integers(1, 5)), int(rng.integers(20, 150)), int(rng.integers(1, 30))
    batches = token_budget_batches(lengths, batch_size, max_tokens, pass_tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        padded = max(lengths[i] for i in batch) * len(batch)
        assert len(batch) <= batch_size and (len(batch) == 1 or padded <= max_tokens)
    cost = sum(max(lengths[i] for i in b) * len(b) + pass_tokens for b in batches)
    assert cost == brute_force_cost(lengths, batch_size, max_tokens, pass_tokens)


def test_load_rejects_bad_paths(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="without config.json"):
        contextembed.load(str(tmp_path))
    with pytest.raises(ValueError, match="is a file"):
        contextembed.load(str(tmp_path / "file.txt"))
    with pytest.raises(ValueError, match="neither a local directory nor a valid Hub repository id"):
        contextembed.load("not//a valid id")
    with pytest.raises(ValueError, match="dtype must be a torch dtype"):
        ContextEmbedder.from_pretrained(tmp_path.parent, dtype="float77")


def test_dtype_auto_is_bf16_only_where_the_device_computes_it_natively(checkpoint_dir):
    from contextembed.encoder import native_bf16, resolve_dtype

    encoder = contextembed.load(str(checkpoint_dir), dtype="auto")
    expected = torch.bfloat16 if native_bf16("cpu") else torch.float32
    assert resolve_dtype("auto", "cpu") == expected
    assert encoder.model.backbone.dtype == expected
    vectors = encoder.encode_documents([["the lease of the street", "the rent is monthly"]])[0]
    reference = contextembed.load(str(checkpoint_dir)).encode_documents([["the lease of the street",
                                                                          "the rent is monthly"]])[0]
    assert vectors.dtype == np.float32 and (vectors * reference).sum(1).min() > 0.99
    with pytest.raises(ValueError, match="dtype must be a torch dtype, its name"):
        contextembed.load(str(checkpoint_dir), dtype="bf16")


def test_raw_text_results_have_a_length(built):
    model = contextembed.load(str(built["bert"][0]))
    (result,) = model.encode_documents(["The rent is due. The lease ends in May. She pays."], chunker="sentences")
    assert len(result) == len(result.chunks) == len(result.embeddings) == 3


def test_a_chunk_longer_than_a_window_is_kept_and_said(built, caplog):
    model = contextembed.load(str(built["bert"][0]))  # 64-token windows
    text = " ".join(["rent"] * 300)  # one line, no sentence end: one chunk of ~300 tokens
    with caplog.at_level("WARNING"):
        (result,) = model.encode_documents([text], chunker="sentences")
    assert len(result) == 1
    assert "1 chunk(s) are longer than a window of 64 tokens" in caplog.text


def test_token_windows_over_a_long_text_raise_no_length_warning(built, capfd, caplog):
    model = contextembed.load(str(built["bert"][0]))
    with caplog.at_level("WARNING"):
        (result,) = model.encode_documents([" ".join(["the lease rent"] * 200)], chunker=contextembed.TokenChunks(32))
    assert len(result) > 10
    assert "longer than the specified maximum sequence length" not in caplog.text + capfd.readouterr().err


def test_a_checkpoint_whose_output_is_not_finite_is_named(built):
    """A broken checkpoint (a NaN weight, a float16 overflow) is a ValueError naming the document and chunk, never
    NaN vectors handed on to a ranking or a store."""
    encoder = contextembed.load(built["bert"][0])
    with torch.no_grad():
        encoder.model.projection.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"the model gave document 0, chunk 0 a vector with NaN or infinite values"):
        encoder.encode_documents([["the rent", "she pays"]], precision="int8")
    with pytest.raises(ValueError, match=r"the model gave query 0, chunk 0"):
        encoder.encode_queries(["who pays"])
