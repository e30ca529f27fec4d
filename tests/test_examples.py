"""Every example script runs and prints what its docstring promises."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name, capsys):
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_quickstart(default_model_cache, capsys):
    """It prints each lease's score (its best chunk) and the identical pet clause's score in each: the Ocean Drive
    lease and its copy of the clause win the Ocean Drive question, with the scores the API gives."""
    import contextembed

    lines = run_example("quickstart.py", capsys).splitlines()
    documents = [line.split("  ", 1) for line in lines[:2]]
    assert [text for _, text in documents] == ["This lease is for the apartment at 14 Harbor Street.",
                                               "This lease is for the apartment at 88 Ocean Drive."]
    harbor, ocean = (float(score) for score, _ in documents)
    low, high = (float(x) for x in lines[2].split("scores ")[1].split(" in ")[0].split(" vs "))
    assert ocean > harbor and high > low
    model = contextembed.load()  # the Ocean Drive lease's pet clause, scored here
    query = model.encode_queries(["Are pets allowed at 88 Ocean Drive?"])
    vectors = model.encode_documents([["This lease is for the apartment at 88 Ocean Drive.",
                                       "The tenant is Marcus Bell.", "No pets are allowed without written consent."]])
    assert f"{float(query[0] @ vectors[0][2]):.4f}" == f"{high:.4f}"


def test_raw_text_offsets(default_model_cache, capsys):
    """It prints the best sentence's index, offsets and score, then the sentence in brackets inside its own
    context: the offsets slice the file to exactly the bracketed text, and the answer to the question is it."""
    lines = run_example("raw_text_offsets.py", capsys).split("\n")
    best = re.match(r"best chunk (\d+) of (\d+), chars (\d+)-(\d+), score ([0-9.]+)$", lines[0])
    assert best, lines[0]
    text = (EXAMPLES / "data" / "leases" / "lease-mill-lane.txt").read_text(encoding="utf-8")
    start, end = int(best[3]), int(best[4])
    shown = "\n".join(lines[1:])
    assert "[" + text[start:end] + "]" in shown and int(best[2]) == 34
    assert "late fee" in text[start:end].lower()


def test_sentence_transformers_usage(default_model_cache, capsys):
    assert "[(3, 384), (1, 384)]" in run_example("sentence_transformers_usage.py", capsys)


def test_int8_search(default_model_cache, capsys):
    """int8 ranks the documents as float32 does, up to ties finer than its codes resolve (two leases score 0.4929
    and 0.4928 for this query: either may come third)."""
    import ast

    import contextembed
    from contextembed.corpus import read_corpus

    lines = run_example("int8_search.py", capsys).splitlines()
    float_docs = ast.literal_eval(lines[1].split("top documents: ")[1].split("  top chunks")[0])
    int8_docs = ast.literal_eval(lines[2].split("top documents: ")[1].split("  top chunks")[0])
    model = contextembed.load()
    documents = list(read_corpus(EXAMPLES / "data" / "leases"))
    results = model.encode_documents([d.text for d in documents], chunker="sentences")
    query = model.encode_queries(["What is the late fee for the apartment at 3 Mill Lane?"])[0]
    score = {d.id: float((r.embeddings @ query).max()) for d, r in zip(documents, results)}
    assert int8_docs[0] == float_docs[0] == "lease-mill-lane.txt"
    for rank, (a, b) in enumerate(zip(float_docs, int8_docs)):
        assert a == b or abs(score[a] - score[b]) < 1e-3, f"rank {rank + 1}: {a} ({score[a]:.4f}) vs {b} ({score[b]:.4f})"


def test_lease_questions_reproduce_the_published_counts(default_model_cache, capsys):
    """The example's counts at 512-token windows are the ones the model card reads from the results file."""
    from contextembed.default_model_card import load_results

    out = run_example("lease_questions.py", capsys)
    line = re.compile(r"^(.*), late chunking, (\d+)-token windows, (\d+) opening tokens carried: (\d+)/30 right")
    counts = {(m[1], int(m[2]), int(m[3])): int(m[4]) for m in map(line.match, out.splitlines()) if m}
    assert len(counts) == 8  # four settings for the default model, four for the untrained baseline
    models = load_results()["models"]
    assert counts["default model", 512, 0] == models["default"]["leases"]["hits"]
    assert counts["untrained baseline", 512, 0] == models["untrained"]["leases"]["hits"]
    assert models["default"]["leases"]["questions"] == 30
