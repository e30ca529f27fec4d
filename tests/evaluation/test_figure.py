"""`contextembed evaluate --out` draws a figure of exactly the numbers in results.json: the files are valid, the
plotted data is results.json's, the drawn bars and lines are that data; without matplotlib, results.json alone and a
one-line hint."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from contextembed.cli import main
from contextembed.evaluation.distance import NO_EVIDENCE, OTHER_DOCUMENT
from contextembed.evaluation.figure import MODE_LABELS, draw, figure_data, write_figure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEASES = [["the lease of one street", "rent is monthly", "she was the tenant in the apartment"],
          ["the lease of two street", "rent is monthly", "he was the tenant in the apartment"],
          ["the company table", "one row for each year", "the rule of the section"]]
QUERIES = [  # three carry no capability, two no evidence, one only evidence in another document
    {"id": "q1", "query": "monthly rent at one street", "targets": ["d0"], "answers": ["d0#1"],
     "evidence": [[["d0#0"]]], "capability": "entity identity"},
    {"id": "q2", "query": "monthly rent at two street", "targets": ["d1"], "answers": ["d1#1"],
     "evidence": [[["d1#0"]]], "capability": "entity identity"},
    {"id": "q3", "query": "who was the tenant at two street", "targets": ["d1"], "answers": ["d1#2"],
     "evidence": [[["d1#0"]]]},
    {"id": "q4", "query": "the rule of the section", "targets": ["d2"], "answers": ["d2#2"], "evidence": [],
     "capability": "section scope"},
    {"id": "q5", "query": "a row for each year", "targets": ["d2"], "answers": ["d2#1"], "evidence": [[["d0#0"]]]},
    {"id": "q6", "query": "the tenant", "targets": ["d0"], "answers": ["d0#2"], "evidence": []},
]


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "leases"
    folder.mkdir()
    (folder / "documents.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "sentences": s}) + "\n"
                                                    for i, s in enumerate(LEASES)))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    return folder


@pytest.fixture
def evaluated(built, dataset, tmp_path):
    out = tmp_path / "out"
    assert main(["evaluate", str(dataset), "--model", str(built["bert"][0]), "--no-progress", "--out", str(out)]) == 0
    return out, json.loads((out / "results.json").read_text())


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_the_files_are_written_and_valid(evaluated):
    out, payload = evaluated
    assert (out / "figure.png").read_bytes()[:8] == PNG_SIGNATURE
    page = Tags()
    page.feed((out / "figure.html").read_text(encoding="utf-8"))
    page.close()
    assert page.tags[:3] == ["html", "head", "meta"] and "svg" in page.tags and "path" in page.tags
    assert payload["distance"]["max_seq_length"] == 64 and payload["distance"]["buckets"][-2:] == [OTHER_DOCUMENT,
                                                                                                     NO_EVIDENCE]


def test_the_plotted_data_is_results_json(evaluated):
    """Every number of `figure_data` is the one results.json holds at the same place, and nothing is left out."""
    _, payload = evaluated
    results = payload["results"]["leases"]
    [entry] = figure_data(payload["results"])
    assert entry["queries"] == 6 and entry["k"] == 1
    assert entry["modes"]["categories"] == ["Document@1", "Document@10", "Answer@1", "Answer@10",
                                            "EvidenceRecall@1", "EvidenceRecall@10"]
    assert set(entry["modes"]["series"]) == {"contextual", "independent", "whole-document"}
    for mode, values in entry["modes"]["series"].items():
        assert values == [results[mode].get(m) for m in entry["modes"]["categories"]]
    for panel, key in (("capability", "by_capability"), ("distance", "by_distance")):
        data = entry[panel]
        assert set(data["series"]) == {"contextual", "independent"}  # the modes with Answer@1
        for mode, values in data["series"].items():
            assert data["categories"] == list(results[mode][key])
            assert values == [results[mode][key][c].get("Answer@1") for c in data["categories"]]
            assert data["counts"] == [results[mode][key][c]["queries"] for c in data["categories"]]
    # queries without a capability are counted as left out; queries without evidence have their own bucket
    assert entry["capability"]["left_out"] == 3 and sum(entry["capability"]["counts"]) == 3
    distance = dict(zip(entry["distance"]["categories"], entry["distance"]["counts"]))
    assert distance[NO_EVIDENCE] == 2 and distance[OTHER_DOCUMENT] == 1 and sum(distance.values()) == 6


def drawn_bars(ax) -> dict[str, dict[int, float]]:
    """Bar heights by mode label and category index (bars sit around their category's tick)."""
    return {container.get_label(): {round(bar.get_x() + bar.get_width() / 2): bar.get_height() for bar in container}
            for container in ax.containers}


def defined(values: list) -> dict[int, float]:
    return {i: v for i, v in enumerate(values) if v is not None}


def test_what_is_drawn_is_the_data(evaluated):
    _, payload = evaluated
    data = figure_data(payload["results"])
    figure = draw(data)
    modes_ax, capability_ax, distance_ax = figure.axes
    for ax, panel in ((modes_ax, data[0]["modes"]), (capability_ax, data[0]["capability"])):
        assert drawn_bars(ax) == {MODE_LABELS[m]: defined(v) for m, v in panel["series"].items()}
    assert [t.get_text() for t in modes_ax.get_xticklabels()] == data[0]["modes"]["categories"]
    panel = data[0]["distance"]
    measured = [i for i, c in enumerate(panel["categories"]) if c not in (OTHER_DOCUMENT, NO_EVIDENCE)]
    for mode, values in panel["series"].items():
        lines = {line.get_label(): list(line.get_ydata()) for line in distance_ax.lines}
        assert lines[MODE_LABELS[mode]] == [values[i] for i in measured if values[i] is not None]
        assert lines[f"_{MODE_LABELS[mode]} (no distance)"] == [values[i] for i in range(len(values))
                                                               if i not in measured and values[i] is not None]
    # every distance bucket is on the axis, an empty one with n=0; the buckets without a distance only when used
    ticks = [t.get_text() for t in distance_ax.get_xticklabels()]
    assert len(ticks) == len(measured) + sum(1 for i, c in enumerate(panel["counts"]) if i not in measured and c)
    assert any(t.endswith("(n=0)") for t in ticks)


def test_a_set_without_capabilities_draws_without_that_panel(evaluated, tmp_path):
    _, payload = evaluated
    results = {mode: {k: v for k, v in m.items() if k != "by_capability"}
               for mode, m in payload["results"]["leases"].items()}
    [entry] = figure_data({"plain": results, "guard": {"relevance": {"nDCG@10": 0.5, "queries": 3}}})
    assert entry["name"] == "plain" and entry["capability"] is None  # the BEIR-style set is not drawn
    assert write_figure(tmp_path / "plain", [entry], ["png"]) == [tmp_path / "plain" / "figure.png"]
    assert not (tmp_path / "plain" / "figure.html").exists()
    with pytest.raises(ValueError, match="formats must be among"):
        write_figure(tmp_path, [entry], ["svg"])


@pytest.mark.slow
def test_without_matplotlib_results_and_a_hint(built, dataset, tmp_path):
    """matplotlib made unimportable in a fresh interpreter: results.json is still written, and one line says how to
    get the figure."""
    out = tmp_path / "out"
    code = ("import sys; sys.modules['matplotlib'] = None; from contextembed.cli import main; "
            f"sys.exit(main(['evaluate', {str(dataset)!r}, '--model', {str(built['bert'][0])!r}, '--no-progress', "
            f"'--out', {str(out)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "pip install 'contextembed[plot]'" in done.stderr
    assert (out / "results.json").is_file() and not (out / "figure.png").exists()


def test_figure_none_and_png_only(built, dataset, tmp_path):
    model = ["--model", str(built["bert"][0]), "--no-progress"]
    assert main(["evaluate", str(dataset), *model, "--figure", "none", "--out", str(tmp_path / "a")]) == 0
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["results.json", "results.md"]
    assert main(["evaluate", str(dataset), *model, "--figure", "png", "--out", str(tmp_path / "b")]) == 0
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["figure.png", "results.json", "results.md"]
