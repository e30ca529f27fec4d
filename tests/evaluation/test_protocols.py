"""ConTEB and Q2D-Web style runners on tiny data and a tiny model; truncation counted in model tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

import contextembed
from contextembed.evaluation.loaders import load_beir, load_conteb_task
from contextembed.evaluation.protocols import run_conteb, run_q2d, truncate_to_tokens


@pytest.fixture
def encoder(built):
    return contextembed.load(str(built["bert"][0]))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def conteb_task(tmp_path):
    folder = tmp_path / "geography"
    folder.mkdir()
    # Written out of order on purpose: chunks are ordered by their integer index, not by row.
    write_jsonl(folder / "documents.jsonl", [
        {"chunk_id": "paris_10", "chunk": "it is the capital"},
        {"chunk_id": "paris_2", "chunk": "the city has a river"},
        {"chunk_id": "paris_0", "chunk": "paris is a city"},
        {"chunk_id": "rome_0", "chunk": "rome is a city"},
        {"chunk_id": "rome_1", "chunk": "it has a river"},
    ])
    write_jsonl(folder / "queries.jsonl", [{"query": "the river of paris", "chunk_id": "paris_2"},
                                           {"query": "rome river", "chunk_ids": ["rome_1", "rome_0"]}])
    return folder


def test_conteb_loader_orders_chunks_by_index(conteb_task):
    task = load_conteb_task(conteb_task)
    assert task.doc_ids == ["paris", "rome"]
    assert task.chunk_ids[0] == ["paris_0", "paris_2", "paris_10"]
    assert task.gold == [["paris_2"], ["rome_1", "rome_0"]]


def test_conteb_loader_errors(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    write_jsonl(folder / "documents.jsonl", [{"chunk_id": "nounderscore", "chunk": "x"}])
    write_jsonl(folder / "queries.jsonl", [{"query": "q", "chunk_id": "a_0"}])
    with pytest.raises(ValueError, match=r"documents.jsonl:1: chunk_id must be '<docid>_<chunkindex>'"):
        load_conteb_task(folder)


def test_conteb_runner(encoder, conteb_task):
    results = run_conteb(encoder, [load_conteb_task(conteb_task)])
    for mode in ("contextual", "independent"):
        task = results[mode]["tasks"]["geography"]
        assert 0.0 <= task["ndcg@10"] <= 1.0 and 0.0 <= task["doc_ndcg@10"] <= 1.0
        assert task["chunks"] == 5 and task["queries"] == 2
        assert results[mode]["mean"]["ndcg@10"] == task["ndcg@10"]
    # Two documents and one gold document per query: document-level nDCG@10 is at least 1/log2(3).
    assert results["contextual"]["tasks"]["geography"]["doc_ndcg@10"] >= 0.63


@pytest.fixture
def beir_folder(tmp_path):
    folder = tmp_path / "q2d"
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [{"_id": f"d{i}", "title": "lease", "text": " ".join(["rent"] * (20 * i + 5))}
                                          for i in range(6)])
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "rent"}, {"_id": "q2", "text": "lease " * 600}])
    (folder / "qrels" / "citations.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    (folder / "qrels" / "web.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t2\nq2\td4\t0\n")
    return folder


def test_q2d_runner_reports_each_relevance_set(encoder, beir_folder):
    results = run_q2d(encoder, load_beir(beir_folder), max_tokens=48)
    assert set(results) == {"citations", "web"}
    assert results["citations"]["recall@1000"] == 1.0  # six documents: everything is retrieved
    assert results["web"]["queries"] == 1 and results["web"]["queries_without_positives"] == 1


def test_truncation_counts_special_tokens_and_prefix(built):
    processor = built["bert"][2]
    texts = ["rent " * 200, "short"]
    cut = truncate_to_tokens(processor, texts, max_tokens=32)
    rows = processor.tokenize_documents([[t] for t in cut])
    assert len(rows[0]["input_ids"]) == 32 and cut[1] == "short"
    from contextembed.modeling import ContextEmbedProcessor

    prefixed = ContextEmbedProcessor(processor.tokenizer, query_prefix="query: ")
    cut = truncate_to_tokens(prefixed, texts, max_tokens=32, task="query")
    assert len(prefixed.tokenize_documents([cut[0]], task="query")[0]["input_ids"]) == 32
    with pytest.raises(ValueError, match="leaves no room"):
        truncate_to_tokens(processor, texts, max_tokens=2)


def test_beir_loader_errors(beir_folder):
    (beir_folder / "qrels" / "bad.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tmissing\t1\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: unknown query 'q1' or document 'missing'"):
        load_beir(beir_folder)


def test_context_bench_local_mix_reaches_each_sentence_alone(encoder):
    """`local_mix` reaches late chunking only; at 1 every sentence is its vector alone, so late chunking's figures
    become the independent baseline's, and at 0 they are late chunking's own."""
    from contextembed.evaluation.context_bench import ContextDocument, ContextQuery, run_context_bench

    class Recording:  # the real encoder, with the options of each encode_documents call written down
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def encode_queries(self, queries, **options):
            return self.inner.encode_queries(queries, **options)

        def encode_documents(self, documents, **options):
            self.calls.append((len(documents), options.get("local_mix")))
            return self.inner.encode_documents(documents, **options)

    documents = [ContextDocument("a", ["paris is a city", "it has a river", "the rent is due"]),
                 ContextDocument("b", ["rome is a city", "it has a river", "the tenant pays"])]
    queries = [ContextQuery("q1", "river of rome", ["b"], ["b#1"], [[["b#0"]]]),
               ContextQuery("q2", "paris rent", ["a"], ["a#2"], [[["a#0"]]])]
    plain = run_context_bench(encoder, documents, queries, modes=("contextual", "independent"))
    recording = Recording(encoder)
    alone = run_context_bench(recording, documents, queries, modes=("contextual", "independent"), local_mix=1.0)
    # the two documents mixed; the five distinct sentences alone ("it has a river" is in both, encoded once)
    assert recording.calls == [(2, 1.0), (5, None)]
    assert alone["contextual"] == plain["independent"] == alone["independent"]
    unmixed = run_context_bench(encoder, documents, queries, modes=("contextual",), local_mix=0.0)
    assert unmixed["contextual"] == plain["contextual"]


def _four_leases():
    """Four leases that share their second sentence word for word, each asked about it by its city."""
    from contextembed.evaluation.context_bench import ContextDocument, ContextQuery

    openings = ["the lease of paris", "the lease of rome", "the lease of oslo", "the lease of lima"]
    documents = [ContextDocument(f"d{i}", [opening, "the rent is due monthly", "it has a garden"])
                 for i, opening in enumerate(openings)]
    queries = [ContextQuery(f"q{i}", f"rent due in {opening.split()[-1]}", [f"d{i}"], [f"d{i}#1"])
               for i, opening in enumerate(openings)]
    return documents, queries


def test_context_bench_copy_at_1_matches_the_vectors(encoder):
    """Copy@1 from `run_context_bench` against an oracle on the same model's vectors: late chunking scores whether the
    asked copy of a shared sentence beats its twins; alone, the twins tie and the first document's copy wins."""
    from contextembed.evaluation.context_bench import run_context_bench

    documents, queries = _four_leases()
    results = run_context_bench(encoder, documents, queries, modes=("contextual", "independent"))
    vectors = encoder.encode_documents([d.sentences for d in documents])
    query_vectors = encoder.encode_queries([q.query for q in queries])
    wins = [float(np.argmax([query_vectors[i] @ v[1] for v in vectors]) == i) for i in range(len(queries))]
    assert results["contextual"]["Copy@1"] == pytest.approx(sum(wins) / len(wins))
    assert results["contextual"]["copy_queries"] == len(queries)
    assert results["independent"]["Copy@1"] == pytest.approx(1 / len(queries))  # ties: d0's copy wins each time


