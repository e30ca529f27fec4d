"""The cards of the default model and its untrained baseline, rendered from the one results file.

Every figure comes from `default_model_results.json` (written by `bench/default_model.py`); the text around them is
here. `python -m contextembed.default_model > MODEL_CARD.md` writes the card the repository shows; the same card goes
into the cached checkpoint's `README.md`.
"""

from __future__ import annotations

import json
from importlib.resources import files

RESULTS_FILE = "default_model_results.json"
MINILM = "[all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2)"
SETS = {"recipes": "recipes", "pyfaq": "Python FAQ", "wikipacks": "wikipacks"}
METRICS = ("Document@1", "Answer@1", "Answer@10", "EvidenceRecall@10")
MODES = (("contextual", "late chunking"), ("independent", "each chunk alone"), ("whole-document", "whole document"))


def load_results() -> dict:
    """The default model's measured results (empty before the first measurement)."""
    resource = files("contextembed").joinpath(RESULTS_FILE)
    return json.loads(resource.read_text(encoding="utf-8")) if resource.is_file() else {}


def pct(value) -> str:
    """A fraction as a percentage with one decimal, `—` when missing.

    >>> pct(0.7071), pct(None)
    ('70.7', '—')
    """
    return "—" if value is None else f"{100 * value:.1f}"


def _get(results: dict, *keys):
    for key in keys:
        if not isinstance(results, dict) or key not in results:
            return None
        results = results[key]
    return results


def summary(results: dict, window_head_tokens: int) -> str:
    dims = results["recipe"]["matryoshka_dims"]
    leases = _get(results, "models", "default", "leases")
    leases = (f" On the README's six leases it puts the asked lease's copy of a clause first among six identical "
              f"copies for {leases['hits']} of {leases['questions']} questions (untrained: "
              f"{_get(results, 'models', 'untrained', 'leases', 'hits')}; chance: 5)." if leases else "")
    return (f"The default model of [contextembed](https://pypi.org/project/contextembed/): {MINILM} (BERT, 22.7M "
            "parameters, English) fine-tuned for contextual chunk embeddings on two CPU cores. "
            f"{dims[-1]}-d vectors (Matryoshka {'/'.join(map(str, dims))}), 512 tokens per window, the first "
            f"{window_head_tokens} tokens of a document carried into every later window.{leases} A small model: read the limitations before relying on it.")


def training(results: dict) -> str:
    """The recipe in a paragraph: its stages as `contextembed/recipes/default.json` has them (copied into the results
    file's `recipe` by bench/default_model.py), minutes as measured."""
    recipe = results["recipe"]
    first, second = recipe["stages"]  # the text below describes this recipe's two stages
    stages = {s["name"]: s for s in _get(results, "training", "stages") or []}
    minutes = " + ".join(f"{stages[s['name']]['minutes']:g}" for s in (first, second) if s["name"] in stages)
    bound = "at most " if _get(results, "training", "note") else ""
    timing = f" ({bound}{minutes} minutes on {results['training']['threads']} CPU threads)" if minutes else ""
    return ("`contextembed train --recipe default OUT --data training-data.jsonl` retrains it from the untrained "
            "baseline and seed "
            f"{recipe['seed']}, in two stages{timing}: {first['max_steps']} steps of L_doc + L_dist + "
            f"L_within + L_keep (LoRA rank {first['lora_rank']} on every linear layer and the separator "
            f"row), then {second['max_steps']} steps of L_mix, which teaches one pass what a second pass "
            "over each chunk alone adds. The data are families of near-identical copies of real text (Python, Perl "
            "and Debian documentation, man pages) that differ in a name, alias, version, author or a section's "
            "scope, plus recipes, doc sections and FAQ questions (`data_builders/training_data.py`).\n\nThe settings "
            "it keeps were chosen on generated validation families and, in early versions, on the shipped sets, so "
            "the figures below are not untouched tests." + reproduction(results))


