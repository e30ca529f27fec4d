"""Writing a checkpoint that is at once a transformers and a sentence-transformers checkpoint.

The sentence-transformers side lists only built-in modules (`Transformer` -> `Pooling(mean)` ->
`Normalize`), so `SentenceTransformer(path)` loads it with `trust_remote_code=False` once
`import contextembed` has registered the model and processor with the Auto classes.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from contextembed.modeling import ContextEmbedModel, ContextEmbedProcessor

logger = logging.getLogger(__name__)

MIN_PACKAGE_VERSION = "0.1.0"

# The Normalize path that both sentence-transformers 5.7 and 6.x import (6.x writes a path 5.7 lacks).
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
    {
        "idx": 1,
        "name": "1",
        "path": "1_Pooling",
        "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    },
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.sentence_transformer.modules.normalize.Normalize",
    },
]

# The ST `Transformer` module calls our forward and keeps `chunk_embeddings` as `token_embeddings`;
# flash-attention unpadding must stay off because the model needs its padded chunk layout.
SENTENCE_BERT_CONFIG = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "chunk_embeddings"}},
    "module_output_name": "token_embeddings",
    "unpad_inputs": False,
}


PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth", "model.ckpt")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer.model", "vocab.json", "spiece.model")


def read_json_file(file: str | Path) -> dict:
    """A JSON object from `file`; anything else (missing, truncated, not JSON, not an object) is a `ValueError`
    that names the file."""
    file = Path(file)
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ValueError(f"{str(file)!r} is missing") from error
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {str(file)!r} as JSON (is it damaged or truncated?): {error}") from error
    if not isinstance(value, dict):
        raise ValueError(f"{str(file)!r} must hold a JSON object, got a {type(value).__name__}")
    return value


def read_source_checkpoint(source: Path, model_types, name: str, output_dir=None, overwrite: bool = False) -> dict:
    """The `config.json` of a checkpoint to convert, once its files are checked and its `model_type` is one of
    `model_types` (`name` says which family, for the error); `output_dir` is checked first, so a conversion refuses
    a bad target before reading any weights."""
    if output_dir is not None:
        check_checkpoint_target(output_dir, overwrite)
    if not (source / "config.json").is_file():
        raise ValueError(f"{source} has no config.json: not a checkpoint folder")
    raw = check_checkpoint_files(source)
    if raw.get("model_type") not in model_types:
        raise ValueError(f"{source} is not a {name} checkpoint: config.json has model_type="
                         f"{raw.get('model_type')!r}, expected one of {model_types}")
    return raw


def check_checkpoint_files(folder: str | Path, *, weights: bool = True) -> dict:
    """Check the files a checkpoint folder must have before any library reads them, each problem a `ValueError`
    naming its file; returns the parsed `config.json`.

    - `config.json` and the tokenizer's JSON files must parse;
    - a tokenizer must be there (`tokenizer.json`, or a vocabulary file);
    - with `weights=True`, the weights must be safetensors: pickled weights (`pytorch_model.bin`) are refused,
      because unpickling can run any code, so contextembed never offers to load them.
    """
    folder = Path(folder)
    config = read_json_file(folder / "config.json")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "processor_config.json"):
        if (folder / name).is_file():
            read_json_file(folder / name)
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(f"{str(folder)!r} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}): a checkpoint "
                         "folder holds its tokenizer beside its weights")
    has_safetensors = (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()
    if weights and not has_safetensors:
        pickled = [name for name in PICKLED_WEIGHTS if (folder / name).is_file()]
        if pickled:
            raise ValueError(f"{str(folder)!r} holds its weights as a pickle ({pickled[0]}): contextembed reads "
                             "safetensors only, since loading a pickle can run arbitrary code. Convert the weights "
                             "to model.safetensors where you trust their source (safetensors.torch.save_file)")
        raise ValueError(f"{str(folder)!r} has no model.safetensors: not a complete checkpoint")
    return config


def is_checkpoint(path: str | Path) -> bool:
    """Whether `path` holds a contextembed checkpoint (a `config.json` of model type `contextembed`)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "contextembed"


