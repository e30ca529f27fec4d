"""The figure of an evaluation, written by `contextembed evaluate --out OUT` beside results.json.

One row of three panels per context-bench dataset: the modes (late chunking, each sentence alone, one vector per
document) side by side on Document@K, Answer@K and EvidenceRecall@K; Answer@K per capability; and Answer@K by how far
the answer sits from its nearest evidence sentence, in the model's tokens (`contextembed.evaluation.distance`), K the
smallest K measured. Datasets of other layouts (ConTEB, BEIR) are left out of the figure.

`figure_data` is a pure function of results.json's `results`: every number the figure shows, and nothing else, so
the figure and the JSON cannot disagree. `draw` turns it into a matplotlib figure (the `plot` extra) and
`write_figure` saves it as `figure.png` and/or `figure.html`, a self-contained page with the figure as inline SVG.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from pathlib import Path

from contextembed.evaluation.context_bench import MODES
from contextembed.evaluation.distance import NO_EVIDENCE, OTHER_DOCUMENT

FIGURE_FORMATS = ("png", "html")
INSTALL_HINT = "pip install 'contextembed[plot]'"
MODE_LABELS = {"contextual": "late chunking", "independent": "each sentence alone", "whole-document": "whole document"}
MODE_COLORS = {"contextual": "#1f77b4", "independent": "#ff7f0e", "whole-document": "#7f7f7f"}


def is_context_bench(result: dict) -> bool:
    """Whether one dataset's results are context-bench's (`{mode: metrics}` with Document@K), the only ones drawn.

    >>> is_context_bench({"contextual": {"Document@1": 0.5}}), is_context_bench({"qrels": {"nDCG@10": 0.5}})
    (True, False)
    """
    return bool(result) and all(mode in MODES and any(k.startswith("Document@") for k in metrics)
                                for mode, metrics in result.items())


def figure_data(results: dict) -> list[dict]:
    """Every number the figure draws, per context-bench dataset of `results` (`{dataset: {mode: metrics}}`).

    Each entry: `name`, `queries`, `k` (the K of the capability and distance panels) and three panels, each
    `{"categories": [...], "series": {mode: [value or None, ...]}}` with values as results.json holds them (a
    fraction, None where the mode does not define the metric): `modes` (categories are metrics), `capability` and
    `distance` (categories are the breakdown's labels, with their `counts` of queries; the panel is None when no
    query carries a capability; `capability` also says how many queries carry none, `left_out`).

    >>> late = {"Document@1": 1.0, "Answer@1": 0.5, "EvidenceRecall@1": 0.25, "queries": 2, "by_distance": {
    ...     "0-15": {"Answer@1": 1.0, "queries": 1}, "no evidence": {"Answer@1": 0.0, "queries": 1}}}
    >>> [entry] = figure_data({"set": {"contextual": late, "whole-document": {"Document@1": 0.5, "queries": 2}}})
    >>> entry["modes"]["categories"]
    ['Document@1', 'Answer@1', 'EvidenceRecall@1']
    >>> entry["modes"]["series"]
    {'contextual': [1.0, 0.5, 0.25], 'whole-document': [0.5, None, None]}
    >>> entry["distance"]["categories"], entry["distance"]["counts"], entry["distance"]["series"]
    (['0-15', 'no evidence'], [1, 1], {'contextual': [1.0, 0.0]})
    >>> entry["capability"] is None
    True
    """
    entries = []
    for name, result in results.items():
        if not is_context_bench(result):
            continue
        ks = sorted({int(key.split("@")[1]) for metrics in result.values() for key in metrics
                     if key.startswith("Document@")})
        metrics = [f"{family}@{k}" for family in ("Document", "Answer", "EvidenceRecall") for k in ks]
        first = next(iter(result.values()))
        entries.append({
            "name": name, "queries": first["queries"], "k": ks[0],
            "modes": {"categories": metrics,
                      "series": {mode: [values.get(m) for m in metrics] for mode, values in result.items()}},
            "capability": _breakdown(result, "by_capability", f"Answer@{ks[0]}"),
            "distance": _breakdown(result, "by_distance", f"Answer@{ks[0]}"),
        })
        if entries[-1]["capability"] is not None:
            entries[-1]["capability"]["left_out"] = first["queries"] - sum(entries[-1]["capability"]["counts"])
    return entries


def _breakdown(result: dict, key: str, metric: str) -> dict | None:
    """One breakdown panel: the labels in results.json's order, the modes that define `metric`."""
    modes = [mode for mode, values in result.items() if key in values and metric in values]
    if not modes:
        return None
    groups = result[modes[0]][key]
    return {"metric": metric, "categories": list(groups), "counts": [g["queries"] for g in groups.values()],
            "series": {mode: [result[mode][key][label].get(metric) for label in groups] for mode in modes}}


