"""The lease questions over 14 chunkings of the three frameworks' own splitters (docs/frameworks.md).

    python scripts/framework_lease_sweep.py

For each chunking and model: how many of the six "Who pays for electricity at <address>?" questions put the asked
lease's copy of the electricity clause first among the six copies (late chunking, each lease's chunks encoded
together, as the adapters do). Needs the langchain, llamaindex and haystack extras.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextembed  # noqa: E402
from haystack import Document as HaystackDocument  # noqa: E402
from haystack.components.preprocessors import DocumentSplitter  # noqa: E402
from langchain_text_splitters import RecursiveCharacterTextSplitter  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402

from contextembed.default_model import BASELINE_MODEL_NAME  # noqa: E402
from tests.integrations.leases import ADDRESSES, CLAUSE, QUESTION, leases  # noqa: E402


def haystack(**options):
    splitter = DocumentSplitter(**options)
    return lambda text: [d.content for d in splitter.run([HaystackDocument(content=text)])["documents"]]


def llamaindex(tokens: int):
    splitter = SentenceSplitter(chunk_size=tokens, chunk_overlap=0)
    return lambda text: [n.get_content() for n in splitter.get_nodes_from_documents([LlamaDocument(text=text)])]


def langchain(characters: int):
    return RecursiveCharacterTextSplitter(chunk_size=characters, chunk_overlap=0).split_text


SPLITS = {"haystack passage": haystack(split_by="passage", split_length=1),
          "haystack period 1": haystack(split_by="period", split_length=1),
          "haystack period 2": haystack(split_by="period", split_length=2),
          "haystack word 40": haystack(split_by="word", split_length=40),
          "haystack word 80": haystack(split_by="word", split_length=80),
          **{f"llamaindex {n} tokens": llamaindex(n) for n in (32, 48, 64, 96, 128)},
          **{f"langchain {n} characters": langchain(n) for n in (150, 200, 300, 400)}}


def main() -> None:
    texts = leases()
    for name in (None, BASELINE_MODEL_NAME):
        encoder = contextembed.load(name)
        queries = encoder.encode_queries([QUESTION.format(a) for a in ADDRESSES.values()])
        results, total = [], 0
        for label, split in SPLITS.items():
            chunks = [[c for c in split(t) if c.strip()] for t in texts.values()]
            vectors = encoder.encode_documents(chunks)
            copies = [v[next(i for i, c in enumerate(cs) if CLAUSE in c)] for cs, v in zip(chunks, vectors)]
            hits = sum(int(np.argmax([float(q @ c) for c in copies]) == k) for k, q in enumerate(queries))
            total += hits
            results.append(f"{label}: {hits}/6")
        print(f"{name or 'default model'}: {total}/{6 * len(SPLITS)} —", "; ".join(results))


if __name__ == "__main__":
    main()
