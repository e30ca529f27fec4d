"""contextembed.display: what `contextembed search` prints, from hits alone; nothing a shared index holds can drive the
reader's terminal."""

from __future__ import annotations

from contextembed.display import one_line, printable, results_json, show_results, show_score, snippet
from contextembed.ranking import ChunkHit, DocumentHit

TEXT = "Lease for 88 Ocean Drive. Rent is due. The Tenant pays for electricity."


def hit(evidence=()) -> DocumentHit:
    answer = ChunkHit("lease.txt", 0.75, 2, 39, 71, TEXT[39:71])
    return DocumentHit("lease.txt", 0.75, answer, evidence)


def test_results_print_each_chunk_in_its_context(capsys):
    show_results("who pays?", [hit()], {"lease.txt": TEXT}, header="1 documents, 3 chunks", context=12,
                 precision="float32", output_dim=8, int8_clip_sigmas=None)
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == ['Query: "who pays?"', "1 documents, 3 chunks", "",
                                    "1. lease.txt  (score 0.7500)"]
    assert "   chunk 2 [chars 39-71] score 0.7500" in out and "…ent is due. «The Tenant pays for electricity.»" in out
    assert "reader view" not in out and "answer" not in out


def test_evidence_is_labelled_and_read_in_document_order(capsys):
    opening = ChunkHit("lease.txt", 0.5, 0, 0, 25, TEXT[:25])
    show_results("who pays?", [hit((opening,))], {"lease.txt": TEXT}, header="h", context=5, precision="float32",
                 output_dim=8, int8_clip_sigmas=None, evidence=True)
    out = capsys.readouterr().out
    assert "   answer   chunk 2 [chars 39-71] score 0.7500" in out
    assert "   evidence chunk 0 [chars 0-25] score 0.5000" in out
    assert "   reader view: Lease for 88 Ocean Drive. […] «The Tenant pays for electricity.»" in out


def test_json_carries_evidence_only_when_asked():
    opening = ChunkHit("lease.txt", 0.5, 0, 0, 25, TEXT[:25])
    plain = results_json("q", [hit((opening,))], precision="float32")
    assert plain["documents"][0].keys() == {"document", "score", "chunk"}
    entry = results_json("q", [hit((opening,))], precision="float32", evidence=True)["documents"][0]
    assert entry["evidence"] == [{"index": 0, "score": 0.5, "start": 0, "end": 25, "text": TEXT[:25]}]
    assert entry["reader_view"].startswith("Lease for 88 Ocean Drive. […]")
    codes = results_json("q", [DocumentHit("a", 7, ChunkHit("a", 7, 0, 0, 1, "x"), (ChunkHit("a", 5, 1, 2, 3, "y"),))],
                         precision="int8", evidence=True)["documents"][0]
    assert codes["score"] == 7 and codes["evidence"][0]["score"] == 5 and isinstance(codes["evidence"][0]["score"], int)


def test_scores_show_what_they_stand_for():
    assert show_score(0.5, "float32", 384, None) == "0.5000"
    assert show_score(-12, "int8", 384, None) == "-12 (int8 tanh codes, dot product)"
    assert show_score(100, "ubinary", 384, 5.0) == "100 (ubinary: 384 - 2 x Hamming distance)"
    assert show_score(1000, "int8", 384, 5.0).endswith("(int8 1000)")


def test_snippets_and_lines_stay_on_one_line_and_escape_control_characters():
    assert snippet("ab\ncd. ef\tgh. ij", 7, 13, 3) == "…d. «ef gh.» ij"
    assert snippet("short", 0, 5, 80) == "«short»"
    assert one_line("a\n\n b") == "a b"
    assert printable("x\x1b[2Jy\u202e") == "x\\x1b[2Jy\\u202e" and printable("tab\tnew\nline") == "tab\tnew\nline"