def reproduction(results: dict) -> str:
    """What a rerun of the recipe gave: the packaged delta's tensors, and the shipped sets' figures."""
    reproduced = _get(results, "training", "reproduction")
    if not reproduced:
        return ""
    text = (f"\n\nRerun from the seed, the recipe gave {reproduced['equal']} of {reproduced['tensors']} tensors of the "
            f"packaged delta bit for bit (largest difference {reproduced['largest_difference']:.2g}; the packaged delta "
            "was trained before the recipe was one file, and the difference is not traced further)")
    rerun, shipped = reproduced.get("shipped") or {}, _get(results, "models", "default", "shipped") or {}
    gaps = [abs(rerun[name]["contextual"][metric] - shipped[name]["contextual"][metric])
            for name in SETS if name in rerun and name in shipped for metric in METRICS]
    if gaps:
        text += (f", and a model whose figures in the table below differ from the packaged one's by at most "
                 f"{100 * max(gaps):.1f} points")
    return text + "."


def results_table(results: dict) -> str:
    """Late chunking vs each chunk alone vs the whole document per shipped set, with the untrained baseline and
    int8 codes beside it; the plain-retrieval guard last."""
    default, untrained = _get(results, "models", "default") or {}, _get(results, "models", "untrained") or {}
    if "shipped" not in default:
        return "Not yet measured."
    lines = ["| set | metric | late chunking | each chunk alone | whole document | untrained, late chunking | "
             "int8 codes |", "|---|---|---|---|---|---|---|"]
    for name, label in SETS.items():
        for metric in METRICS:
            cells = [pct(_get(default, "shipped", name, mode, metric)) for mode, _ in MODES]
            cells += [pct(_get(untrained, "shipped", name, "contextual", metric)),
                      pct(_get(default, "int8", name, "contextual", metric))]
            lines.append(f"| {label} | {metric} | " + " | ".join(cells) + " |")
    guard = _get(default, "shipped", "wikiguard", "test", "ndcg@10")
    if guard is not None:
        base = _get(untrained, "shipped", "wikiguard", "test", "ndcg@10")
        lines.append(f"| wikiguard (plain retrieval guard) | nDCG@10 | — | — | {pct(guard)} | {pct(base)} | — |")
    return "\n".join(lines)


def results_section(results: dict) -> str:
    return ("Metrics in % (`contextembed evaluate`, exhaustive search over every chunk of a set; "
            "a document ranks by its best chunk). *recipes*: 160 Wikibooks recipes sharing steps word for word, "
            "asked by recipe; *Python FAQ*: 8 long pages (up to ~11k tokens, run in windows), 178 question headings; "
            "*wikipacks*: documents of four Wikipedia summaries where later sentences say only \"it\" or \"the "
            "film\"; *wikiguard*: plain retrieval, 2,000 summaries, one vector per document. Definitions: "
            "[docs/evaluation.md](https://github.com/contextembed/contextembed/blob/main/docs/evaluation.md).\n\n"
            + results_table(results) + "\n\nOn the Python FAQ, Answer@1 is near zero for every model: the chunk "
            "ranked first is almost always another paragraph of the asked page, not the one under its heading.\n\n"
            + validation_table(results))


