import numpy as np
import pytest

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
