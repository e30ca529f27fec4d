"""Build the shipped long-document evaluation set from the Python FAQ (PSF licence), offline from Debian.

The Python documentation's FAQ pages are long documents (up to ~20k tokens) made of question headings and
their answer paragraphs. An answer sentence rarely repeats its question ("You need to do two things: ..."),
so what it answers is known from the section heading above it — section scope, across a long document that
the default model must run in overlapping windows.

    apt-get download python3.11-doc && dpkg -x python3.11-doc_*.deb python-doc
    python data_builders/pyfaq_eval.py python-doc/usr/share/doc/python3.11/html/_sources/faq

Writes contextembed/evaluation/data/pyfaq/{documents,queries}.jsonl and SOURCE.md (context-bench layout). One
document per FAQ page, one sentence per chunk (blingfire), code blocks and directives left out, inline markup
reduced to its text. One query per question heading: the question itself; accepted answers: the sentences of
its first answer paragraph; evidence: one group per following paragraph of the answer (at most three), any
one of its sentences recovering the group.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import blingfire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training_sources import rest_blocks as blocks  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "contextembed" / "evaluation" / "data" / "pyfaq"
PAGES = ["general", "programming", "design", "library", "extending", "windows", "gui", "installed"]
MAX_EVIDENCE_GROUPS = 3


def build(faq_dir: Path) -> tuple[list[dict], list[dict]]:
    documents, queries = [], []
    for page in PAGES:
        doc_id = f"faq-{page}"
        sentences: list[str] = []
        sections: list[tuple[str, list[list[int]]]] = []  # question, paragraphs as sentence indices
        for kind, text in blocks((faq_dir / f"{page}.rst.txt").read_text(encoding="utf-8").splitlines()):
            if not text:
                continue
            if kind == "paragraph":
                start = len(sentences)
                sentences.extend(s for s in blingfire.text_to_sentences(text).split("\n") if s.strip())
                if sections:
                    sections[-1][1].append(list(range(start, len(sentences))))
                continue
            sentences.append(text)
            sections.append((text, [])) if kind == "question" else sections.append(("", []))
        documents.append({"id": doc_id, "sentences": sentences})
        for number, (question, paragraphs) in enumerate(sections):
            if not question or not paragraphs:
                continue
            ref = lambda i: f"{doc_id}#{i}"  # noqa: E731
            queries.append({
                "id": f"{doc_id}-{number:03d}",
                "query": question,
                "targets": [doc_id],
                "answers": [ref(i) for i in paragraphs[0]],
                "evidence": [[[ref(i)] for i in paragraph] for paragraph in paragraphs[1 : 1 + MAX_EVIDENCE_GROUPS]],
                "capability": "FAQ answer (section scope)",
            })
    return documents, queries


SOURCE = """# Python FAQ long-document evaluation set

Built by `data_builders/pyfaq_eval.py` from the reStructuredText sources of the Python 3.11 FAQ in Debian's
`python3.11-doc` package (`html/_sources/faq/*.rst.txt`). Text: Copyright © 2001-2023 Python Software
Foundation; used under the PSF License Agreement, which permits reproduction and derivative works with this
notice retained. {documents} documents (one per FAQ page, {sentences} sentences, the longest ~{longest} tokens),
{queries} queries (each question heading; answers: its first answer paragraph; evidence: up to three
following paragraphs). Code blocks and directives are left out; inline markup is reduced to its text.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("faq_dir", type=Path, help="the _sources/faq folder of python3.11-doc")
    args = parser.parse_args()
    documents, queries = build(args.faq_dir)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rows in (("documents.jsonl", documents), ("queries.jsonl", queries)):
        with open(OUT / name, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    longest = max(len(" ".join(d["sentences"]).split()) for d in documents) * 4 // 3  # ~tokens from words
    (OUT / "SOURCE.md").write_text(SOURCE.format(documents=len(documents), queries=len(queries), longest=longest,
                                                 sentences=sum(len(d["sentences"]) for d in documents)),
                                   encoding="utf-8")
    print(f"wrote {len(documents)} documents and {len(queries)} queries to {OUT}")


if __name__ == "__main__":
    main()