def validation_table(results: dict) -> str:
    """Answer@1 on the generated and hand-written families that chose the recipe's settings: validation figures."""
    default = _get(results, "models", "default", "validation") or {}
    if not default:
        return ""
    overlap = _get(results, "measured", "validation", "window_overlap")
    windows = (f"; measured with windows overlapping by {overlap:g}, the default before windows came to abut, so "
               "the long families' figures are of those windows" if overlap else "")
    lines = [f"**Validation figures** (these families chose the recipe's settings; "
             f"`data_builders/training_data.py`{windows}):",
             "", "| validation family | queries | late chunking Answer@1 | each chunk alone | "
             "untrained, late chunking |",
             "|---|---|---|---|---|"]
    for name, measured in default.items():
        queries = _get(measured, "contextual", "queries")
        cells = [pct(_get(measured, "contextual", "Answer@1")), pct(_get(measured, "independent", "Answer@1")),
                 pct(_get(results, "models", "untrained", "validation", name, "contextual", "Answer@1"))]
        lines.append(f"| {name} | {queries if queries is not None else '—'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def limitations(results: dict) -> str:
    outside = _get(results, "independent_families") or {}
    seen = ""
    if outside:
        default, untrained = outside["default"], outside["untrained"]
        seen = (f" On document families none of the project's sets contain ({outside['source']}), Answer@1 is about "
                f"{pct(default['one pass'])}% inside one window and {pct(default['beyond'])}% beyond it (untrained: "
                f"{pct(untrained['one pass'])}% / {pct(untrained['beyond'])}%); by kind, a plainly named entity "
                f"{pct(default['named entity, one pass'])}% inside one window and "
                f"{pct(default['named entity, beyond'])}% beyond it, aliases, versions, conditions and pronouns near "
                "chance.")
    return "\n".join([
        "- **What it resolves:** which copy of a repeated sentence a query means when the copy's document names an "
        "entity plainly (an address, a product, a person), also beyond the first window thanks to the carried "
        "opening." + seen,
        "- **What it does not:** aliases, version numbers, conditions (\"these rules apply to ...\") and pronouns "
        "that point to the entity; and a document's identity can outweigh a chunk's own content, so a wrong "
        "sentence of the right document may rank above the answer.",
        "- **Validation figures are optimistic:** its settings were chosen on families made by the project's own "
        "generator; on independent text its figures are lower, as above. Measure on your own data.",
        "- Short chunks (a lone heading or clause number) carry mostly document context and can outscore the "
        "sentence under them: chunk so that headings stay with their text.",
        "- English only (MiniLM's vocabulary); 512 tokens per window; 384 dimensions.",
    ])


def model_index(results: dict, model: str = "default") -> list[dict]:
    """The Hub `model-index` rows: Answer@1/10 of late chunking per contextual set, nDCG@10 of the guard."""
    measured = _get(results, "models", model, "shipped") or {}
    rows = [{"dataset": name, "metric": f"{metric} (late chunking)", "value": round(100 * measured[name]["contextual"][metric], 1)}
            for name in SETS if name in measured for metric in ("Answer@1", "Answer@10")]
    guard = _get(measured, "wikiguard", "test", "ndcg@10")
    if guard is not None:
        rows.append({"dataset": "wikiguard", "metric": "nDCG@10", "value": round(100 * guard, 1)})
    return rows


def _fields(name: str, summary_text: str, results_text: str, limitations_text: str, load_args: str, rows) -> dict:
    return {"title": name, "summary": summary_text, "base_model": "sentence-transformers/all-MiniLM-L6-v2",
            "license": "apache-2.0", "language": ["en"], "model_index": (name, rows) if rows else None,
            "model_ref": f"str(named_model_path({name!r}))",
            "ref_import": "from contextembed.default_model import named_model_path\n", "load_args": load_args,
            "results": results_text, "limitations": limitations_text}


def default_card_fields(name: str, window_head_tokens: int) -> dict:
    """How the default model's card differs from a generic checkpoint's (see `contextembed.model_card`)."""
    results = load_results()
    return {**_fields(name, summary(results, window_head_tokens), results_section(results),
                      limitations(results), "", model_index(results)), "training": training(results)}


def baseline_card_fields(name: str, window_head_tokens: int) -> dict:
    summary_text = (f"The **untrained baseline** of contextembed's default model: {MINILM} run for late chunking "
                    "(a `<|chunk_sep|>` token added, no projection, 384-d vectors, 512 tokens per window, the first "
                    f"{window_head_tokens} carried into later ones), **not trained for contextual retrieval**. "
                    f"Load it with `contextembed.load({name!r})`; the default model is this baseline fine-tuned.")
    limits = ("- Not trained for contextual retrieval: chunk vectors see their document only through MiniLM's own "
              "attention.\n- English only; 512 tokens per window; 384 dimensions, no Matryoshka cuts.")
    results = load_results()
    return _fields(name, summary_text, "See the default model's card: its results table has a column "
                   "for this baseline.", limits, repr(name), model_index(results, "untrained"))
