"""Running an evaluation over several datasets, each with the protocol of its layout, and writing the results.

`evaluate_datasets` is what `contextembed evaluate` calls; it knows datasets and protocols, not the command line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from contextembed.evaluation import distance, loaders, protocols, report
from contextembed.evaluation.context_bench import run_context_bench
from contextembed.modeling import check_count

logger = logging.getLogger(__name__)


def evaluate_datasets(model, datasets: Mapping[str, tuple[Path, str]], *, ks: Sequence[int] = (1, 10),
                      precision: str = "float32", max_tokens: int = 512, chunker=None, batch_size: int = 32,
                      show_progress_bar: bool | None = None, store=None, ann: bool = False,
                      local_mix: float = 0.0) -> tuple[dict, str]:
    """Score `model` on each `{name: (folder, layout)}`; returns the results by dataset and their Markdown tables.

    context-bench folders run late chunking vs each sentence alone vs one vector per document at `ks` and
    `precision` (late chunking with `encode_documents`' `local_mix`), with `by_capability` and `by_distance`
    breakdowns; ConTEB folders the ConTEB protocol; BEIR folders the Q2D-Web protocol (truncated to `max_tokens`,
    documents split by `chunker` when given; also retrieved through `store`, exact or by its ANN index with `ann`).
    """
    if store is not None and any(layout != "beir" for _, layout in datasets.values()):
        raise ValueError("retrieval through a store is measured on first-stage (BEIR/Q2D layout) datasets: "
                         "pass --format beir")
    for k in ks:
        check_count(k, "every k")
    options = {"batch_size": batch_size, "show_progress_bar": show_progress_bar}
    ks = sorted(set(ks))
    results, tables = {}, []
    for name, (folder, layout) in datasets.items():
        if layout == "context-bench":
            documents, queries = loaders.load_context_bench(folder)
            groupings = distance_groupings(model, documents, queries)
            results[name] = run_context_bench(model, documents, queries, ks=ks, precision=precision,
                                              local_mix=local_mix, groupings=groupings, **options)
            copies = ["Copy@1"] if any("Copy@1" in r for r in results[name].values()) else []
            columns = [f"{m}@{k}" for m in ("Document", "Answer", "EvidenceRecall", "AllEvidence") for k in ks]
            table = (report.context_bench_table(results[name], columns + copies) + "\n\n"
                     + report.ties_line(results[name]))
            if copies:
                table += "\n\n" + report.copy_line(results[name])
            misses = report.misses_line(results[name])
            if misses:
                table += "\n\n" + misses
            if any("by_capability" in r for r in results[name].values()):
                table += "\n\n" + report.capability_table(results[name], [f"Answer@{k}" for k in ks]
                                                             + [f"EvidenceRecall@{ks[-1]}"] + copies)
            ceiling = report.ceiling_line(results[name], ks[-1])
            if ceiling:
                table += "\n\n" + ceiling
        elif layout == "conteb":
            folders = [folder] if any(folder.glob("documents.*")) else sorted(p for p in folder.iterdir() if p.is_dir())
            results[name] = protocols.run_conteb(model, [loaders.load_conteb_task(f) for f in folders], **options)
            table = report.conteb_table(results[name])
        else:
            results[name] = protocols.run_q2d(model, loaders.load_beir(folder), max_tokens=max_tokens,
                                              chunker=chunker, store=store, ann=ann, **options)
            table = report.q2d_table(results[name])
        tables.append(f"#### {name}\n\n{table}")
    return results, "\n\n".join(tables)


def distance_setup(model) -> dict | None:
    """How `by_distance` is measured for `model`: its window and window head, the unit, the buckets; None for a
    model without a `ContextEmbedProcessor` (no tokens to count)."""
    if getattr(model, "processor", None) is None:
        return None
    window, head = model.config.max_seq_length, getattr(model.config, "window_head_tokens", 0) or 0
    return {"unit": "tokens of the model's tokenizer strictly between the answer sentence and its nearest evidence "
                    "sentence in the document as the model reads it (chunk separators included)",
            "max_seq_length": window, "window_head_tokens": head, "buckets": distance.distance_buckets(window, head)}


def distance_groupings(model, documents, queries) -> dict:
    """`run_context_bench`'s `groupings` for the `by_distance` breakdown; empty when `distance_setup` is None."""
    setup = distance_setup(model)
    if setup is None:
        logger.info("by_distance left out: the model has no ContextEmbedProcessor to count tokens with")
        return {}
    labels = distance.distance_labels(documents, queries, model.processor, setup["max_seq_length"],
                                      setup["window_head_tokens"])
    return {"by_distance": (labels, setup["buckets"])}


def write_results(out: str | Path, payload: dict, markdown: str) -> tuple[Path, Path]:
    """`results.json` (the payload) and `results.md` (the Markdown) in the folder `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    (out / "results.md").write_text(markdown + "\n", encoding="utf-8")
    return out / "results.json", out / "results.md"
