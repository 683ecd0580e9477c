"""SqliteStore: the embedded backend, one SQLite file holding chunks, vectors and full-text indexes.

Modules: schema.py (the file: schema, upgrades, connections, reading chunks back), writing.py (one write
transaction), bm25.py and postings.py (BM25), knn.py (vectors in memory), filters.py, highlight.py (pure),
store.py (SqliteStore: reads, rebuilds and swaps, documents, export through iter_chunks).

Schema (`PRAGMA application_id` = APPLICATION_ID, `PRAGMA user_version` = SCHEMA_VERSION):

    meta(key, value)            mapping_version, model, dimension, index_id, generation
    sources(source, state)      what record_source stored, as JSON
    chunks(id, chunk_id, ...)   every Chunk field; breadcrumb, names, merged_anchors, name_anchors as
                                JSON. `id` is the rowid shared by the three tables below.
    chunk_names(name, chunk)    lowercased names, for lookup
    vectors(chunk, vector)      normalized float32 little-endian blobs
    fts                         FTS5 over title, breadcrumb, section, content; `porter unicode61`
                                (stemmed prose, like the `prose` analyzer)
    fts_code                    FTS5 over docsctl.text.code_text() of title, breadcrumb, section, content
                                and path: the identifiers only, each whole and by its parts; unicode61
                                keeping `-_./` inside tokens, so `add_filter` and `pn.state.onload`
                                match whole as well as by their parts

bm25 ORs the user's words (prose_terms) over fts and the query's identifiers (identifier_terms) over
fts_code, adds the two tables' FTS5 bm25() scores (equal column weights: the chunk's text scored as one
text, as OpenSearch's combined_fields does; the path is not searched) and the bonus for an exact documented
name (NAME_BOOST x idf). The scores are computed from FTS5's postings in numpy (postings.py: FTS5's own
formula and statistics, score for score), so a long question no longer makes FTS5 visit every row that
matches any of its words; a term FTS5 would read as a phrase falls back to FTS5's own ranking
(bm25.py, _Bm25Query). Filters restrict the matches before ranking.

knn is an exact dot product over a matrix kept in memory and reloaded when the index changes
(a new index_id or generation in meta); filters are a mask applied before the top k, and the product is
computed over the 64-row blocks the mask allows only (knn.py: the same scores, bit for bit). Measured on
8000 x 384 float32, k=10, 2 cores: numpy 0.18 ms (filtered 0.18 ms) vs sqlite-vec 0.1.9 vec0
2.8 ms (1.7 ms with a metadata filter), and sqlite-vec would need apsw or pysqlite3 besides: this
Python's sqlite3 cannot load extensions.

At 10,000 chunks of real docs (58 MB file, 2 busy cores): write 1.9 s, rebuild over a live index
2.1 s; bm25 k=10 1 ms (`SelectEditor`) to 6 ms (`color protein by chain`) and 12 ms (seven common
words matching 5,600 chunks: the cost is FTS5 scoring every match); knn 0.3 ms (first call loads
the matrix: 45 ms); highlight of 10 chunks 1.8 ms. bm25 now sorts each table's matches in SQLite and
reads only the best of them, with a bound that proves the top k exact (_Bm25Query).
Since the postings (bench/README.md, "Peers", six runs): bm25 k=50 on the dev questions p50 0.4-0.5 ms,
p95 0.7-5 ms at 6,640 chunks; 1.1-1.3 / 1.7-13.5 ms at 66,400 (FTS5 ranking: 25-51 / 62-128 ms); the first search
of a term after a change reads its postings once (as costly as FTS5's own match).
Highlights: FTS5 marks the shown chunks in a scratch FTS5 table of the read connection (its temp schema,
written and rolled back per page), with the same marks as highlight() over `fts`, which reads every query
term's postings in the whole index first.

Reads do not share a connection: each takes an idle one (or opens one), so that a search's BM25 runs
beside its k-NN.

A rebuild writes `<name>.building-<pid>` and, when the block exits cleanly, copies it over the
live file with SQLite's backup API in one write transaction. It does not os.replace() the file:
with WAL, a reader that keeps the old file open also keeps its `-wal` alive, and a connection that
opens the new file under the old name reads those frames as if they were its own (the old data
shadows the new, then gets checkpointed into it). Readers keep their snapshot until their read
ends, then see the new index; nothing else changes for them. Only a missing, empty or explicitly
replaced foreign file is swapped by rename.
"""

from docsctl.store.sqlite.highlight import fragments
from docsctl.store.sqlite.schema import APPLICATION_ID, SCHEMA_VERSION
from docsctl.store.sqlite.store import SqliteStore

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SqliteStore", "fragments"]
