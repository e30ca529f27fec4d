"""Render the model card (`MODEL_CARD.md` / a checkpoint's `README.md`) with a checkpoint's own facts."""

from __future__ import annotations

import json
from importlib.resources import files
from string import Template

DEFAULT_SUMMARY = (
    "A contextual chunk embedding checkpoint built with "
    "[contextembed](https://pypi.org/project/contextembed/): late chunking over a wrapped backbone."
)
DEFAULT_LIMITATIONS = (
    "The separator token and any projection added by `contextembed build` are untrained until the model is "
    "fine-tuned for contextual retrieval; measure on your own data before relying on it."
)
NO_RESULTS = "No evaluation results have been recorded for this checkpoint."


def render_model_card(
    config,
    processor=None,
    *,
    model_id: str = "path/to/checkpoint",
    model_ref: str | None = None,
    ref_import: str = "",
    load_args: str | None = None,
    title: str = "contextembed checkpoint",
    summary: str = DEFAULT_SUMMARY,
    base_model: str | None = None,
    license: str | None = None,
    language: str | list[str] | None = None,
    model_index: tuple[str, list[dict]] | None = None,
    results: str = NO_RESULTS,
    limitations: str = DEFAULT_LIMITATIONS,
    training: str = "",
) -> str:
    """Fill the card template from a `ContextEmbedConfig` (and its processor, for the special tokens).

    `training` (a paragraph) becomes a Training section. `model_id` is the Hub id or path shown in the snippets;
    `model_ref` (a Python expression), `ref_import`
    and `load_args` override how the snippets refer to the checkpoint. `base_model`, `license` and `language` go
    into the card's YAML metadata only when given (the Hub reads them; a guessed value would be wrong).
    """
    text_config = config.text_config
    dim = config.output_dim or config.embedding_dim
    wrapping = "none"
    if processor is not None:
        lead, tail = processor.special_tokens_around()
        tokenizer = processor.tokenizer
        names = tokenizer.convert_ids_to_tokens(lead) + ["…"] + tokenizer.convert_ids_to_tokens(tail)
        wrapping = " ".join(f"`{n}`" if n != "…" else n for n in names) if lead or tail else "none"
    values = {
        "metadata": card_metadata(base_model=base_model, license=license, language=language,
                                  model_index=model_index),
        "title": title,
        "summary": summary,
        "model_ref": model_ref or repr(model_id).replace("'", '"'),
        "ref_import": ref_import,
        "load_args": repr(model_id).replace("'", '"') if load_args is None else load_args,
        "chunk_token": config.chunk_token,
        "chunk_token_id": config.chunk_token_id,
        "dim": dim,
        "backbone": text_config.model_type,
        "hidden_size": text_config.hidden_size,
        "layers": getattr(text_config, "num_hidden_layers", "?"),
        "attention": "bidirectional" if config.bidirectional else "as the backbone",
        "query_prefix": _show(config.query_prefix),
        "document_prefix": _show(config.document_prefix),
        "wrapping": wrapping,
        "projection": (
            "none (identity): chunk vectors have the backbone's hidden size"
            if config.projection_dim is None
            else f"linear {text_config.hidden_size} → {config.projection_dim}, no bias, kept in fp32"
            + (", then tanh" if config.head_activation == "tanh" else "")
        ),
        "matryoshka": ", ".join(str(d) for d in config.matryoshka_dims),
        "normalization": "L2 after the Matryoshka cut" if config.normalize else "none",
        "window": config.max_seq_length,
        "overlap": ("consecutive windows abut, none of a window's text repeated in the next" if not config.window_overlap
                    else f"consecutive windows share {config.window_overlap:g} of a window's text"),
        "head_tokens": config.window_head_tokens,
        "pooling": _pooling(config, processor),
        "int8": _int8(config),
        "precision": config.default_precision,
        "results": results,
        "limitations": limitations,
        "training": f"## Training\n\n{training}\n\n" if training else "",
    }
    template = Template(files("contextembed").joinpath("model_card_template.md").read_text(encoding="utf-8"))
    return template.substitute(values)


def card_metadata(*, base_model: str | None = None, license: str | None = None,
                  language: str | list[str] | None = None, model_index: tuple[str, list[dict]] | None = None) -> str:
    """The optional YAML lines of the card's metadata block, each only when known.

    `model_index` is `(model name, [{"dataset", "metric", "value"}, ...])`: measured results, as the Hub's
    `model-index` (retrieval task, one entry per dataset).

    >>> print(card_metadata(base_model="org/model", license="mit", language=["en", "de"]), end="")
    license: mit
    base_model: org/model
    language:
    - en
    - de
    >>> card_metadata()
    ''
    """
    lines = []
    for key, value in (("license", license), ("base_model", base_model)):
        if value is not None:
            if not isinstance(value, str) or not value.strip() or "\n" in value:
                raise ValueError(f"{key} must be a non-empty single-line string, got {value!r}")
            lines.append(f"{key}: {value.strip()}")
    if language is not None:
        languages = [language] if isinstance(language, str) else list(language)
        if not languages or not all(isinstance(code, str) and code.strip().replace("-", "").isalnum()
                                    for code in languages):
            raise ValueError(f"language must be language codes such as 'en' or 'zh-Hans', got {language!r}")
        lines += ["language:", *(f"- {code.strip()}" for code in languages)]
    if model_index is not None:
        name, rows = model_index
        lines += ["model-index:", f"- name: {json.dumps(name)}", "  results:"]
        for dataset in dict.fromkeys(row["dataset"] for row in rows):
            lines += ["  - task:", "      type: retrieval", "    dataset:",
                      f"      name: {json.dumps(f'contextembed {dataset} (shipped evaluation set)')}",
                      f"      type: {json.dumps(f'contextembed/{dataset}')}", "    metrics:"]
            for row in (r for r in rows if r["dataset"] == dataset):
                kind = row["metric"].split(" ")[0].lower().replace("@", "_at_")
                lines += [f"    - type: {json.dumps(kind)}", f"      value: {float(row['value'])}",
                          f"      name: {json.dumps(row['metric'])}"]
    return "".join(line + "\n" for line in lines)


def _pooling(config, processor) -> str:
    if getattr(processor, "input_layout", "contextembed") == "pplx-v2":
        return ("a query: the mean of all its tokens' final hidden states, the query prefix token included; a document: "
                "the document prefix and the chunks joined by the separator, tokenised once, and each chunk the mean "
                "of the tokens that overlap its characters (prefix and separators excluded); computed in fp32")
    return ("mean of each chunk's final hidden states; prefix, separator and special tokens belong to no chunk; "
            "computed in fp32")


def _int8(config) -> str:
    """How the checkpoint codes int8, in words (its `int8_scheme`).

    >>> from types import SimpleNamespace
    >>> _int8(SimpleNamespace(int8_scheme="bounded", int8_clip_sigmas=5.0))
    'round(x * 127) of the unnormalised output x (already in (-1, 1) after the tanh), the published codes'
    """
    if config.int8_scheme == "tanh":
        return "round(tanh(x) * 127) of the unnormalised vector x (pplx-embed-context-v1's scheme)"
    if config.int8_scheme == "bounded":
        return "round(x * 127) of the unnormalised output x (already in (-1, 1) after the tanh), the published codes"
    return (f"deterministic, stored in the config: a unit vector of size *d* is coded as "
            f"`clip(round(x * 127 * sqrt(d) / {config.int8_clip_sigmas}), -127, 127)`")


def _show(prefix: str) -> str:
    return f"`{prefix!r}`" if prefix else "none (empty string)"
