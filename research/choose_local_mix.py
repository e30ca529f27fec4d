"""Measure a chunk's contextual vector mixed with its vector encoded alone, on the validation sets only.

    python scripts/choose_local_mix.py validation/ --model contextembed-all-MiniLM-L6-v2 \\
        --mixes 0 0.25 0.5 --out runs/local-mix.json

Each chunk's vector becomes normalize((1 - l) * contextual + l * alone) (`contextembed.mixing.mix_alone`, what
`encode_documents(..., local_mix=l)` returns): the late-chunking vector plus the same model's vector of the chunk by
itself, which carries the chunk's own words. A query (one chunk) is unchanged. For
each weight l it scores the six validation sets (float32, the model's own `window_head_tokens`) and prints the
decision figures the default model's builds are chosen by (`choose_document_mix.decision`). The contextual and
alone vectors are encoded once per set and mixed for every weight.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextembed  # noqa: E402
from choose_document_mix import SETS, decision, print_row, set_figures, write_table  # noqa: E402
from contextembed.evaluation.context_bench import run_context_bench  # noqa: E402
from contextembed.evaluation.loaders import load_context_bench  # noqa: E402
from contextembed.mixing import mix_alone  # noqa: E402


class Mixed:
    """A model whose documents' chunk vectors are the mix of vectors encoded beforehand (queries pass through)."""

    def __init__(self, model, vectors: list[np.ndarray], alone: list[np.ndarray], weight: float):
        self.model, self.weight = model, weight
        self.vectors = [mix_alone(c, a, weight) for c, a in zip(vectors, alone)]

    def encode_queries(self, queries, **options):
        return self.model.encode_queries(queries, **options)

    def encode_documents(self, documents, **options):
        if len(documents) != len(self.vectors):
            raise ValueError("Mixed answers only the documents it was built for")
        return self.vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation", type=Path, help="folder holding the six validation sets")
    parser.add_argument("--model", default="contextembed-all-MiniLM-L6-v2")
    parser.add_argument("--mixes", type=float, nargs="+", default=[0.0, 0.25, 0.5])
    parser.add_argument("--out", type=Path, default=Path("runs/local-mix.json"))
    args = parser.parse_args()
    model = contextembed.load(args.model)
    per_weight: dict[float, dict] = {w: {} for w in args.mixes}
    for s in SETS:
        documents, queries = load_context_bench(args.validation / s)
        vectors = model.encode_documents([d.sentences for d in documents], show_progress_bar=False)
        flat = model.encode_documents([[t] for d in documents for t in d.sentences], show_progress_bar=False)
        bounds = np.cumsum([0] + [len(d.sentences) for d in documents])
        alone = [np.concatenate(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        for weight in args.mixes:
            late = run_context_bench(Mixed(model, vectors, alone, weight), documents, queries, ks=[1, 10],
                                     modes=("contextual",), show_progress_bar=False)["contextual"]
            per_weight[weight][s] = set_figures(late, queries)
        print(f"{s}: " + ", ".join(f"l={w} EvR@10 {per_weight[w][s]['EvidenceRecall@10']:.3f} "
                                   f"Answer@1 {per_weight[w][s]['Answer@1']:.3f}" for w in args.mixes), flush=True)
    table = {f"{args.model} local_mix={w}": {"sets": per_weight[w], **decision(per_weight[w])} for w in args.mixes}
    for name, row in table.items():
        print_row(name, row)
    write_table(args.out, table)


if __name__ == "__main__":
    main()
