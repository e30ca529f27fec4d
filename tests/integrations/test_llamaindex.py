"""LlamaIndex: the embedding as a transformation (run, arun, num_workers=2) gives `encode_documents`' vectors,
serves queries as `embed_model`, and answers the lease questions through LlamaIndex's own retriever."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode

from contextembed.integrations.llamaindex import ContextualEmbedding
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


def documents():
    return [Document(text=text, id_=name) for name, text in TEXTS.items()]


def splitter():
    return SentenceSplitter(chunk_size=8, chunk_overlap=0)


def reference(encoder, nodes):
    by_doc = {}
    for node in sorted(nodes, key=lambda n: n.start_char_idx):
        by_doc.setdefault(node.ref_doc_id, []).append(node)
    expected = {}
    for members in by_doc.values():
        vectors = encoder.encode_documents([[n.get_content() for n in members]])[0]
        expected.update({n.node_id: v for n, v in zip(members, vectors)})
    return expected


@pytest.mark.parametrize("route", ["run", "arun", pytest.param("num_workers", marks=pytest.mark.slow)])
async def test_pipelines_keep_each_document_together(built, route, monkeypatch):
    import llama_index.core

    # Spawned workers rebuild the splitter's tokenizer; offline, it must come from LlamaIndex's bundled cache.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"))
    embedding = ContextualEmbedding(str(built["bert"][0]))
    pipeline = IngestionPipeline(transformations=[splitter(), embedding])
    if route == "run":
        nodes = pipeline.run(documents=documents())
    elif route == "arun":
        nodes = await pipeline.arun(documents=documents())
    else:
        nodes = pipeline.run(documents=documents(), num_workers=2)
    assert len({n.ref_doc_id for n in nodes}) == 2 and len(nodes) >= 4
    expected = reference(embedding.model, nodes)
    for node in nodes:
        np.testing.assert_allclose(node.embedding, expected[node.node_id], atol=1e-6)
    shared = [n for n in nodes if n.get_content().startswith("the rent is monthly")]
    assert len(shared) == 2 and np.abs(np.subtract(*[n.embedding for n in shared])).max() > 1e-4


def test_it_pickles_without_its_weights_and_serves_queries(built):
    embedding = ContextualEmbedding(str(built["bert"][0]))
    query = embedding.get_query_embedding("the rent")
    restored = pickle.loads(pickle.dumps(embedding))
    assert restored._model is None and restored.model_name == str(built["bert"][0])
    np.testing.assert_allclose(restored.get_query_embedding("the rent"), query, atol=1e-6)
    assert len(embedding.get_text_embedding_batch(["the rent", "the lease"])) == 2  # flat texts: one-chunk documents


def test_careless_nodes_are_refused(built):
    embedding = ContextualEmbedding(str(built["bert"][0]))
    with pytest.raises(ValueError, match="node 0 has no source document id"):
        embedding([TextNode(text="the rent", start_char_idx=0)])
    nodes = splitter().get_nodes_from_documents(documents())
    with pytest.raises(ValueError, match="node 0 .* has a next node that is not in this call"):
        embedding(nodes[:1])
    alone = ContextualEmbedding(str(built["bert"][0]), missing_source="alone")
    (node,) = alone([TextNode(text="the rent")])
    np.testing.assert_allclose(node.embedding, alone.model.encode_documents([["the rent"]])[0][0], atol=1e-6)


@pytest.mark.slow
def test_the_lease_questions_through_a_llamaindex_retriever(default_encoder):
    embedding = ContextualEmbedding(default_encoder)
    lease_documents = [Document(text=text, id_=slug) for slug, text in leases().items()]
    lease_splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    nodes = lease_splitter.get_nodes_from_documents(lease_documents)
    chunks = {slug: [n.get_content() for n in sorted((n for n in nodes if n.ref_doc_id == slug),
                                                     key=lambda n: n.start_char_idx)] for slug in ADDRESSES}
    contextual = VectorStoreIndex(IngestionPipeline(transformations=[lease_splitter, embedding]).run(
        documents=lease_documents), embed_model=embedding)
    flat = VectorStoreIndex.from_documents(lease_documents, embed_model=embedding, transformations=[lease_splitter])
    for slug, address in ADDRESSES.items():
        direct = direct_ranking(default_encoder, chunks, QUESTION.format(address))
        for index, check in ((contextual, lambda r: assert_contextual(r, direct)), (flat, assert_tie)):
            hits = index.as_retriever(similarity_top_k=100).retrieve(QUESTION.format(address))
            check(clause_ranking([(h.node.ref_doc_id, h.node.get_content(), h.score) for h in hits]))