def test_context_bench_miss_causes_match_the_vectors(encoder):
    """The miss causes from `run_context_bench` against an oracle on the same model's vectors: a query misses when a
    non-answer sentence scores above its answer (or equal to it, at a lower position: documents d0..d3 by id, then
    sentence), and the best of those sentences (the lowest position among equal scores) decides the cause; with
    Answer@1 the four means add up to 1. Alone, each distinct sentence has one vector, so the four copies of the
    answer tie and the first document's copy takes the top."""
    from contextembed.evaluation.context_bench import run_context_bench
    from contextembed.scoring import dot

    documents, queries = _four_leases()
    results = run_context_bench(encoder, documents, queries, modes=("contextual", "independent"))
    query_vectors = encoder.encode_queries([q.query for q in queries])
    texts = sorted({s for d in documents for s in d.sentences})
    alone = dict(zip(texts, np.concatenate(encoder.encode_documents([[t] for t in texts]))))
    for mode, vectors in (("contextual", np.concatenate(encoder.encode_documents([d.sentences for d in documents]))),
                          ("independent", np.stack([alone[s] for d in documents for s in d.sentences]))):
        causes = {"WrongSentence@1": 0.0, "WrongCopy@1": 0.0, "WrongDocument@1": 0.0}
        for i, query_vector in enumerate(query_vectors):
            scores = dot(query_vector[None], vectors)[0]
            answer, others = 3 * i + 1, [r for r in range(3 * len(documents)) if r != 3 * i + 1]
            if not any(scores[r] > scores[answer] or (r < answer and scores[r] == scores[answer]) for r in others):
                continue
            best = max(scores[r] for r in others)
            d, s = divmod(min(r for r in others if scores[r] == best), 3)
            key = "WrongSentence@1" if d == i else "WrongCopy@1" if s == 1 else "WrongDocument@1"
            causes[key] += 1 / len(queries)
        got = results[mode]
        assert {k: got[k] for k in causes} == pytest.approx(causes), mode
        assert got["Answer@1"] + sum(got[k] for k in causes) == pytest.approx(1.0)
    assert results["independent"]["WrongCopy@1"] > 0  # the tie hands d0's copy the top for some query
