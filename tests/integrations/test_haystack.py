"""Haystack: the document embedder groups DocumentSplitter output by source_id (ordered by split_id) inside a
real Pipeline with InMemoryDocumentStore, serialises with it, and answers the lease questions through Haystack's
own embedding retriever."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.preprocessors import DocumentSplitter  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever  # noqa: E402
from haystack.components.writers import DocumentWriter  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from contextembed.integrations.haystack import ContextualDocumentEmbedder, ContextualTextEmbedder  # noqa: E402
from tests.integrations.leases import (  # noqa: E402
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


def indexing(store, embedder, splitter) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("splitter", splitter)
    pipeline.add_component("embedder", embedder)
    pipeline.add_component("writer", DocumentWriter(store))
    pipeline.connect("splitter.documents", "embedder.documents")
    pipeline.connect("embedder.documents", "writer.documents")
    return pipeline


def querying(store, model) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("query", ContextualTextEmbedder(model))
    pipeline.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=200))
    pipeline.connect("query.embedding", "retriever.query_embedding")
    return pipeline


def test_a_pipeline_stores_the_contextual_vectors(built):
    model = str(built["bert"][0])
    store = InMemoryDocumentStore()
    pipeline = indexing(store, ContextualDocumentEmbedder(model), DocumentSplitter(split_by="period", split_length=1))
    pipeline.run({"splitter": {"documents": [Document(content=t, id=n) for n, t in TEXTS.items()]}})
    stored = store.filter_documents()
    embedder = ContextualDocumentEmbedder(model)
    embedder.warm_up()
    for name in TEXTS:
        splits = sorted((d for d in stored if d.meta["source_id"] == name), key=lambda d: d.meta["split_id"])
        expected = embedder._model.encode_documents([[d.content for d in splits]])[0]
        np.testing.assert_allclose([d.embedding for d in splits], expected, atol=1e-6)
    shared = [d.embedding for d in stored if d.content.strip().startswith("the rent is monthly")]
    assert len(shared) == 2 and np.abs(np.subtract(*shared)).max() > 1e-4
    # Shuffled input: the same vectors (ordered by split_id, not by arrival).
    shuffled = list(reversed(stored))
    again = embedder.run([Document(content=d.content, meta=d.meta) for d in shuffled])["documents"]
    np.testing.assert_allclose([d.embedding for d in again], [d.embedding for d in shuffled], atol=1e-6)
    # The pipeline serialises and loads back (Haystack 3 loads only allow-listed modules) with the same settings.
    restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["contextembed.integrations.haystack"])
    assert restored.get_component("embedder").to_dict() == pipeline.get_component("embedder").to_dict()


def test_careless_documents_are_refused(built):
    embedder = ContextualDocumentEmbedder(str(built["bert"][0]))
    with pytest.raises(ValueError, match="document 0 has no source document id"):
        embedder.run([Document(content="the rent")])
    with pytest.raises(ValueError, match="documents 0 and 1 of document 'a' both claim position 0"):
        embedder.run([Document(content="the rent", meta={"source_id": "a", "split_id": 0}),
                      Document(content="the lease", meta={"source_id": "a", "split_id": 0})])
    whitespace = [Document(content="the rent", meta={"source_id": "a", "split_id": 0}),
                  Document(content="\n", meta={"source_id": "a", "split_id": 1})]
    with pytest.raises(ValueError, match=r"document 1 \(document 'a'\) has empty text.*empty_chunks='zero'"):
        embedder.run(whitespace)
    kept = ContextualDocumentEmbedder(str(built["bert"][0]), empty_chunks="zero").run(whitespace)["documents"]
    assert len(kept) == 2 and not any(kept[1].embedding) and any(kept[0].embedding)
    with pytest.raises(ValueError, match="expects a string"):
        ContextualTextEmbedder(str(built["bert"][0])).run(["the rent"])


@pytest.mark.slow
def test_the_lease_questions_through_a_haystack_retriever(default_encoder):
    from contextembed.default_model import DEFAULT_MODEL_NAME as model

    documents = [Document(content=text, id=slug) for slug, text in leases().items()]
    splitter = DocumentSplitter(split_by="period", split_length=1)
    splits = DocumentSplitter(split_by="period", split_length=1).run(documents=documents)["documents"]
    chunks = {slug: [d.content for d in sorted((d for d in splits if d.meta["source_id"] == slug),
                                               key=lambda d: d.meta["split_id"])] for slug in ADDRESSES}
    contextual, flat = InMemoryDocumentStore(), InMemoryDocumentStore()
    # split_by="period" leaves a whitespace-only split at the end of each lease: kept, with an all-zero vector.
    indexing(contextual, ContextualDocumentEmbedder(model, empty_chunks="zero"), splitter).run(
        {"splitter": {"documents": documents}})
    # The flat route: each split embedded alone (no source id given to the embedder).
    indexing(flat, ContextualDocumentEmbedder(model, source_id_field="no_such_field", missing_source="alone",
                                              empty_chunks="zero"),
             DocumentSplitter(split_by="period", split_length=1)).run({"splitter": {"documents": documents}})
    for slug, address in ADDRESSES.items():
        direct = direct_ranking(default_encoder, chunks, QUESTION.format(address))
        for store, check in ((contextual, lambda r: assert_contextual(r, direct)), (flat, assert_tie)):
            hits = querying(store, model).run({"query": {"text": QUESTION.format(address)}})["retriever"]["documents"]
            check(clause_ranking([(d.meta["source_id"], d.content, d.score) for d in hits]))


def test_local_mix_is_a_serialised_setting(built):
    """`local_mix` reaches `encode_documents` for each source's splits and travels with the pipeline."""
    model = str(built["bert"][0])
    embedder = ContextualDocumentEmbedder(model, local_mix=0.3)
    splits = [Document(content=c, meta={"source_id": "lease", "split_id": i})
              for i, c in enumerate(["the lease of the street.", " the rent is monthly.", " she is the tenant."])]
    got = [d.embedding for d in embedder.run(splits)["documents"]]
    expected = embedder._model.encode_documents([[d.content for d in splits]], local_mix=0.3)[0]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.abs(np.subtract(got, embedder._model.encode_documents([[d.content for d in splits]])[0])).max() > 1e-4
    assert ContextualDocumentEmbedder.from_dict(embedder.to_dict()).local_mix == 0.3
    with pytest.raises(ValueError, match=r"local_mix must be a number in \[0, 1\], got 3"):
        ContextualDocumentEmbedder(model, local_mix=3)
