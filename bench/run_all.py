"""Run every CPU benchmark and assemble bench/RESULTS.md from their result files.

    python bench/run_all.py            # all CPU benchmarks (peer: needs afterthoughts installed; ~10 min)
    python bench/run_all.py --assemble # only rebuild RESULTS.md from bench/results/*.md

The GPU benchmark (bench/gpu.py) runs only on a CUDA machine; its result file is included when present.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["throughput", "throughput_local_mix", "peer_afterthoughts", "peer_afterthoughts_long", "host",
         "long_documents", "long_documents_chunks", "search", "search_backends", "search_context_bench_scale",
         "scale", "scale_5k", "ray_data", "dtype", "backends", "serve", "stores", "gpu", "gpu_pipeline", "gpu_tiny_cpu"]
# bench/scale.py (about an hour) runs on its own: its results are assembled here when present (scale_5k: the same
# parts on 5,000 documents, `python bench/scale.py --documents 5000 --results scale_5k --work bench/out/scale-5k`).
COMMANDS = [["throughput.py"], ["throughput.py", "--local-mix", "0.1"], ["peer_afterthoughts.py"],
            ["peer_afterthoughts.py", "--long"], ["host.py"],
            ["long_documents.py"], ["search.py"],
            ["search.py", "--backends", "--chunks", "200000", "--queries", "64"],
            ["search.py", "--context-bench-scale"], ["ray_data.py"], ["dtype.py"], ["backends.py"], ["serve.py"],
            ["stores.py"], ["gpu.py", "--tiny"]]


def headline(results: Path) -> list[str]:
    def load(name):
        path = results / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    rows = []
    if (t := load("throughput")) is not None:
        rows.append(f"| encoding vs a plain forward pass (same tokens, MiniLM, CPU) | {t['ratio_vs_plain']:.3f} | ≥ 0.97 |")
        rows.append(f"| encoding vs each chunk encoded alone | {t['ratio_vs_independent']:.2f} | (what context costs) |")
    if (x := load("throughput_local_mix")) is not None:
        rows.append(f"| encoding with local_mix {x['local_mix']:g} vs without | {x['ratio_local_mix']:.2f} | (what the "
                    "option's second pass costs) |")
    if (p := load("peer_afterthoughts")) is not None:
        rows.append(f"| encoding vs afterthoughts | {p['ratio']:.2f} | ≥ 1.4 |")
        rows.append(f"| chunk cosine vs afterthoughts, mean / min | {p['cosine_mean']:.6f} / {p['cosine_min']:.4f} | "
                    "≥ 0.9999 |")
    if (p := load("peer_afterthoughts_long")) is not None:
        rows.append(f"| encoding vs afterthoughts, documents past one 512-token pass | {p['ratio']:.2f} | ≥ 1.3 |")
        rows.append(f"| tokens processed ÷ document tokens, long documents | {p['tokens_processed_per_token']:.2f} | "
                    "(one pass: 1) |")
    if (h := load("host")) is not None and "device" in h:
        rows.append(f"| blocking device: run ÷ max(host, device) | {h['device']['now_over_max']:.2f} | ≤ 1.3 |")
        rows.append(f"| blocking device: run before prefetching ÷ (host + device) | "
                    f"{h['device']['before_over_sum']:.2f} | (the sum) |")
        if "device_one_torch_thread" in h:
            rows.append(f"| blocking device, torch at one thread: run ÷ max(host, device) | "
                        f"{h['device_one_torch_thread']['now_over_max']:.2f} | ≤ 1.3 |")
        if "device_as_on_an_accelerator" in h:
            rows.append(f"| blocking device as on an accelerator (torch at one thread, an accelerator's batch budget): "
                        f"run ÷ max(host, device) | {h['device_as_on_an_accelerator']['now_over_max']:.2f} | ≤ 1.3 |")
    if (h := load("host")) is not None and "cpu" in h:
        rows.append(f"| plain CPU encode, now ÷ before prefetching (MiniLM) | {h['cpu']['now_over_before']:.3f} | "
                    "≤ 1 |")
    if (h := load("host")) is not None and "ceiling" in h:
        for layout, c in h["ceiling"].items():
            alone = c.get("host_tokens_per_second")
            rows.append(f"| host ceiling on one core, {layout}: host's work alone in tokens/s (÷ tokenizer alone), "
                        "padding ratio | "
                        + (f"{alone:,.0f} ({alone / c['tokenizer_tokens_per_second']:.2f})" if alone else "–")
                        + f", {c['padding_ratio']:.3f} | padding ≤ 1.1 |")
    if (x := load("scale")) is not None and "index" in x:
        rows.append(f"| context-bench-sized corpus ({x['documents']:,} documents, {x['chunks']:,} chunks) into the "
                    f"index: chunks/s, peak RSS | {x['index']['chunks_per_second']:,.0f}, "
                    f"{x['index']['peak_mib']:,.0f} MiB | memory flat in the corpus |")
        if "append" in x:
            rows.append(f"| appending 50 documents to it: MiB written of the index's | "
                        f"{x['append']['bytes_written'] / 2**20:,.1f} of {x['append']['index_bytes'] / 2**20:,.0f} | "
                        "∝ what is added |")
        if x.get("memory"):
            rows.append("| peak RSS of an encode by corpus size (8 sentences a document) | " + ", ".join(
                f"{m['documents']:,}: {m['peak_mib']:,.0f} MiB" for m in x["memory"]) + " | flat in the corpus |")
    for name in ("scale", "scale_5k"):
        if (x := load(name)) is not None and "resume" in x:
            r = x["resume"]
            rows.append(f"| {x['documents']:,}-document encode killed (SIGKILL) with {r['committed_when_killed']:,} "
                        f"committed, then rerun: minutes of the rerun, of the full encode | "
                        f"{r['resume_seconds'] / 60:.1f} of {x['index']['seconds'] / 60:.1f} | only what is left |")
    if (m := load("long_documents")) is not None and m.get("ratio_32k_16k"):
        rows.append(f"| peak memory 32k / 16k tokens | {m['ratio_32k_16k']:.2f} | ≤ 2.2 |")
    if (w := load("long_documents_chunks")) is not None and len(w["rows"]) > 1:
        first, last = w["rows"][0], w["rows"][-1]
        rows.append(f"| peak memory beyond the output, windowed document of {last['chunks']:,} vs {first['chunks']:,} "
                    f"chunks | {last['peak_mib'] - last['output_mib']:.0f} vs {first['peak_mib'] - first['output_mib']:.0f}"
                    " MiB | bounded by the window |")
    if (s := load("search")) is not None:
        rows.append(f"| exact search int8 / float32 throughput | {s['ratio']:.2f} | ≥ 2 |")
    if (b := load("search_backends")) is not None:
        ours = b["seconds"]["int8"]
        for name, value in b["seconds"].items():
            if name not in ("float32", "int8"):
                rows.append(f"| exact search throughput, contextembed int8 / {name} (200k × 1024, 64 queries) | "
                            f"{value / ours:.1f} | > 1: no optional backend needed |")
    if (c := load("search_context_bench_scale")) is not None:
        rows.append(f"| context-bench scale exact search (2.46M × 1024 int8, 2,099 queries), peak memory | "
                    f"{c['peak_gib']:.1f} GiB | fits in 24 GB |")
    if (r := load("ray_data")) is not None:
        rows.append(f"| Ray Data ({r['actors']} actors) / one process throughput, vectors equal to "
                    f"{r['max_abs_diff']:.0e} | {r['ratio']:.2f} | (no speed-up expected on 2 cores) |")
    if (d := load("dtype")) is not None:
        rows.append(f"| encoding bfloat16 / float32 weights (MiniLM, CPU, native bf16: {d['native_bf16']}), chunk "
                    f"cosine min {d['cosine_min']:.4f} | {d['ratio']:.2f} | (opt-in: dtype=\"auto\") |")
    if (b := load("backends")) is not None:
        for name, row in b["rows"].items():
            if name != "torch float32":
                rows.append(f"| encoding {name} / torch float32 (MiniLM, CPU), chunk cosine min {row['cosine_min']:.4f} "
                            f"| {row['ratio']:.2f} | (deployment option) |")
    if (v := load("serve")) is not None:
        for name, round_ in v["rounds"].items():
            merged, clients = name.split("/")
            if merged in ("merged", "workers"):
                server = "server" if merged == "merged" else f"server, {v.get('workers', 2)} workers × 1 thread,"
                rows.append(f"| {server} throughput ÷ direct encode_documents, {clients} client(s) | "
                            f"{round_['throughput_ratio']:.3f} | ≥ 0.85 at 16 clients |")
        rows.append(f"| server batching gain (merged ÷ one request per pass, 16 clients) | {v['batching_gain']:.2f} | > 1 |")
    if (t := load("stores")) is not None:
        base = {r["chunks"]: r for r in t["rows"] if r["store"] == "exact_search" and "query_seconds" in r}
        for r in t["rows"]:
            if r["store"] != "exact_search" and "query_seconds" in r and r["chunks"] in base:
                rows.append(f"| {r['store']} at {r['chunks']:,} chunks: ingest chunks/s, exact query time ÷ "
                            f"exact_search | {r['ingest_chunks_per_s']:,.0f}, {r['query_seconds'] / base[r['chunks']]['query_seconds']:.1f} "
                            "| (docs/stores.md) |")
    return ["| measure | result | target |", "|---|---|---|", *rows]


def assemble() -> None:
    results = HERE / "results"
    names = [n for name in ORDER for n in [name, *(p.stem for p in sorted(results.glob(f"{name}_against_*.md")))]]
    sections = [(results / f"{name}.md").read_text(encoding="utf-8") for name in names
                if (results / f"{name}.md").is_file()]  # a change measured against a ref follows its benchmark
    text = ["# Benchmark results", "",
            "Produced by `python bench/run_all.py` (each section names its own command). Timings on these machines "
            "are noisy, so every figure is a ratio measured side by side in one run (interleaved repeats, "
            "medians), never a bare time to compare across runs.", "", "## Headline", "", *headline(results), "",
            "## Details", "", *sections]
    if not (results / "gpu.md").is_file():
        text += ["### gpu", "", "Not measured: no GPU was available to the session that produced these results. "
                 "`python bench/gpu.py` is the prepared command; CI runs `python bench/gpu.py --tiny` on the CPU.", ""]
    (HERE / "RESULTS.md").write_text("\n".join(text), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assemble", action="store_true")
    args = parser.parse_args()
    if not args.assemble:
        for command in COMMANDS:
            print("$ python bench/" + " ".join(command), flush=True)
            code = subprocess.run([sys.executable, str(HERE / command[0]), *command[1:]]).returncode
            if code:
                print(f"bench/{command[0]} exited {code}", file=sys.stderr)
    assemble()
    return 0


if __name__ == "__main__":
    sys.exit(main())
