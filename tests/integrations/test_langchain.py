"""LangChain: the standard Embeddings suites, the contextual route into real stores (InMemory, FAISS, index()),
and the lease questions through LangChain's own retriever, flat route beside it."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_community.vectorstores import FAISS
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests
from langchain_text_splitters import RecursiveCharacterTextSplitter

import contextembed
from contextembed.integrations.langchain import ContextualEmbeddings, ContextualSplitter, add_documents_contextual
from tests.integrations.leases import (
    ADDRESSES,
    QUESTION,
    assert_contextual,
    assert_tie,
    clause_ranking,
    direct_ranking,
    leases,
)

TEXTS = {"street": "the lease of the street. the rent is monthly. she is the tenant.",
         "company": "the lease of the company. the rent is monthly. the deposit is one month."}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from tests.conftest import make_backbone_dir

    root = tmp_path_factory.mktemp("langchain")
    out = root / "checkpoint"
    contextembed.build_checkpoint(make_backbone_dir(root / "bert", "bert"), out, max_seq_length=64)
    return str(out)


class _TinyCheckpoint:
    """What both standard suites need: our class, built on a tiny random checkpoint."""

    @pytest.fixture(autouse=True)
    def _checkpoint(self, tiny_checkpoint):
        type(self).checkpoint = tiny_checkpoint

    @property
    def embeddings_class(self):
        return ContextualEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": self.checkpoint}


class TestStandardUnit(_TinyCheckpoint, EmbeddingsUnitTests):
    pass


class TestStandardIntegration(_TinyCheckpoint, EmbeddingsIntegrationTests):
    pass


def splitter():
    return ContextualSplitter(RecursiveCharacterTextSplitter(chunk_size=30, chunk_overlap=0, separators=[". "],
                                                             keep_separator="end"))


def reference(embeddings, chunks):
    """chunk id -> the vector `encode_documents` gives it with its document's chunks."""
    by_parent = {}
    for chunk in chunks:
        by_parent.setdefault(chunk.metadata["parent_id"], []).append(chunk)
    expected = {}
    for parent, members in by_parent.items():
        vectors = embeddings.model.encode_documents([[c.page_content for c in members]])[0]
        expected.update({c.id: v for c, v in zip(members, vectors)})
    return expected


def test_the_splitter_keeps_parent_order_and_exact_offsets(tiny_checkpoint):
    documents = [Document(page_content=text, id=name) for name, text in TEXTS.items()]
    chunks = splitter().split_documents(documents)
    assert [c.id for c in chunks[:3]] == ["street:0", "street:1", "street:2"]
    for chunk in chunks:
        parent = TEXTS[chunk.metadata["parent_id"]]
        assert parent[chunk.metadata["start_index"]:chunk.metadata["end_index"]] == chunk.page_content
        assert chunk.metadata["n_chunks"] == 3
    with pytest.raises(ValueError, match="documents share the id 'street'"):
        splitter().split_documents([documents[0], documents[0]])


@pytest.mark.parametrize("store", ["memory", "faiss"])
def test_any_store_gets_the_contextual_vectors(tiny_checkpoint, store):
    embeddings = ContextualEmbeddings(tiny_checkpoint)
    documents = [Document(page_content=text, id=name) for name, text in TEXTS.items()]
    if store == "memory":
        vectorstore = InMemoryVectorStore(embeddings)
    else:
        vectorstore = FAISS.from_texts(["dummy_text"], embeddings)  # the store's own probe: encoded alone
        vectorstore.delete([vectorstore.index_to_docstore_id[0]])
    ids = add_documents_contextual(vectorstore, documents, embeddings, splitter=splitter())
    chunks = splitter().split_documents(documents)
    expected = reference(embeddings, chunks)
    assert ids == [c.id for c in chunks]
    for chunk in chunks:
        if store == "memory":
            stored = vectorstore.store[chunk.id]["vector"]
        else:
            stored = vectorstore.index.reconstruct(
                next(i for i, d in vectorstore.index_to_docstore_id.items() if d == chunk.id))
        np.testing.assert_allclose(stored, expected[chunk.id], atol=1e-6)
    # The same sentence in two documents: two different vectors.
    assert np.abs(expected["street:1"] - expected["company:1"]).max() > 1e-4
    grouped = embeddings.embed_documents_grouped([[c.page_content for c in chunks if c.metadata["parent_id"] == name]
                                                  for name in TEXTS])
    np.testing.assert_allclose(grouped[1], [expected[f"company:{k}"] for k in range(3)], atol=1e-6)


