"""SqliteStore behaviour beyond the shared contract: the file on disk, foreign files, WAL and swaps."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from contract_fixtures import DOCS

from docsctl.errors import IndexMissingError, LockedError, StoreError
from docsctl.models import Chunk, Filters, IndexMeta
from docsctl.store.sqlite import SCHEMA_VERSION, SqliteStore, fragments
from docsctl.store.sqlite import bm25 as bm25_module
from docsctl.store.sqlite import schema as schema_module
from docsctl.store.sqlite.bm25 import _fts_query
from docsctl.store.sqlite.highlight import _MARK_END, _MARK_START, _code_spans, _spans
from docsctl.store.sqlite.knn import _blocks, _cosines
from docsctl.store.sqlite.postings import top_rows
from docsctl.text import code_query_terms, prose_terms

META = IndexMeta(mapping_version=1, model="test-model", dimension=4)


def sample(word: str = "", count: int | None = None) -> list[Chunk]:
    """Sample chunks with small deterministic vectors; `word` is appended to every content."""
    rng = np.random.default_rng(3)
    chunks = [chunk for doc in DOCS for chunk in doc.chunks()][:count]
    for chunk in chunks:
        chunk.content = f"{chunk.content} {word}".strip()
        chunk.embedding = rng.normal(size=4).tolist()
    return chunks


def build(store: SqliteStore, chunks: list[Chunk], *, rebuild: bool = True) -> None:
    with store.writer(META, rebuild=rebuild) as writer:
        writer.write(chunks)


@pytest.fixture
def path(tmp_path) -> Path:
    return tmp_path / "index.db"


def test_the_constructor_and_reads_create_nothing(path):
    store = SqliteStore(path)
    assert store.index_meta() is None
    with pytest.raises(IndexMissingError, match="docsctl reindex") as error:
        store.bm25("color", k=3)
    assert str(path) in str(error.value)
    assert list(path.parent.iterdir()) == []


def test_an_empty_file_counts_as_no_index(path):
    path.touch()
    store = SqliteStore(path)
    assert store.index_meta() is None
    with pytest.raises(IndexMissingError):
        store.get_chunk("x")
    build(store, sample())
    assert store.index_meta() == META


def _foreign_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('my precious notes')")
    conn.commit()
    conn.close()


def _corrupt_file(path: Path) -> None:
    path.write_bytes(b"this is not a database, just some bytes\n" * 200)


@pytest.mark.parametrize("make", [_foreign_database, _corrupt_file], ids=["foreign", "corrupt"])
def test_a_file_that_is_not_an_index_is_reported_and_left_alone(path, make):
    make(path)
    before = path.read_bytes()
    store = SqliteStore(path)
    reads = [
        store.index_meta,
        lambda: store.bm25("notes", k=3),
        lambda: store.knn([1.0, 0.0, 0.0, 0.0], k=3),
        store.list_sources,
        store.drop,
    ]
    for read in reads:
        with pytest.raises(StoreError) as error:
            read()
        assert not isinstance(error.value, IndexMissingError)
        assert str(path) in str(error.value)
        assert "docsctl reindex --full" in str(error.value)
    with pytest.raises(StoreError), store.writer(META, rebuild=False) as writer:
        writer.write(sample())
    assert path.read_bytes() == before


def test_an_explicit_rebuild_replaces_a_file_that_is_not_an_index(path):
    _foreign_database(path)
    store = SqliteStore(path)
    build(store, sample(), rebuild=True)
    assert store.index_meta() == META
    assert store.get_chunk(sample()[0].chunk_id).content == sample()[0].content


def test_an_index_of_another_schema_version_asks_for_a_rebuild(path):
    store = SqliteStore(path)
    build(store, sample())
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    fresh = SqliteStore(path)
    assert fresh.index_meta() == META  # readable, so the indexer sees it and decides
    with pytest.raises(StoreError, match="reindex --full"):
        fresh.bm25("color", k=3)
    build(fresh, sample(), rebuild=True)
    assert fresh.bm25("color", k=3)


# The columns each older schema lacked: 1 had no merged_anchors, 2 no name_anchors.
ADDED_SINCE = {1: ["merged_anchors", "name_anchors"], 2: ["name_anchors"]}


@pytest.mark.parametrize("old_version", sorted(ADDED_SINCE))
def test_an_index_of_an_older_schema_is_upgraded_in_place_and_keeps_answering(path, old_version):
    store = SqliteStore(path)
    build(store, sample())
    with sqlite3.connect(path) as conn:
        for column in ADDED_SINCE[old_version]:
            conn.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
        conn.execute(f"PRAGMA user_version = {old_version}")
    conn.close()
    fresh = SqliteStore(path)
    assert fresh.bm25("color", k=3)
    upgraded = fresh.get_chunk(sample()[0].chunk_id)
    assert upgraded.merged_anchors == upgraded.name_anchors == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftover_building_files_of_dead_writers_are_cleaned(path):
    store = SqliteStore(path)
    build(store, sample())
    dead = path.with_name(f"{path.name}.building-{_dead_pid()}")
    dead.write_bytes(b"half an index")
    dead.with_name(dead.name + "-wal").write_bytes(b"its wal")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = path.with_name(f"{path.name}.building-{sleeper.pid}")
        running.write_bytes(b"another process is building this")
        with store.writer(META, rebuild=False) as writer:
            writer.write(sample("extra", count=1))
        assert not dead.exists()
        assert not dead.with_name(dead.name + "-wal").exists()
        assert running.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_live_file_is_in_wal_mode(path):
    store = SqliteStore(path)
    build(store, sample())
    build(store, sample("again"))  # the backup swap keeps it
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_an_incremental_writer_commits_on_exit_and_rolls_back_on_error(path):
    store = SqliteStore(path)
    build(store, sample(count=3))
    extra = sample("zircon")[3:5]
    with store.writer(META, rebuild=False) as writer:
        writer.write(extra)
        assert store.bm25("zircon", k=5) == []  # not committed yet
    assert len(store.bm25("zircon", k=5)) == 2
    with pytest.raises(RuntimeError), store.writer(META, rebuild=False) as writer:
        writer.write(sample("quartz")[5:8])
        writer.delete_documents([extra[0].doc_id])
        raise RuntimeError("boom")
    assert store.bm25("quartz", k=5) == []
    assert len(store.bm25("zircon", k=5)) == 2


def test_an_incremental_writer_needs_the_same_meta(path):
    store = SqliteStore(path)
    build(store, sample())
    with pytest.raises(StoreError, match="reindex --full"), store.writer(IndexMeta(2, "test-model", 4), rebuild=False):
        pass


def test_a_second_writer_is_refused_while_one_runs(path, monkeypatch):
    monkeypatch.setattr(schema_module, "BUSY_TIMEOUT_MS", 100)
    store = SqliteStore(path)
    build(store, sample())
    with store.writer(META, rebuild=False) as writer:
        writer.write(sample("first", count=1))
        with pytest.raises(LockedError), SqliteStore(path).writer(META, rebuild=False):
            pass


READER = textwrap.dedent(
    """
    import sys
    from docsctl.store.sqlite import SqliteStore
    store = SqliteStore(sys.argv[1])
    print(len(store.bm25(sys.argv[2], k=50)), len(store.knn([1.0, 0.0, 0.0, 0.0], k=50)))
    """
)


def _read_in_another_process(path: Path, word: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(path), word], capture_output=True, text=True, timeout=60, check=True
    )
    first, second = done.stdout.split()
    return int(first), int(second)


def test_other_processes_read_while_a_writer_is_open(path):
    store = SqliteStore(path)
    build(store, sample("oldword", count=6))
    with store.writer(META, rebuild=False) as writer:
        writer.write(sample("oldword")[6:10])
        assert _read_in_another_process(path, "oldword") == (6, 6)
    assert _read_in_another_process(path, "oldword") == (10, 10)
    with store.writer(META, rebuild=True) as writer:
        writer.write(sample("newword", count=3))
        assert _read_in_another_process(path, "oldword") == (10, 10)
    assert _read_in_another_process(path, "newword") == (3, 3)


def test_a_rebuild_is_not_shadowed_by_the_old_write_ahead_log(path):
    """A reader keeping the old file open also keeps its WAL; a swap by rename would let new
    connections read the old frames. The backup swap must give every reader the new index only."""
    old_reader, writer_store = SqliteStore(path), SqliteStore(path)
    build(writer_store, sample("oldword", count=10))
    assert len(old_reader.bm25("oldword", k=50)) == 10  # holds a connection open from now on
    with writer_store.writer(META, rebuild=False) as writer:
        writer.write(sample("oldword")[10:20])  # frames that stay in the WAL
    assert Path(f"{path}-wal").stat().st_size > 0
    build(writer_store, sample("newword", count=4))
    for store in (SqliteStore(path), old_reader, writer_store):
        assert store.bm25("oldword", k=50) == []
        assert len(store.bm25("newword", k=50)) == 4
        assert len(list(store.iter_chunks())) == 4
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_knn_sees_writes_made_through_another_store(path):
    reader, writer_store = SqliteStore(path), SqliteStore(path)
    build(writer_store, sample(count=5))
    target = [0.0, 0.0, 0.0, 1.0]
    assert reader.knn(target, k=1)  # loads the vector matrix
    newcomer = sample("newcomer")[6]
    newcomer.embedding = target
    with writer_store.writer(META, rebuild=False) as writer:
        writer.write([newcomer])
    hits = reader.knn(target, k=1)
    assert [hit.chunk.chunk_id for hit in hits] == [newcomer.chunk_id]
    assert hits[0].score == pytest.approx(1.0)


def test_knn_with_a_vector_of_another_dimension_is_an_error(path):
    store = SqliteStore(path)
    build(store, sample())
    with pytest.raises(StoreError, match="dimensions"):
        store.knn([1.0, 0.0], k=3)


def test_drop_removes_the_file_and_its_companions(path):
    store = SqliteStore(path)
    build(store, sample())
    store.bm25("color", k=1)
    store.drop()
    assert list(path.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "spans", "expected"),
    [
        ("no match here", [], ["no match here"]),
        ("a b c", [(2, 3)], ["a <em>b</em> c"]),
        ("word " * 100, [(0, 4), (5, 9)], ["<em>word</em> <em>word</em>" + " word" * 30]),
        ("  \n ", [], []),
    ],
)
def test_fragments(content, spans, expected):
    assert fragments(content, spans) == expected


def test_fragments_pick_the_densest_windows_in_text_order_without_overlap():
    content = " ".join(f"w{i}" for i in range(300))
    words = ["w10", "w150", "w152", "w280", "w282", "w284"]
    spans = [(content.index(f"{word} "), content.index(f"{word} ") + len(word)) for word in words]
    shown = fragments(content, spans, size=60)
    assert len(shown) == 2
    assert "<em>w150</em>" in shown[0] and "<em>w280</em>" in shown[1]
    assert "<em>w10</em>" not in " ".join(shown)
    assert all(len(fragment.replace("<em>", "").replace("</em>", "")) <= 60 for fragment in shown)


def test_concurrent_reads_each_use_their_own_connection(path):
    """Searches running side by side (a search's BM25 beside its k-NN) must not share one connection."""
    store = SqliteStore(path)
    build(store, sample())
    with store._reading() as first, store._reading() as second:
        assert first is not second
    assert len(store._idle) == 2  # both kept for the next reads
    store.close()
    assert store._idle == []
    assert len(store.bm25("tabulator", k=5)) > 0  # and reads open a connection again


@pytest.mark.parametrize("chimerax_index", ["sqlite"], indirect=True)
def test_bm25_from_the_best_of_each_table_ranks_exactly_as_scoring_every_match(chimerax_index, shared_dir, monkeypatch):
    """BM25's top-k from each table's best rows (sqlite.bm25._Bm25Query) is an optimization only: on a real
    corpus, for questions full of common words and for lookups, at several depths and with a filter, it
    gives the very ranking and scores of scoring every match, and proves it without scoring every match
    for most of them."""
    questions = [json.loads(line)["query"] for line in (shared_dir / "eval" / "dev.jsonl").read_text().splitlines()]
    queries = [*questions, "color by chain", "Log panel", "open a session file", "surface", "bychain"]
    every_match_calls = []
    every_match_scores = bm25_module._Bm25Query.scores
    monkeypatch.setattr(
        bm25_module._Bm25Query, "scores", lambda query: every_match_calls.append(1) or every_match_scores(query)
    )
    bounded, every_match = SqliteStore(chimerax_index.store.path), SqliteStore(chimerax_index.store.path)
    bounded.bm25_from_postings = False  # FTS5 ranks, from each table's best rows
    every_match.every_bm25_match = True
    searches = 0
    for filters in (None, Filters(categories=("commands",))):
        for k in (1, 10, 50):
            for text in queries:
                ranked = [(hit.chunk.chunk_id, hit.score) for hit in bounded.bm25(text, k, filters)]
                assert ranked == [(hit.chunk.chunk_id, hit.score) for hit in every_match.bm25(text, k, filters)], text
                searches += 1
    assert len(every_match_calls) < 1.2 * searches  # the every-match store's calls, and few fallbacks


def _dev_questions(shared_dir: Path) -> list[str]:
    return [json.loads(line)["query"] for line in (shared_dir / "eval" / "dev.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("chimerax_index", ["sqlite"], indirect=True)
def test_bm25_from_the_postings_gives_fts5s_very_scores(chimerax_index, shared_dir):
    """BM25 from the postings (docsctl.store.sqlite.postings) recomputes FTS5's bm25(): on a real corpus the
    same chunks with the same scores, to the last bit, as FTS5 scoring every match: questions, lookups,
    identifiers (the code table), exact names (the bonus), at several depths, with filters."""
    queries = [
        *_dev_questions(shared_dir),
        *("color by chain", "Log panel", "open a session file", "surface", "bychain", "the"),
        *("pn.state.onload", "add_filter RangeSlider", "SelectEditor", "--transparency 50", "color colors coloring"),
    ]
    postings, every_match = SqliteStore(chimerax_index.store.path), SqliteStore(chimerax_index.store.path)
    every_match.every_bm25_match = True
    for filters in (None, Filters(categories=("commands",)), Filters(categories=("tutorials", "commands"))):
        for k in (1, 10, 50):
            for text in queries:
                ranked = [(hit.chunk.chunk_id, hit.score) for hit in postings.bm25(text, k, filters)]
                assert ranked == [(hit.chunk.chunk_id, hit.score) for hit in every_match.bm25(text, k, filters)], text
    assert postings._postings is not None  # the postings answered, not a fallback


def test_bm25_postings_follow_every_write(path):
    """The postings are kept per index generation: an incremental write, a deletion and a rebuild each show
    in the next search, as FTS5 sees them."""
    store, every_match = SqliteStore(path), SqliteStore(path)
    every_match.every_bm25_match = True

    def both(text: str) -> list[str]:
        found = [hit.chunk.chunk_id for hit in store.bm25(text, k=10)]
        assert found == [hit.chunk.chunk_id for hit in every_match.bm25(text, k=10)]
        return found

    build(store, sample())
    assert both("quartz") == []
    added = sample("quartz")[:2]
    with store.writer(META, rebuild=False) as writer:
        writer.write(added)
    assert sorted(both("quartz")) == sorted(chunk.chunk_id for chunk in added)
    with store.writer(META, rebuild=False) as writer:
        writer.delete_documents([added[0].doc_id])
    assert added[0].chunk_id not in both("quartz")
    build(store, sample("zircon"))
    assert both("quartz") == [] and len(both("zircon")) == 10


def test_a_term_fts5_reads_as_a_phrase_is_ranked_by_fts5(path, monkeypatch):
    """`foo#bar` is one code term to docsctl but two tokens to the code table's tokenizer (a phrase, which
    the postings do not score): such a query is left to FTS5, with the same answer."""
    chunks = sample()
    chunks[0].content += " call foo#bar here"
    build(SqliteStore(path), chunks)
    fallbacks = []
    top = bm25_module._Bm25Query.top
    monkeypatch.setattr(
        bm25_module._Bm25Query, "top", lambda query, k, **kw: fallbacks.append(k) or top(query, k, **kw)
    )
    store = SqliteStore(path)
    assert [hit.chunk.chunk_id for hit in store.bm25("foo#bar", k=5)][0] == chunks[0].chunk_id
    assert fallbacks == [5]
    store.bm25("call here", k=5)
    assert fallbacks == [5]


def test_top_rows_breaks_ties_by_rowid():
    scores = np.array([0.0, 2.0, 1.0, 2.0, 2.0, 0.5])
    assert top_rows(scores, np.array([1, 2, 3, 4, 5]), 2) == [(1, 2.0), (3, 2.0)]
    assert top_rows(scores, np.array([2, 4, 5]), 5) == [(4, 2.0), (2, 1.0), (5, 0.5)]
    assert top_rows(scores, np.array([], dtype=np.int64), 3) == []


@pytest.mark.parametrize("rows", [6640, 6643, 1001, 130, 7])
def test_knn_over_the_allowed_blocks_scores_as_the_whole_product(rows):
    """k-NN computes the product over the blocks a filter allows (knn._blocks): every allowed row gets the score
    the whole product gives it, to the last bit, however the allowed rows lie."""
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    half = np.zeros(rows, dtype=bool)
    half[rows // 3 : rows // 3 + rows // 2] = True  # one source of two
    runs = np.zeros(rows, dtype=bool)
    for start in range(0, rows, 1000):  # a source in every replica
        runs[start + 37 : start + 437] = True
    scattered = rng.random(rows) < 0.02
    for mask in (half, runs, scattered, ~half, np.zeros(rows, dtype=bool)):
        for _ in range(5):
            query = matrix[rng.integers(rows)] + rng.standard_normal(384).astype(np.float32) * 0.1
            assert np.array_equal(_cosines(matrix, query, mask)[mask], _cosines(matrix, query)[mask])
    if rows >= 1000:
        assert _blocks(half) is not None and _blocks(runs) is not None  # the blocks were computed, not all rows
    assert _blocks(np.ones(rows, dtype=bool)) is None


@pytest.mark.parametrize("chimerax_index", ["sqlite"], indirect=True)
def test_highlights_are_fts5s_marks_in_the_index(chimerax_index, shared_dir):
    """page() has FTS5 mark the shown chunks in a scratch table of their own: the same fragments as FTS5's
    highlight() over the index's own table, for every dev question and a few lookups, page after page."""
    store = SqliteStore(chimerax_index.store.path)
    conn = sqlite3.connect(store.path)
    for text in [*_dev_questions(shared_dir), "color by chain", "SelectEditor", "--transparency 50", "the"]:
        chunk_ids = [hit.chunk.chunk_id for hit in store.bm25(text, k=20)][::2]
        marks = ",".join("?" * len(chunk_ids))
        rows = conn.execute(f"SELECT id, chunk_id, content FROM chunks WHERE chunk_id IN ({marks})", chunk_ids)
        shown = {rowid: (chunk_id, content) for rowid, chunk_id, content in rows}
        marked = dict(
            conn.execute(
                f"SELECT rowid, highlight(fts, 3, ?, ?) FROM fts WHERE fts MATCH ? AND rowid IN ({marks})",
                [_MARK_START, _MARK_END, _fts_query(prose_terms(text)), *shown],
            )
        )
        code = set(code_query_terms(text))
        expected = {
            chunk_id: fragments(content, _spans(marked.get(rowid), content) + _code_spans(content, code))
            for rowid, (chunk_id, content) in shown.items()
        }
        for _ in range(2):  # and the scratch table is left empty
            assert {chunk_id: hit.highlights for chunk_id, hit in store.page(text, chunk_ids).items()} == expected
    conn.close()
