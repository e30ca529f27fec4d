"""sentence-transformers helpers: list-of-chunks documents through the built-in `Transformer` module.

sentence-transformers reads a bare list of 3+ strings as an unsupported input and a list of two as
a text pair; `{"text": [chunks]}` reaches our processor unchanged, so that is the form we hand it.
"""

from __future__ import annotations

import json
from pathlib import Path

from sentence_transformers import SentenceTransformer


def as_chunked(documents):
    """Wrap each list-of-chunks document as `{"text": chunks}`; strings and dicts pass through.

    >>> as_chunked([["c1", "c2", "c3"], "plain", ("a", "b")])
    [{'text': ['c1', 'c2', 'c3']}, 'plain', {'text': ['a', 'b']}]
    """
    if isinstance(documents, (str, dict)):
        return documents
    return [{"text": list(doc)} if isinstance(doc, (list, tuple)) else doc for doc in documents]


class ContextEmbedSentenceTransformer(SentenceTransformer):
    """A `SentenceTransformer` that also takes `list[list[str]]` documents (one list of chunks each).

    Two public methods are overridden: `preprocess`, and `save`, so that a re-saved folder stays what
    `contextembed` writes (see `save`); checkpoints stay plain sentence-transformers checkpoints.
    """

    def preprocess(self, inputs, prompt: str | None = None, **kwargs):
        return super().preprocess(as_chunked(inputs), prompt=prompt, **kwargs)

    def save(self, path: str, *args, **kwargs) -> None:
        """`SentenceTransformer.save`, then the two things sentence-transformers 6 changes put back: the module paths
        that 5.7 imports too (6.x writes `sentence_transformers.base.modules.normalize.Normalize`, which 5.7 lacks)
        and the `requirements` block (6.x reads it on load but does not write it back), so the folder still says it
        needs `contextembed` and still loads in sentence-transformers 5.7; files are made readable by others."""
        from contextembed.checkpoint import make_readable

        super().save(path, *args, **kwargs)
        restore_portable_files(Path(path))
        make_readable(Path(path))  # transformers writes the weights 0600


def restore_portable_files(path: Path) -> None:
    """Rewrite `modules.json` and the `requirements` of `config_sentence_transformers.json` in a folder that
    sentence-transformers saved from a contextembed checkpoint (the Transformer -> Pooling -> Normalize stack)."""
    from contextembed.checkpoint import ST_MODULES, st_requirements

    modules_file, config_file = path / "modules.json", path / "config_sentence_transformers.json"
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    portable = {entry["type"].rsplit(".", 1)[1]: entry["type"] for entry in ST_MODULES}
    for entry in modules:
        entry["type"] = portable.get(entry["type"].rsplit(".", 1)[1], entry["type"])
    modules_file.write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["requirements"] = {**st_requirements(), **config.get("requirements", {})}
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
