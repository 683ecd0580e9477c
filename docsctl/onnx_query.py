"""Query vectors through ONNX Runtime: the configured model, exported once from torch, run without torch.

A query is a handful of tokens, and torch spends most of its ~10 ms on one such input in framework
overhead; ONNX Runtime answers 2-3x faster on one thread (bench/README.md, "Performance"). A process
that finds the export in the cache never imports torch, so `docsctl serve` stays small; one that does
not find it and has not loaded torch itself has a child process make the export
(docsctl.embedding.export_in_child), so that it stays small all the same. This module imports nothing
from docsctl: the Embedder hands it what it needs.

The export is kept under `<cache_dir>/models/`, named by a key of the model folder's files (names,
sizes, modification times), so a changed model is exported again. An export is kept only when its
vectors agree with torch's on `PROBES` (tokenizer included), so indexing (torch) and queries (ONNX)
share one vector space.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

EXPORT_FORMAT = 1
# Texts the export must reproduce: short, long (truncated), punctuated, code, non-ASCII.
PROBES = (
    "probe",
    "How do I format Tabulator cells?",
    "pn.widgets.Tabulator(df, formatters={'x': NumberFormatter(format='0.00')})",
    "Ångström-scale résumé of the surface command: " + "surface enclose #1 resolution 4; " * 60,
)
MIN_AGREEMENT = 0.9999  # least cosine between an ONNX and a torch vector of one probe


def export_key(model_path: str) -> str:
    """Names the export of `model_path`: its files' names, sizes and modification times, or its name."""
    folder = Path(model_path)
    parts = [f"format {EXPORT_FORMAT}", str(folder.resolve()) if folder.is_dir() else model_path]
    if folder.is_dir():
        for file in sorted(path for path in folder.rglob("*") if path.is_file()):
            stat = file.stat()
            parts.append(f"{file.relative_to(folder)} {stat.st_size} {stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


class OnnxQueryEncoder:
    """One text -> its normalized vector, with the exported model and the model's own fast tokenizer."""

    def __init__(self, onnx_path: Path, tokenizer_path: Path, max_tokens: int, lowercase: bool) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        # One query at a time: a second thread's synchronisation costs more than it saves on shared cores.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._inputs = [item.name for item in self._session.get_inputs()]
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_tokens)
        self._lowercase = lowercase

    def encode(self, text: str) -> np.ndarray:
        text = text.strip()  # as sentence-transformers does before tokenizing
        encoding = self._tokenizer.encode(text.lower() if self._lowercase else text)
        features = {
            "input_ids": encoding.ids,
            "attention_mask": encoding.attention_mask,
            "token_type_ids": encoding.type_ids,
        }
        feed = {name: np.asarray([features[name]], dtype=np.int64) for name in self._inputs}
        vector = np.asarray(self._session.run(None, feed)[0][0], dtype=np.float32)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)


def _paths(folder: Path, key: str) -> tuple[Path, Path, Path]:
    return folder / f"{key}.onnx", folder / f"{key}.tokenizer.json", folder / f"{key}.json"


def load(folder: Path, key: str) -> OnnxQueryEncoder | None:
    """The encoder exported under `key`, or None when there is none."""
    onnx_path, tokenizer_path, settings_path = _paths(folder, key)
    if not (onnx_path.is_file() and tokenizer_path.is_file() and settings_path.is_file()):
        return None
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    return OnnxQueryEncoder(onnx_path, tokenizer_path, int(settings["max_tokens"]), bool(settings["lowercase"]))


def export(model: Any, folder: Path, key: str, torch_encode: Callable[[Sequence[str]], np.ndarray]) -> OnnxQueryEncoder:
    """Export a loaded SentenceTransformer under `key`; raise ValueError when the export does not
    reproduce `torch_encode` on PROBES (nothing is kept then)."""
    import torch

    transformer = model[0]
    tokenizer = getattr(transformer, "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "backend_tokenizer"):
        raise ValueError("the model has no fast tokenizer")
    preprocess = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers < 6
    features = preprocess(["probe"])
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in features]

    class Pooled(torch.nn.Module):  # the whole sentence-transformers pipeline: transformer, pooling, ...
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, inputs, strict=True)))["sentence_embedding"]

    folder.mkdir(parents=True, exist_ok=True)
    onnx_path, tokenizer_path, settings_path = _paths(folder, key)
    # Another process may be exporting the same model: each writes its own files, the last rename wins.
    partial = [
        path.with_name(f"{path.name}.{os.getpid()}.partial") for path in (onnx_path, tokenizer_path, settings_path)
    ]
    try:
        # The tracer warns about shape checks it freezes; they hold for any batch of one or more texts.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Pooled().eval(),
                tuple(features[name] for name in names),
                str(partial[0]),
                input_names=names,
                output_names=["embedding"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names},
                dynamo=False,
            )
        tokenizer.backend_tokenizer.save(str(partial[1]))
        settings = {"max_tokens": model.max_seq_length, "lowercase": bool(getattr(transformer, "do_lower_case", False))}
        partial[2].write_text(json.dumps(settings), encoding="utf-8")
        encoder = OnnxQueryEncoder(partial[0], partial[1], settings["max_tokens"], settings["lowercase"])
        expected = torch_encode(PROBES)
        agreement = min(float(encoder.encode(text) @ vector) for text, vector in zip(PROBES, expected, strict=True))
        if agreement < MIN_AGREEMENT:
            raise ValueError(f"the ONNX export disagrees with torch (cosine {agreement:.6f})")
        for source, target in zip(partial, (onnx_path, tokenizer_path, settings_path), strict=True):
            source.replace(target)
    finally:
        for path in partial:
            path.unlink(missing_ok=True)
    return load(folder, key) or encoder
