"""The evaluation harness on the real dev set, the search-quality floors, and the acceptance cases.

The index of both corpora is built once per session (tests/eval_fixtures.py, on OpenSearch).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.evaluation.metrics import metric_names
from docsctl.evaluation.run import MODES, EvalReport, corpora_of, evaluate, load_queries
from docsctl.models import Filters

KINDS = {"howto", "identifier", "name", "concept"}
TABULATOR = "panel/examples/reference/widgets/Tabulator.ipynb"

# Floors for the dev set on OpenSearch, below the measured values (bench/README.md, "Search quality":
# hybrid MRR@10 0.909, Recall@5 0.890) by a margin for the approximate k-NN graph; the naive baseline
# (bench/naive_baseline.py: RRF of 1,000-character windows) measures 0.830 / 0.818.
HYBRID_MRR_FLOOR = 0.87
HYBRID_RECALL5_FLOOR = 0.86
# BM25 alone must hold the naive baseline's BM25 (rank_bm25 over windows: 0.781 / 0.796); it measures 0.808 /
# 0.807. BM25 is exact, so no margin: a run below this scores questions in plain words worse than plain BM25.
NAIVE_BM25 = {"MRR@10": 0.781, "Recall@5": 0.796}


@pytest.fixture(scope="module")
def dev_report(eval_index, shared_dir: Path) -> EvalReport:
    queries = load_queries(shared_dir / "eval" / "dev.jsonl")
    return evaluate(eval_index.searcher(), queries, MODES)


def test_report_has_every_metric_for_every_mode_and_kind(dev_report: EvalReport):
    assert set(dev_report.modes) == set(MODES)
    for report in dev_report.modes.values():
        assert report.overall.count == 40
        assert set(report.overall.means) == set(metric_names())
        assert set(report.by_kind) == KINDS
        assert sum(summary.count for summary in report.by_kind.values()) == 40
        for summary in [report.overall, *report.by_kind.values()]:
            assert all(0.0 <= value <= 1.0 for value in summary.means.values())
        data = report.to_dict()
        assert {"overall", "by_kind", "misses", "results"} <= set(data)
        json.dumps(data)


def test_hybrid_is_above_the_floors(dev_report: EvalReport):
    hybrid = dev_report.modes["hybrid"].overall.means
    assert hybrid["MRR@10"] >= HYBRID_MRR_FLOOR
    assert hybrid["Recall@5"] >= HYBRID_RECALL5_FLOOR


def test_bm25_alone_holds_the_naive_bm25(dev_report: EvalReport):
    bm25 = dev_report.modes["bm25"].overall.means
    for metric, floor in NAIVE_BM25.items():
        assert bm25[metric] >= floor, metric


def test_hybrid_beats_each_retriever_alone(dev_report: EvalReport):
    means = {mode: report.overall.means for mode, report in dev_report.modes.items()}
    assert means["hybrid"]["MRR@10"] >= max(means["bm25"]["MRR@10"], means["knn"]["MRR@10"])
    assert means["hybrid"]["Recall@5"] >= max(means["bm25"]["Recall@5"], means["knn"]["Recall@5"])


def test_hybrid_ranks_first_answers_no_worse_than_either_retriever_on_any_kind(dev_report: EvalReport):
    """MRR@10 per kind, within one query of the kind ranking its first answer 2nd instead of 1st. Recall@5 per
    kind is not held: for howto, k-NN alone finds d021's second page and d029's page, which
    weighing BM25 at half for questions costs; held-out questions need that weight (bench/README.md)."""
    modes = dev_report.modes
    for kind, hybrid in modes["hybrid"].by_kind.items():
        slack = 0.5 / hybrid.count + 1e-9
        best_alone = max(modes["bm25"].by_kind[kind].means["MRR@10"], modes["knn"].by_kind[kind].means["MRR@10"])
        assert hybrid.means["MRR@10"] >= best_alone - slack, kind


def _holoviz(eval_index, text: str, limit: int):
    return eval_index.searcher().search(text, limit=limit, filters=Filters(sources=("holoviz",))).hits


@pytest.mark.parametrize("text", ["Tabulator SelectEditor", "CheckboxEditor", "add_filter RangeSlider"])
def test_tabulator_reference_is_in_the_top_3(eval_index, text: str):
    assert TABULATOR in [hit.chunk.path for hit in _holoviz(eval_index, text, 3)]


def test_scatter_finds_a_holoviews_scatter_reference_first(eval_index):
    top = _holoviz(eval_index, "Scatter", 1)[0]
    assert re.fullmatch(r"holoviews/examples/reference/elements/\w+/Scatter\.ipynb", top.chunk.path)


def test_formatting_tabulator_cells_shows_the_formatters_section(eval_index):
    top = _holoviz(eval_index, "How do I format Tabulator cells?", 1)[0]
    assert top.chunk.path == TABULATOR
    assert "formatter" in " ".join([top.chunk.section, *top.chunk.breadcrumb]).lower()


# -- the command ---------------------------------------------------------------------------------


def test_eval_command_prints_json_for_scripts(eval_index, shared_dir: Path, tmp_path: Path):
    lines = (shared_dir / "eval" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    subset = [line for line in lines if json.loads(line)["id"] in {"d015", "d036"}]  # one per corpus
    queries = tmp_path / "two.jsonl"
    queries.write_text("\n".join(subset) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["eval", str(queries), "--corpora", str(eval_index.corpora_dir), "--mode", "bm25", "--json"]
        + ["--index", eval_index.settings.index_alias],
        env=eval_index.env(),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["index"]["indexed"] == 0  # already indexed: nothing embedded again
    bm25 = data["modes"]["bm25"]
    assert bm25["queries"] == 2
    assert [row["id"] for row in bm25["results"]] == ["d015", "d036"]
    assert set(bm25["overall"]) == set(metric_names())


GOOD = '{"id": "q1", "corpus": "c", "query": "x", "relevant": ["a.md"], "kind": "howto"}'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "queries file not found"),
        (GOOD + "\n{not json", ":2: not valid JSON"),
        ('{"id": "q1", "corpus": "c", "query": "x", "kind": "howto"}', "'relevant' must be"),
        ('{"id": "q1", "corpus": "c", "query": "", "relevant": ["a.md"], "kind": "howto"}', "'query' must be"),
        (GOOD + "\n" + GOOD, "appears twice"),
        (GOOD.replace('"c"', '"elsewhere"'), "no corpus folder"),
        (GOOD.replace("a.md", "b.md"), "judged document 'b.md' is not in"),
        ("\n\n", "holds no queries"),
    ],
)
def test_eval_command_rejects_bad_input_in_one_line(tmp_path: Path, content: str | None, message: str):
    corpora = tmp_path / "corpora"
    (corpora / "c").mkdir(parents=True)
    (corpora / "c" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    if content is not None:
        queries.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["eval", str(queries), "--corpora", str(corpora)], env={"DOCSCTL_BACKEND": "sqlite"}
    )
    assert result.exit_code == 1
    assert message in " ".join(result.stderr.split())
    assert len(result.stderr.strip().splitlines()) == 1


def test_eval_command_keeps_the_corpora_out_of_the_index_you_search(tmp_path: Path, embedding_cache_dir: Path):
    corpora = tmp_path / "corpora"
    (corpora / "c").mkdir(parents=True)
    (corpora / "c" / "a.md").write_text("# Colors\n\nColor a protein by chain.\n", encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    queries.write_text(GOOD.replace('"x"', '"color by chain"') + "\n", encoding="utf-8")
    data = tmp_path / "data"
    env = {"DOCSCTL_BACKEND": "sqlite", "DOCSCTL_DATA_DIR": str(data), "DOCSCTL_CACHE_DIR": str(embedding_cache_dir)}
    result = CliRunner().invoke(app, ["eval", str(queries), "--corpora", str(corpora), "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["modes"]["hybrid"]["overall"]["MRR@10"] == 1.0
    assert (data / "docsctl-chunks-eval.sqlite").exists()
    assert not (data / "docsctl-chunks.sqlite").exists()  # the configured index is not touched


def test_eval_command_rejects_an_unknown_mode(tmp_path: Path):
    result = CliRunner().invoke(app, ["eval", str(tmp_path / "q.jsonl"), "--corpora", str(tmp_path), "--mode", "x"])
    assert result.exit_code == 1
    assert "mode must be one of" in result.stderr


def test_the_judged_query_sets_are_sound_and_apart(repo_root: Path, shared_dir: Path, corpora_dir: Path):
    """dev (../shared), own and fresh (bench/queries): every judged page exists, and no id, query or primary
    page of one set repeats in another (a check set that shares them checks nothing new)."""
    sets = {
        "dev": load_queries(shared_dir / "eval" / "dev.jsonl"),
        **{path.stem: load_queries(path) for path in sorted((repo_root / "bench" / "queries").glob("*.jsonl"))},
    }
    assert {"dev", "own", "fresh"} <= set(sets)
    for queries in sets.values():
        assert corpora_of(queries, corpora_dir) == ["chimerax", "holoviz"]
        assert {query.kind for query in queries} == {"howto", "concept", "identifier", "name"}
    every = [query for queries in sets.values() for query in queries]
    assert len({query.id for query in every}) == len(every), "an id repeats"
    assert len({query.query.lower() for query in every}) == len(every), "a query repeats"
    primaries = {name: {(query.corpus, query.relevant[0]) for query in queries} for name, queries in sets.items()}
    for one, other in itertools.combinations(primaries, 2):
        assert not primaries[one] & primaries[other], f"{one} and {other} share a primary page"
