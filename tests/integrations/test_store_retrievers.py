"""Retrievers on contextembed's stores in LangChain, LlamaIndex and Haystack, in the real libraries: each hit is a
found document's answer chunk, and one switch (`evidence=N`) puts the N chunks that make it verifiable, and their
reader view, in its metadata: the same as `contextembed.search.search` returns."""

from __future__ import annotations

import pytest

from contextembed.cli import main
from contextembed.search import search
from contextembed.stores import open_store
from tests.stores.test_store_cli import TOPICS

QUERY = "who pays for electricity?"


@pytest.fixture(scope="module")
def index(built, tmp_path_factory):
    """The four topic documents encoded by the tiny BERT checkpoint into an index folder."""
    root = tmp_path_factory.mktemp("retrievers")
    (root / "corpus").mkdir()
    for name, text in TOPICS.items():
        (root / "corpus" / name).write_text(text, encoding="utf-8")
    assert main(["encode", str(root / "corpus"), str(root / "index"), "--model", str(built["bert"][0]),
                 "--no-progress"]) == 0
    return root / "index"


def expected(index, model_path, k, evidence):
    """What `search` returns for the query, as (document, answer index, answer text, evidence, reader view)."""
    import contextembed

    from contextembed.search import reader_view

    with open_store(index) as store:
        query = contextembed.load(str(model_path)).encode_queries([QUERY], show_progress_bar=False)[0]
        hits = search(store, query, k, evidence=evidence)
    return [(h.document, h.chunk.index, h.chunk.text, [e.to_dict(score=True) for e in h.evidence] if evidence else None,
             reader_view(h) if evidence else None) for h in hits]


def as_tuples(items):
    return [(m["document"], m["chunk_index"], text, m.get("evidence"), m.get("reader_view")) for text, m in items]


@pytest.mark.parametrize("evidence", [0, 2])
def test_langchain(index, built, evidence):
    pytest.importorskip("langchain_core")
    from contextembed.integrations.langchain import ContextualStoreRetriever

    retriever = ContextualStoreRetriever(store=str(index), model=str(built["bert"][0]), k=3, evidence=evidence)
    documents = retriever.invoke(QUERY)
    assert as_tuples((d.page_content, d.metadata) for d in documents) == expected(index, built["bert"][0], 3, evidence)
    assert all(d.metadata["path"] == d.metadata["document"] for d in documents)  # the document's own metadata too
    assert ("evidence" in documents[0].metadata) == bool(evidence)


@pytest.mark.parametrize("evidence", [0, 2])
def test_llamaindex(index, built, evidence):
    pytest.importorskip("llama_index.core")
    from contextembed.integrations.llamaindex import ContextualStoreRetriever

    retriever = ContextualStoreRetriever(f"file://{index}", built["bert"][0], k=3, evidence=evidence)  # a Path
    nodes = retriever.retrieve(QUERY)
    assert as_tuples((n.node.get_content(), n.node.metadata) for n in nodes) == expected(index, built["bert"][0], 3,
                                                                                            evidence)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)


@pytest.mark.parametrize("evidence", [0, 2])
def test_haystack_in_a_pipeline_that_serialises(index, built, evidence):
    pytest.importorskip("haystack")
    from haystack import Pipeline

    from contextembed.integrations.haystack import ContextualStoreRetriever

    pipeline = Pipeline()
    pipeline.add_component("retriever", ContextualStoreRetriever(str(index), str(built["bert"][0]), top_k=3,
                                                                 evidence=evidence))
    pipeline = Pipeline.loads(pipeline.dumps(), allowed_modules=["contextembed.integrations.haystack"])  # from YAML
    documents = pipeline.run({"retriever": {"query": QUERY}})["retriever"]["documents"]
    assert as_tuples((d.content, d.meta) for d in documents) == expected(index, built["bert"][0], 3, evidence)
    fewer = pipeline.run({"retriever": {"query": QUERY, "top_k": 1}})["retriever"]["documents"]
    assert [d.id for d in fewer] == [documents[0].id]


def test_a_bad_switch_is_named(index):
    pytest.importorskip("langchain_core")
    from contextembed.integrations.langchain import ContextualStoreRetriever

    with pytest.raises(ValueError, match="evidence must be a non-negative integer, got -1"):
        ContextualStoreRetriever(store=str(index), evidence=-1)
