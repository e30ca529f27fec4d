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
    out = run_example("quickstart.py", capsys)
    low, high = (float(x) for x in out.splitlines()[-1].split("scores ")[1].split(" in ")[0].split(" vs "))
    assert high > low  # the Ocean Drive copy of the identical clause wins for an Ocean Drive question


def test_raw_text_offsets(default_model_cache, capsys):
    assert "[" in run_example("raw_text_offsets.py", capsys)


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
    _, documents = read_corpus(EXAMPLES / "data" / "leases")
    results = model.encode_documents([d.text for d in documents], chunker="sentences")
    query = model.encode_queries(["What is the late fee for the apartment at 3 Mill Lane?"])[0]
    score = {d.path: float((r.embeddings @ query).max()) for d, r in zip(documents, results)}
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