def figure_available() -> bool:
    """Whether matplotlib (the `plot` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def draw(data: Sequence[dict], title: str = ""):
    """A matplotlib `Figure` of `figure_data`'s output: a row of three panels per dataset. Each bar and line carries
    its mode as its label, so what was drawn can be read back from the figure's artists."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import PercentFormatter
    except ImportError as error:
        raise ImportError(f"drawing the evaluation figure needs matplotlib: {INSTALL_HINT}") from error
    if not data:
        raise ValueError("data must hold at least one context-bench dataset, got none")
    figure = Figure(figsize=(16, 3.9 * len(data) + 0.6), layout="constrained")
    axes = figure.subplots(len(data), 3, squeeze=False)
    for row, entry in zip(axes, data):
        _draw_modes(row[0], entry)
        _draw_capability(row[1], entry)
        _draw_distance(row[2], entry)
        for ax in row:
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
            ax.set_ylim(0, 1.08)
            ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


def _grouped_bars(ax, categories: list[str], series: dict[str, list], tick_labels: list[str],
                  rotation: float = 0) -> None:
    """Bars per category, one per mode, the value above each; a None value draws no bar."""
    width = 0.8 / len(series)
    for i, (mode, values) in enumerate(series.items()):
        kept = [(x, v) for x, v in enumerate(values) if v is not None]
        bars = ax.bar([x + (i - (len(series) - 1) / 2) * width for x, _ in kept], [v for _, v in kept], width,
                      label=MODE_LABELS[mode], color=MODE_COLORS[mode])
        ax.bar_label(bars, labels=[f"{100 * v:.0f}" for _, v in kept], fontsize=6, padding=1)
    ax.set_xticks(range(len(categories)), tick_labels, fontsize=7, rotation=rotation,
                  ha="right" if rotation else "center", rotation_mode="anchor")


def _draw_modes(ax, entry: dict) -> None:
    panel = entry["modes"]
    _grouped_bars(ax, panel["categories"], panel["series"], panel["categories"], rotation=20)
    ax.set_title(f"{entry['name']} ({entry['queries']} queries): by mode", fontsize=9)


def _draw_capability(ax, entry: dict) -> None:
    panel = entry["capability"]
    if panel is None:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no query carries a capability", ha="center", va="center", transform=ax.transAxes)
        return
    ticks = [f"{label}\n(n={count})" for label, count in zip(panel["categories"], panel["counts"])]
    _grouped_bars(ax, panel["categories"], panel["series"], ticks)
    left_out = f"; {panel['left_out']} without one left out" if panel["left_out"] else ""
    ax.set_title(f"{panel['metric']} by capability{left_out}", fontsize=9)