def test_faiss_from_precomputed_vectors(tiny_checkpoint):
    embeddings = ContextualEmbeddings(tiny_checkpoint)
    chunks = splitter().split_documents([Document(page_content=t, id=n) for n, t in TEXTS.items()])
    vectors = embeddings.embed_chunks(chunks)  # one contextual vector per chunk Document, in input order
    store = FAISS.from_embeddings(list(zip([c.page_content for c in chunks], vectors)), embeddings,
                                  metadatas=[c.metadata for c in chunks], ids=[c.id for c in chunks])
    expected = reference(embeddings, chunks)
    for position, chunk_id in store.index_to_docstore_id.items():
        np.testing.assert_allclose(store.index.reconstruct(position), expected[chunk_id], atol=1e-6)
    stored = store.docstore.search("company:1")
    assert (stored.metadata["parent_id"], stored.metadata["chunk_index"]) == ("company", 1)


def test_the_index_api_with_small_batches_stays_contextual(tiny_checkpoint):
    embeddings = ContextualEmbeddings(tiny_checkpoint, strict=True)
    vectorstore = InMemoryVectorStore(embeddings)
    chunks = splitter().split_documents([Document(page_content=t, id=n) for n, t in TEXTS.items()])
    manager = InMemoryRecordManager("contextembed")
    manager.create_schema()
    with embeddings.contextual(chunks):
        result = index(chunks, manager, vectorstore, batch_size=2, cleanup="incremental", source_id_key="parent_id")
    assert result["num_added"] == len(chunks)
    expected = reference(embeddings, chunks)
    stored = {record["text"] + "|" + record["metadata"]["parent_id"]: record["vector"]
              for record in vectorstore.store.values()}
    for chunk in chunks:
        np.testing.assert_allclose(stored[chunk.page_content + "|" + chunk.metadata["parent_id"]], expected[chunk.id],
                                   atol=1e-6)


def test_careless_input_is_refused(tiny_checkpoint):
    embeddings = ContextualEmbeddings(tiny_checkpoint, strict=True)
    with pytest.raises(ValueError, match="was not staged"):
        embeddings.embed_documents(["the rent"])
    with pytest.raises(ValueError, match="chunk Document 0 has no source document id"):
        embeddings.embed_chunks([Document(page_content="the rent")])
    with pytest.raises(ValueError, match="has empty text"):
        embeddings.embed_chunks([Document(page_content=" ", metadata={"parent_id": "a", "chunk_index": 0})])
    with pytest.raises(ValueError, match=r"documents\[0\] must be a non-empty list of chunk strings, got a string "
                                         r"\('rent'\)"):
        embeddings.embed_documents_grouped(["rent"])  # not four one-letter chunks
    assert len(embeddings.embed_documents_grouped([["the rent", "is due"]])[0]) == 2
    other = InMemoryVectorStore(ContextualEmbeddings(tiny_checkpoint))  # a different embedder object
    with pytest.raises(ValueError, match="does not embed with these ContextualEmbeddings"):
        add_documents_contextual(other, [Document(page_content=TEXTS["street"])], embeddings, splitter=splitter())


def test_the_lease_questions_through_a_langchain_retriever(default_encoder):
    embeddings = ContextualEmbeddings(default_encoder)
    documents = [Document(page_content=text, id=slug) for slug, text in leases().items()]
    lease_splitter = ContextualSplitter(RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0))
    contextual = InMemoryVectorStore(embeddings)
    add_documents_contextual(contextual, documents, embeddings, splitter=lease_splitter)
    split = lease_splitter.split_documents(documents)
    flat = InMemoryVectorStore.from_documents(split, embeddings)
    chunks = {slug: [d.page_content for d in sorted((d for d in split if d.metadata["parent_id"] == slug),
                                                     key=lambda d: d.metadata["chunk_index"])] for slug in ADDRESSES}
    n = len(contextual.store)
    for slug, address in ADDRESSES.items():
        question = QUESTION.format(address)
        direct = direct_ranking(default_encoder, chunks, question)
        for store, check in ((contextual, lambda r: assert_contextual(r, direct)), (flat, assert_tie)):
            hits = store.similarity_search_with_score(question, k=n)
            check(clause_ranking([(d.metadata["parent_id"], d.page_content, s) for d, s in hits]))


def test_the_encoders_local_mix_reaches_a_retriever(tiny_checkpoint):
    """`encoder.local_mix` set once: LangChain's document vectors are `encode_documents(..., local_mix=...)`'s, and
    its query vectors are unchanged (a query is one chunk)."""
    model = contextembed.load(tiny_checkpoint)
    documents = [["the lease is for a year", "the tenant pays for power"], ["she owns the house", "rent is due"]]
    plain = ContextualEmbeddings(model).embed_documents_grouped(documents)
    model.local_mix = 0.4
    embeddings = ContextualEmbeddings(model)
    mixed = embeddings.embed_documents_grouped(documents)
    for got, want, before in zip(mixed, model.encode_documents(documents, local_mix=0.4), plain):
        np.testing.assert_allclose(got, want, atol=1e-6)
        assert np.abs(np.array(got) - np.array(before)).max() > 1e-4
    np.testing.assert_allclose(embeddings.embed_query("who pays for power"),
                               model.encode_queries(["who pays for power"])[0], atol=1e-6)