def check_output_folder(output_dir: str | Path, holds, what: str, overwrite: bool = False) -> None:
    """Raise a `ValueError` unless `what` (an index, a checkpoint) may be written to `output_dir`: a new or empty
    folder, or (with `overwrite=True`) one for which `holds(folder)` says it already holds one. Anything else in the
    way (a file, a folder of other things such as a user's own README.md or config.json) is never written into."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(f"the output path {str(output_dir)!r} is a file: pass a folder for the {what}")
    if output_dir.is_dir() and any(output_dir.iterdir()):
        if not holds(output_dir):
            raise ValueError(f"{str(output_dir)!r} is a non-empty folder that is not {_article(what)} {what}: pass a "
                             "new or empty folder (nothing in it was changed)")
        if not overwrite:
            raise ValueError(f"{str(output_dir)!r} already holds {_article(what)} {what}: pass --overwrite "
                             "(overwrite=True) to replace it")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def check_checkpoint_target(output_dir: str | Path, overwrite: bool = False) -> None:
    """`check_output_folder` for a contextembed checkpoint."""
    check_output_folder(output_dir, is_checkpoint, "contextembed checkpoint", overwrite)


def save_checkpoint(
    model: ContextEmbedModel, processor: ContextEmbedProcessor, output_dir: str | Path, card: dict | None = None
) -> Path:
    """Save model, processor, sentence-transformers files and the model card into `output_dir`.

    `card` holds model-card fields for `render_model_card` (title, summary, base_model, results, ...).
    """
    from contextembed.model_card import render_model_card

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    # The backbone's config remembers the folder it was loaded from: a path on the build machine, not for the Hub.
    model.config.text_config._name_or_path = ""
    model.save_pretrained(output_dir)
    processor.save_pretrained(output_dir)
    # pplx-embed-v2-context's own `encode` embeds documents: a plain ST `encode` does too (queries: `encode_query`).
    default_prompt = "document" if getattr(processor, "input_layout", None) == "pplx-v2" else None
    write_sentence_transformers_files(output_dir, model.config, default_prompt_name=default_prompt)
    (output_dir / "README.md").write_text(render_model_card(model.config, processor, **(card or {})), encoding="utf-8")
    make_readable(output_dir)
    return output_dir


def make_readable(folder: Path) -> None:
    """Give a checkpoint folder the permissions of a normal folder under the umask (writers and temporary folders
    leave some files 0600 and folders 0700, which a shared cache or an upload then cannot read)."""
    umask = os.umask(0o022)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def write_sentence_transformers_files(output_dir: Path, config, default_prompt_name: str | None = None) -> None:
    """`modules.json`, `sentence_bert_config.json`, the Pooling and Normalize folders and the ST config (whose
    `default_prompt_name` is the prompt a plain `encode` uses)."""
    dim = config.output_dim or config.embedding_dim
    _write_json(output_dir / "modules.json", ST_MODULES)
    _write_json(output_dir / "sentence_bert_config.json", SENTENCE_BERT_CONFIG)
    # include_prompt: ST counts a prompt in tokens while our mask counts chunks, so excluding it
    # would blank out whole chunks.
    _write_json(
        output_dir / "1_Pooling" / "config.json",
        {"embedding_dimension": dim, "pooling_mode": "mean", "include_prompt": True},
    )
    _write_json(output_dir / "2_Normalize" / "config.json", {})
    _write_json(
        output_dir / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": {"query": config.query_prefix, "document": config.document_prefix},
            "default_prompt_name": default_prompt_name,
            "similarity_fn_name": "cosine",
            "requirements": st_requirements(),
        },
    )


def st_requirements() -> dict:
    """The `requirements` block of `config_sentence_transformers.json` (checked by sentence-transformers >= 6)."""
    return {"contextembed": {"specifier": f">={MIN_PACKAGE_VERSION}",
                             "reason": "the model and processor are registered by `import contextembed`"}}


def _write_json(path: Path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
