from uuid import uuid4

import numpy as np
import pytest
from contract_fixtures import DOCS, META

from docsctl.server.search import Searcher
from docsctl.store.doc_vectors import CentroidAccumulator, group_centroids, normalized


def test_normalized_scales_rows_to_unit_length_and_keeps_zero_rows():
    rows = normalized(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert rows.tolist() == [[0.6, 0.8], [0.0, 0.0]]


def test_group_centroids_is_the_normalized_mean_of_each_group():
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0]], dtype=np.float32)
    centroids = group_centroids(np.array([0, 0, 1]), matrix, 2)
    assert centroids[0] == pytest.approx([2**-0.5, 2**-0.5])
    assert centroids[1] == pytest.approx([0.0, 1.0])


def test_accumulator_sums_in_any_order_and_names_the_first_chunk():
    accumulator = CentroidAccumulator(2)
    accumulator.add("d1", "d1#2", 2, [0.0, 1.0])
    accumulator.add("d2", "d2#0", 0, [1.0, 0.0])
    accumulator.add("d1", "d1#0", 0, [1.0, 0.0])
    accumulator.add("d1", "d1#9", 9, [1.0, 0.0, 5.0])  # another dimension: its chunk will be rejected
    assert len(accumulator) == 2
    drained = {doc_id: (chunk_id, centroid) for doc_id, chunk_id, centroid in accumulator.drain()}
    assert drained["d1"][0] == "d1#0"
    assert drained["d1"][1] == pytest.approx([2**-0.5, 2**-0.5])
    assert drained["d2"] == ("d2#0", pytest.approx([1.0, 0.0]))
    assert len(accumulator) == 0  # drained documents are forgotten


def test_both_ways_agree():
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(7, 5)).astype(np.float32)
    groups = np.array([0, 1, 0, 2, 1, 0, 2])
    accumulator = CentroidAccumulator(5)
    for row, group in enumerate(groups):
        accumulator.add(f"d{group}", f"c{row}", row, matrix[row])
    streamed = {doc_id: centroid for doc_id, _, centroid in accumulator.drain()}
    grouped = group_centroids(groups, matrix, 3)
    for group in range(3):
        assert streamed[f"d{group}"] == pytest.approx(grouped[group].tolist(), abs=1e-6)


# -- an OpenSearch index from before document vectors (mapping version 2) --------------------------


@pytest.fixture
def old_opensearch_index(opensearch_url, embedder):
    """An alias on an index without `doc_embedding`, as docsctl built them before document vectors."""
    from opensearchpy import helpers

    from docsctl.config import load_settings
    from docsctl.store.opensearch import OpenSearchStore, _to_source, load_index_definition

    chunks = [chunk for doc in DOCS for chunk in doc.chunks()]
    for chunk, vector in zip(chunks, embedder.encode([c.embed_text() for c in chunks]), strict=True):
        chunk.embedding = vector.tolist()
    store = OpenSearchStore(load_settings(opensearch_url=opensearch_url), alias=f"test-old-{uuid4().hex}")
    definition = load_index_definition()
    del definition["mappings"]["properties"]["doc_embedding"]
    definition["mappings"]["_meta"].update(mapping_version=2, model=META.model, dimension=META.dimension, sources={})
    index = f"{store.alias}-v2-20250101000000-old"
    store.client.indices.create(index=index, body=definition)
    when = "2025-01-01T00:00:00+00:00"
    actions = ({"_index": index, "_id": c.chunk_id, "_source": _to_source(c, when)} for c in chunks)
    helpers.bulk(store.client, actions, refresh=True)
    store.client.indices.put_alias(index=index, name=store.alias)
    try:
        yield store, chunks
    finally:
        store.drop()


def test_an_index_without_document_vectors_still_answers_questions(old_opensearch_index, embedder):
    store, _ = old_opensearch_index
    vector = embedder.encode_query("how do I give every chain its own colour")
    assert store.knn_documents(vector, k=5) == []
    result = Searcher(store, embedder).search("how do I give every chain its own colour", limit=3)
    assert result.hits and "document" not in result.hits[0].ranks


def test_a_rebuild_derives_document_vectors_for_what_it_copies_from_an_old_index(old_opensearch_index, embedder):
    store, chunks = old_opensearch_index
    with store.writer(META, rebuild=True) as writer:
        assert writer.copy_sources(exclude=set()) == len(chunks)
    vector = np.asarray(embedder.encode_query("table of data with editors"))
    found = store.knn_documents(list(vector), k=50)
    groups: dict[str, list[list[float]]] = {}
    for chunk in chunks:
        groups.setdefault(chunk.doc_id, []).append(chunk.embedding)
    centroids = {doc_id: normalized(np.mean(rows, axis=0)) for doc_id, rows in groups.items()}
    expected = sorted(centroids, key=lambda doc_id: -float(centroids[doc_id] @ vector))
    assert [doc_id for doc_id, _ in found] == expected
