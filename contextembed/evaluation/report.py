"""Markdown tables for evaluation results (the JSON files hold the same numbers)."""

from __future__ import annotations

CONTEXT_BENCH_COLUMNS = ("Document@1", "Document@10", "Answer@1", "Answer@10", "EvidenceRecall@10",
                         "AllEvidence@10")


def _cell(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def context_bench_table(results: dict, columns=CONTEXT_BENCH_COLUMNS) -> str:
    """One row per mode, metrics in percent; '—' where a mode does not define a metric.

    >>> print(context_bench_table({"contextual": {"Document@1": 0.5, "queries": 2}}, columns=("Document@1",)))
    | embedding | Document@1 |
    |---|---|
    | contextual | 50.0 |
    """
    lines = ["| embedding | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for mode, metrics in results.items():
        lines.append(f"| {mode} | " + " | ".join(_cell(metrics.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def ties_line(results: dict) -> str:
    """How many queries a score tie decided (`tied`), per mode, in one sentence.

    >>> ties_line({"contextual": {"tied": 0.0, "queries": 4}, "independent": {"tied": 0.5, "queries": 4}})
    'Ties (equal scores, the lower document id ranked first) decided Document@1 or Answer@1 for 0 of 4 queries (contextual), 2 of 4 (independent).'
    """
    parts = [f"{round(m['tied'] * m['queries'])} of {m['queries']}" + (" queries" if i == 0 else "") + f" ({mode})"
             for i, (mode, m) in enumerate((mode, m) for mode, m in results.items() if "tied" in m)]
    return (f"Ties (equal scores, the lower document id ranked first) decided Document@1 or "
            f"Answer@1 for {', '.join(parts)}.")


def copy_line(results: dict) -> str:
    """What Copy@1 rests on, in one sentence.

    >>> print(copy_line({"contextual": {"Copy@1": 1.0, "copy_queries": 8, "queries": 10}}))
    Copy@1: for the 8 of 10 queries whose answer sentence also occurs word for word elsewhere (in copies of one document that differ in another part, or a line that several documents share), whether the asked document's sentence ranks above its copies; only context can separate them, and a sentence embedded alone ties with its copies (the lowest document id wins).
    """
    metrics = next(m for m in results.values() if "copy_queries" in m)
    return (f"Copy@1: for the {metrics['copy_queries']} of {metrics['queries']} queries whose answer sentence also "
            "occurs word for word elsewhere (in copies of one document that differ in another part, or a line that "
            "several documents share), whether the asked document's sentence ranks above its copies; only context "
            "can separate them, and a sentence embedded alone ties with its copies (the lowest document id wins).")


MISS_CAUSES = (("WrongSentence@1", "another sentence of the asked document"),
               ("WrongCopy@1", "the answer's words in a document not asked"),
               ("WrongDocument@1", "another document's sentence"))


def misses_line(results: dict) -> str | None:
    """Where Answer@1 misses go (`miss_causes`), per mode, in one sentence; None when no mode has them.

    >>> print(misses_line({"contextual": {"Answer@1": 0.5, "WrongSentence@1": 0.25, "WrongCopy@1": 0.25,
    ...                                   "WrongDocument@1": 0.0, "EvidenceFirst@1": 0.125}}))
    Where Answer@1 misses go (the sentence ranked first instead, % of queries): contextual 25.0 another sentence of the asked document, 25.0 the answer's words in a document not asked, 0.0 another document's sentence (the query's evidence first: 12.5).
    """
    parts = [f"{mode} " + ", ".join(f"{_cell(metrics[key])} {what}" for key, what in MISS_CAUSES)
             + (f" (the query's evidence first: {_cell(metrics['EvidenceFirst@1'])})"
                if metrics.get("EvidenceFirst@1") else "")
             for mode, metrics in results.items() if all(key in metrics for key, _ in MISS_CAUSES)]
    if not parts:
        return None
    return f"Where Answer@1 misses go (the sentence ranked first instead, % of queries): {'; '.join(parts)}."


def ceiling_line(results: dict, k: int) -> str | None:
    """What an embedding that ranks every accepted answer above the rest of d* can reach in the evidence metrics at
    `k` (`answers_first_ceiling`), per set and per capability below 100; None where nothing is capped.

    >>> capped = {"EvidenceRecallCeiling@10": 0.75, "AllEvidenceCeiling@10": 0.5}
    >>> print(ceiling_line({"contextual": {**capped, "by_capability": {"lists": capped}}}, 10))
    Answers first: an embedding that ranks every accepted answer sentence above the rest of d* reaches at most EvidenceRecall@10 75.0 and AllEvidence@10 50.0 here (lists: 75.0 / 50.0); the answers left after the top one take the places the evidence would need.
    >>> ceiling_line({"contextual": {"EvidenceRecallCeiling@10": 1.0, "AllEvidenceCeiling@10": 1.0}}, 10) is None
    True
    """
    recall, complete = f"EvidenceRecallCeiling@{k}", f"AllEvidenceCeiling@{k}"
    metrics = next((m for m in results.values() if recall in m), None)
    if metrics is None or metrics[recall] >= 1.0:
        return None
    parts = [f"{cap}: {_cell(values[recall])} / {_cell(values[complete])}"
             for cap, values in metrics.get("by_capability", {}).items() if values.get(recall, 1.0) < 1.0]
    return (f"Answers first: an embedding that ranks every accepted answer sentence above the rest of d* reaches at "
            f"most EvidenceRecall@{k} {_cell(metrics[recall])} and AllEvidence@{k} {_cell(metrics[complete])} here"
            + (f" ({'; '.join(parts)})" if parts else "")
            + "; the answers left after the top one take the places the evidence would need.")


def capability_table(results: dict, metrics=("Answer@1", "Answer@10")) -> str:
    """Each of `metrics` per capability (rows) and mode (columns), for the modes that score sentences."""
    modes = [m for m in results if "by_capability" in results[m] and any(
        metric in results[m] for metric in metrics)]
    capabilities = sorted({c for m in modes for c in results[m]["by_capability"]})
    header = [f"{m} {metric}" for metric in metrics for m in modes]
    lines = ["| capability | queries | " + " | ".join(header) + " |", "|---" * (len(header) + 2) + "|"]
    for cap in capabilities:
        count = results[modes[0]]["by_capability"][cap]["queries"]
        cells = [_cell(results[m]["by_capability"][cap].get(metric)) for metric in metrics for m in modes]
        lines.append(f"| {cap} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def conteb_table(results: dict) -> str:
    modes = list(results)
    tasks = list(results[modes[0]]["tasks"])
    metric = next(iter(results[modes[0]]["mean"]))
    header = "| task | " + " | ".join(f"{m} {metric}" for m in modes) + " | " + " | ".join(
        f"{m} doc-level" for m in modes) + " |"
    lines = [header, "|---" * (2 * len(modes) + 1) + "|"]
    doc_metric = f"doc_{metric}"
    for task in [*tasks, "mean"]:
        rows = [results[m]["tasks"][task] if task != "mean" else results[m]["mean"] for m in modes]
        lines.append(f"| {task} | " + " | ".join(_cell(r[metric]) for r in rows) + " | "
                     + " | ".join(_cell(r[doc_metric]) for r in rows) + " |")
    return "\n".join(lines)


def q2d_table(results: dict) -> str:
    metrics = [m for m in next(iter(results.values())) if "@" in m]
    lines = ["| relevance set | queries | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 2) + "|"]
    for name, values in results.items():
        lines.append(f"| {name} | {values['queries']} | " + " | ".join(_cell(values[m]) for m in metrics) + " |")
    return "\n".join(lines)
