"""Query vectors through the ONNX export (docsctl.onnx_query) against the real model on torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from docsctl import onnx_query
from docsctl.embedding import Embedder, export_in_child, resolve_model_path


def dev_queries(shared_dir: Path) -> list[str]:
    lines = (shared_dir / "eval" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def exported_files(cache_dir: Path) -> list[str]:
    return sorted(path.name for path in (cache_dir / "models").glob("*")) if (cache_dir / "models").is_dir() else []


def test_onnx_query_vectors_match_torch_on_every_dev_query(embedder: Embedder, shared_dir: Path):
    queries = dev_queries(shared_dir)
    by_torch = embedder.encode(queries)
    by_onnx = np.array([embedder.encode_query(text) for text in queries])
    assert embedder.query_encoder() is not None  # the export was made and used
    assert by_onnx.shape == by_torch.shape
    assert np.allclose(np.linalg.norm(by_onnx, axis=1), 1.0, atol=1e-5)
    assert float((by_onnx * by_torch).sum(axis=1).min()) >= onnx_query.MIN_AGREEMENT


def test_an_export_is_made_once_and_a_later_process_answers_without_torch(tmp_path: Path, embedder: Embedder):
    first = Embedder(cache_dir=tmp_path, query_cache_size=0)
    expected = first.encode_query("How do I format Tabulator cells?")
    files = exported_files(tmp_path)
    assert [name.split(".", 1)[1] for name in files] == ["json", "onnx", "tokenizer.json"]
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from docsctl.embedding import Embedder\n"
        f"vector = Embedder(cache_dir=Path({str(tmp_path)!r})).encode_query('How do I format Tabulator cells?')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'vector': vector}))\n"
    )
    answer = json.loads(
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    )
    assert answer["torch"] is False
    assert float(np.dot(answer["vector"], expected)) > 0.99999
    assert exported_files(tmp_path) == files


def test_an_indexing_run_makes_the_export_while_torch_is_loaded(tmp_path: Path, embedder: Embedder):
    indexer = Embedder(cache_dir=tmp_path)
    indexer.prepare_queries()
    assert exported_files(tmp_path) == []  # nothing was embedded: torch is not loaded for it
    indexer.encode(["A chunk of documentation."])
    indexer.prepare_queries()
    assert [name.split(".", 1)[1] for name in exported_files(tmp_path)] == ["json", "onnx", "tokenizer.json"]


def test_torch_runtime_exports_nothing_and_gives_the_same_vectors(tmp_path: Path, embedder: Embedder):
    on_torch = Embedder(cache_dir=tmp_path, query_runtime="torch")
    vector = on_torch.encode_query("open a structure from the PDB")
    assert exported_files(tmp_path) == []
    assert float(np.dot(vector, embedder.encode_query("open a structure from the PDB"))) >= onnx_query.MIN_AGREEMENT


def test_an_export_that_disagrees_with_torch_is_not_kept_and_queries_fall_back_to_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, embedder: Embedder
):
    monkeypatch.setattr(onnx_query, "MIN_AGREEMENT", 1.5)  # no real export can reach a cosine of 1.5
    fallback = Embedder(cache_dir=tmp_path)
    fallback.encode(["load torch here, as indexing does: the export is then made in this process"])
    vector = fallback.encode_query("color by hydrophobicity")
    assert fallback.query_encoder() is None
    assert "queries are embedded with torch" in caplog.text
    assert exported_files(tmp_path) == []  # no partial files either
    assert np.allclose(vector, embedder.encode(["color by hydrophobicity"])[0], atol=1e-6)


def test_export_key_changes_with_the_model_files(tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    before = onnx_query.export_key(str(model))
    assert onnx_query.export_key(str(model)) == before
    (model / "config.json").write_text('{"hidden_size": 8}')
    assert onnx_query.export_key(str(model)) != before
    assert onnx_query.export_key(resolve_model_path("all-MiniLM-L6-v2")) != before
    assert onnx_query.export_key("some/hub-model") != onnx_query.export_key("other/hub-model")


def test_a_process_without_torch_has_a_child_make_the_export_and_never_loads_torch(tmp_path: Path, embedder: Embedder):
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from docsctl.embedding import Embedder\n"
        f"embedder = Embedder(cache_dir=Path({str(tmp_path)!r}))\n"
        "vector = embedder.encode_query('How do I format Tabulator cells?')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'onnx': embedder.query_encoder() is not None,"
        " 'vector': vector}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    assert (answer["torch"], answer["onnx"]) == (False, True)
    assert [name.split(".", 1)[1] for name in exported_files(tmp_path)] == ["json", "onnx", "tokenizer.json"]
    expected = embedder.encode(["How do I format Tabulator cells?"])[0]
    assert float(np.dot(answer["vector"], expected)) >= onnx_query.MIN_AGREEMENT


def test_a_failed_child_export_is_one_clear_error(tmp_path: Path):
    with pytest.raises(ValueError, match="the export process failed: .*no-such-model"):
        export_in_child(str(tmp_path / "no-such-model"), tmp_path)