def _draw_distance(ax, entry: dict) -> None:
    """Lines over the token-distance buckets, every one on the axis (an empty one shows its n=0); the buckets
    without a distance that hold queries as unconnected points after them."""
    panel = entry["distance"]
    if panel is None:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no distance breakdown", ha="center", va="center", transform=ax.transAxes)
        return
    measured = [i for i, label in enumerate(panel["categories"]) if label not in (OTHER_DOCUMENT, NO_EVIDENCE)]
    apart = [i for i in range(len(panel["categories"])) if i not in measured and panel["counts"][i]]
    for mode, values in panel["series"].items():
        line = [(x, values[i]) for x, i in enumerate(measured) if values[i] is not None]
        ax.plot([x for x, _ in line], [v for _, v in line], marker="o", label=MODE_LABELS[mode],
                color=MODE_COLORS[mode])
        points = [(len(measured) + 0.5 + x, values[i]) for x, i in enumerate(apart) if values[i] is not None]
        ax.plot([x for x, _ in points], [v for _, v in points], marker="s", linestyle="none",
                color=MODE_COLORS[mode], label=f"_{MODE_LABELS[mode]} (no distance)")
    if measured and apart:
        ax.axvline(len(measured) - 0.25, color="grey", linestyle=":", linewidth=1)
    positions = list(range(len(measured))) + [len(measured) + 0.5 + x for x in range(len(apart))]
    labels = [_distance_tick(panel["categories"][i]) + f"\n(n={panel['counts'][i]})" for i in measured + apart]
    ax.set_xticks(positions, labels, fontsize=7)
    ax.set_xlabel("tokens between the answer and its nearest evidence sentence\n(window head: that sentence in the "
                  "opening tokens every window carries)", fontsize=7)
    ax.set_title(f"{panel['metric']} by distance to the evidence", fontsize=9)


def _distance_tick(label: str) -> str:
    """A bucket's label short enough for a tick.

    >>> [_distance_tick(label) for label in ("16-63", ">=512, evidence in the window head", OTHER_DOCUMENT)]
    ['16-63', '≥512,\\nwindow head', 'other\\ndocument']
    """
    short = {OTHER_DOCUMENT: "other\ndocument", NO_EVIDENCE: "no\nevidence"}
    return short.get(label, label.replace(">=", "≥").replace(", evidence in the window head", ",\nwindow head"))


def write_figure(out: str | Path, data: Sequence[dict], formats: Sequence[str] = FIGURE_FORMATS, *,
                 title: str = "", notes: str = "") -> list[Path]:
    """`figure.png` and/or `figure.html` (inline SVG, `notes` below it as preformatted text) in the folder `out`."""
    for fmt in formats:
        if fmt not in FIGURE_FORMATS:
            raise ValueError(f"formats must be among {FIGURE_FORMATS}, got {fmt!r}")
    from matplotlib import rc_context

    figure = draw(data, title)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    # Fixed ids and no date: the same results give the same files. Text as paths: the page needs no fonts.
    with rc_context({"svg.hashsalt": "contextembed", "svg.fonttype": "path"}):
        if "png" in formats:
            figure.savefig(out / "figure.png", dpi=80, metadata={"Software": None})
            written.append(out / "figure.png")
        if "html" in formats:
            svg = io.StringIO()
            figure.savefig(svg, format="svg", metadata={"Date": None})
            page = _html_page(svg.getvalue(), title, notes)
            (out / "figure.html").write_text(page, encoding="utf-8")
            written.append(out / "figure.html")
    return written


def _html_page(svg: str, title: str, notes: str) -> str:
    """A page holding matplotlib's SVG element (its XML prolog dropped: the page is HTML)."""
    element = svg[svg.index("<svg"):]
    heading = html.escape(title or "contextembed evaluation")
    notes_block = f"<pre>{html.escape(notes)}</pre>\n" if notes else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{heading}</title>\n"
            f"<style>body{{font-family:sans-serif;margin:1em}} svg{{max-width:100%;height:auto}}</style>\n"
            f"</head>\n<body>\n<h1>{heading}</h1>\n{element}\n{notes_block}</body>\n</html>\n")
