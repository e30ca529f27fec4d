"""A corpus of context-bench's size through the embedded index and LanceDB: stream, commit, resume, append, compact
and search, with a tiny random backbone so that the host and the index are what is measured.

    python bench/scale.py                                  # ~39k documents, ~2.5M sentence chunks (about an hour)
    python bench/scale.py --documents 2000 --parts index   # a smaller run of one part

The corpus is generated (nothing downloaded): JSON lines in context-bench's layout (`id`, `sentences`), 63 sentences
of about 14 words a document on average. The model is a BERT-shaped backbone of one layer (hidden 32) with 2,048
positions, so every document is one pass, and a 1024-d projection, so that vectors weigh what real ones do (4 KiB
each in float32). Each `contextembed` command runs in its own process; its wall time and peak memory are that
process's own (VmHWM, reported by the process itself). A run of some parts keeps, in the results file, the figures
an earlier run measured for the others on the same corpus (documents, chunks, width), so the parts can run one at a
time. Parts:

- `index`: `contextembed encode` into the index folder: chunks/s, peak RSS, size on disk;
- `resume`: the same encode killed (SIGKILL) at a third of the corpus, then the same command: what the rerun costs
  against the documents left, and the result against the uninterrupted index (documents, chunks, vectors);
- `append`: 50 new documents encoded into the 39k-document index: bytes written, and time against the full encode;
- `compact`: `contextembed compact`: time against the encode, size before and after;
- `search`: exact search (`search_documents`, k=10) over the index and over LanceDB (exact, brute force), one query
  at a time, side by side;
- `lancedb`: `contextembed encode` into `lancedb://`: chunks/s, peak RSS, size, against the index;
- `memory`: peak RSS of encodes of 10k, 100k and 300k short documents (8 sentences, 64-d vectors);
- `paper`: Q2D-Web on paper: what 190M documents cost with pplx-embed-v2-context-0.6b on N GPUs through Ray, from the
  model's FLOPs per token (its inferred geometry, `bench/_models.py`), an assumed MFU, and the host's measured
  tokenizer throughput per core (`bench/results/host.json`, from `bench/host.py`); and what their chunk vectors
  weigh, against what exact search can scan.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_result  # noqa: E402

PARTS = ("index", "resume", "append", "compact", "search", "lancedb", "memory", "paper")
SYLLABLES = "ba be bi bo bu da de di do du ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro " \
            "ru sa se si so su ta te ti to tu".split()


def vocabulary(size: int = 4000) -> list[str]:
    rng = np.random.default_rng(0)
    words = {"".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4)))) for _ in range(size * 3)}
    return sorted(words)[:size]


def write_corpus(path: Path, documents: int, sentences: int, seed: int = 0, first: int = 0) -> int:
    """Documents of about `sentences` sentences (4 to 24 words); returns the number of sentences written."""
    words = np.array(vocabulary())
    rng = np.random.default_rng(seed)
    total = 0
    with open(path, "a", encoding="utf-8") as f:
        for i in range(first, first + documents):
            n = max(1, int(rng.normal(sentences, sentences / 4)))
            lengths = rng.integers(4, 25, size=n)
            picked = words[rng.integers(0, len(words), size=int(lengths.sum()))]
            cuts = np.cumsum(lengths)[:-1]
            text = [" ".join(part).capitalize() + "." for part in np.split(picked, cuts)]
            f.write(json.dumps({"id": f"doc-{i:07d}", "sentences": text}) + "\n")
            total += n
    return total


def make_checkpoint(folder: Path, dim: int) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    import contextembed

    backbone = folder / "backbone"
    backbone.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (backbone / "vocab.txt").write_text("\n".join(specials + vocabulary() + list("abcdefghijklmnopqrstuvwxyz.,"))
                                        + "\n")
    tokenizer = BertTokenizer.from_pretrained(backbone)
    tokenizer.save_pretrained(backbone)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=2048)).save_pretrained(backbone)
    out = folder / f"checkpoint-{dim}"
    contextembed.build_checkpoint(backbone, out, projection_dim=dim, max_seq_length=2048, overwrite=True)
    return out


# `python -m MODULE ARGS` run so that the process reports its own peak RSS: /proc's VmHWM of the memory it builds
# after exec. (wait4's ru_maxrss would not do: Linux carries the forking process's peak over exec into the child's,
# so a driver that has mapped a 10 GB index would report 10 GB for every command it starts afterwards.)
PEAK = """
import re, runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    hwm = re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read())
    print(f"\\npeak-rss-kib {hwm.group(1)}", file=sys.stderr)
"""


def run(command: list[str], kill_when=None) -> dict:
    """Run `python -m ...` in its own process (killed with SIGKILL once `kill_when()` holds): wall seconds, its own
    peak RSS in MiB (None when killed), return code and output."""
    assert command[1] == "-m", command
    command = [command[0], "-c", PEAK, *command[2:]]
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        while process.poll() is None:
            if kill_when is not None and kill_when():
                process.send_signal(signal.SIGKILL)
                kill_when = None
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stderr = err.read()
        peaks = [line.split()[1] for line in stderr.splitlines() if line.startswith("peak-rss-kib ")]
        return {"seconds": seconds, "returncode": process.returncode, "stdout": out.read(), "stderr": stderr,
                "peak_mib": int(peaks[-1]) / 1024 if peaks else None}


def size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def manifest(path: Path) -> dict:
    try:
        return json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def files(folder: Path) -> dict:
    return {p: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def encode(corpus, out, checkpoint, *extra) -> list[str]:
    return [sys.executable, "-m", "contextembed", "encode", str(corpus), str(out), "--model", str(checkpoint),
            "--no-progress", *extra]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=38_894)
    parser.add_argument("--sentences", type=int, default=63, help="sentences per document, on average")
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--work", type=Path, default=Path("bench/out/scale"))
    parser.add_argument("--results", default="scale", help="the results file's name (bench/results/NAME.md)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.documents}.jsonl"
    if not corpus.is_file():
        sentences = write_corpus(corpus.with_suffix(".partial"), args.documents, args.sentences)
        corpus.with_suffix(".partial").rename(corpus)
        (work / f"{corpus.name}.sentences").write_text(str(sentences))
    sentences = int((work / f"{corpus.name}.sentences").read_text())
    checkpoint = make_checkpoint(work, args.dim)
    data = {"documents": args.documents, "chunks": sentences, "dim": args.dim,
            "corpus_mib": corpus.stat().st_size / 2**20}
    previous = _previous(args.results, data)  # earlier runs' figures on this corpus, kept unless re-measured
    data["commands"] = previous.get("commands", []) + ["python bench/scale.py " + " ".join(sys.argv[1:])]
    data.update({part: previous[part] for part in PARTS if part in previous and part not in args.parts})

    def save():  # after every part, so that a run stopped midway keeps what it measured
        write_result(args.results, " ; ".join(data["commands"]), render(data), data)

    index = work / "index"
    if "index" in args.parts or not manifest(index):
        shutil.rmtree(index, ignore_errors=True)
        result = run(encode(corpus, index, checkpoint))
        assert result["returncode"] == 0, result["stderr"][-2000:]
        data["index"] = {"seconds": result["seconds"], "peak_mib": result["peak_mib"], "size_mib": size_mib(index),
                         "chunks_per_second": sentences / result["seconds"],
                         "segments": len(manifest(index)["segments"])}
        save()
    if "resume" in args.parts:
        second = work / "index-resumed"
        shutil.rmtree(second, ignore_errors=True)
        third = args.documents // 3
        killed = run(encode(corpus, second, checkpoint),
                     kill_when=lambda: manifest(second).get("num_documents", 0) >= third)
        kept = manifest(second).get("num_documents", 0)
        resumed = run(encode(corpus, second, checkpoint))
        assert resumed["returncode"] == 0, resumed["stderr"][-2000:]
        data["resume"] = {"killed_returncode": killed["returncode"], "committed_when_killed": kept,
                          "resume_seconds": resumed["seconds"], "same_as_uninterrupted": _same_index(index, second)}
        shutil.rmtree(second, ignore_errors=True)
        save()
    if "append" in args.parts:
        appended = work / f"corpus-{args.documents}-plus-50.jsonl"
        shutil.copy(corpus, appended)
        write_corpus(appended, 50, args.sentences, seed=1, first=args.documents)
        before = files(index)
        result = run(encode(appended, index, checkpoint))
        assert result["returncode"] == 0, result["stderr"][-2000:]
        after = files(index)
        report = result["stdout"].strip().replace(str(index), index.name)  # no machine path in a results file
        data["append"] = {"seconds": result["seconds"],
                          "bytes_written": sum(stat[1] for path, stat in after.items() if before.get(path) != stat),
                          "index_bytes": sum(s[1] for s in after.values()), "report": report}
        save()
    if "compact" in args.parts:
        before = size_mib(index)
        segments = len(manifest(index)["segments"])
        result = run([sys.executable, "-m", "contextembed", "compact", str(index)])
        assert result["returncode"] == 0, result["stderr"][-2000:]
        data["compact"] = {"seconds": result["seconds"], "segments_before": segments, "size_before_mib": before,
                           "size_after_mib": size_mib(index), "peak_mib": result["peak_mib"]}
        save()
    lance = f"lancedb://{work / 'lance'}?table=chunks"
    if "lancedb" in args.parts:
        shutil.rmtree(work / "lance", ignore_errors=True)
        result = run(encode(corpus, lance, checkpoint, "--commit-every", "1000"))
        assert result["returncode"] == 0, result["stderr"][-2000:]
        data["lancedb"] = {"seconds": result["seconds"], "peak_mib": result["peak_mib"],
                           "size_mib": size_mib(work / "lance"), "chunks_per_second": sentences / result["seconds"]}
        save()
    if "search" in args.parts:
        # in a process of its own: the search maps the index's files, and a process this one forks afterwards would
        # start from (and report, in wait4's peak RSS) that much memory
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            data["search"] = pool.submit(_search, index, lance if (work / "lance").exists() else None, args.queries,
                                         args.dim).result()
        save()
    if "memory" in args.parts:
        # sizes measured by an earlier run and not now are kept
        data["memory"] = [m for m in previous.get("memory", []) if m["documents"] not in args.memory_sizes]
        small = make_checkpoint(work, 64)
        for size in args.memory_sizes:
            path = work / f"memory-{size}.jsonl"
            if not path.exists():
                write_corpus(path.with_suffix(".partial"), size, 8, seed=2)
                path.with_suffix(".partial").rename(path)
            out = work / f"memory-index-{size}"
            shutil.rmtree(out, ignore_errors=True)
            result = run(encode(path, out, small))
            assert result["returncode"] == 0, result["stderr"][-2000:]
            data["memory"].append({"documents": size, "peak_mib": result["peak_mib"], "seconds": result["seconds"],
                                   "size_mib": size_mib(out)})
            data["memory"].sort(key=lambda m: m["documents"])
            shutil.rmtree(out, ignore_errors=True)
            save()
    if "paper" in args.parts:
        data["paper"] = on_paper()
    save()
    print("\n".join(render(data)))
    print(headline(data))
    return 0


def _previous(name: str, data: dict) -> dict:
    """The results file of an earlier run on the same corpus (documents, chunks, width), or {}."""
    file = Path(os.environ.get("CONTEXTEMBED_BENCH_RESULTS", RESULTS)) / f"{name}.json"
    try:
        previous = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    same = all(previous.get(key) == data[key] for key in ("documents", "chunks", "dim"))
    return previous if same else {}


def render(data: dict) -> list[str]:
    """The results file's findings, from the figures: each time also given against the full encode."""
    full = data.get("index", {}).get("seconds")
    documents, chunks = data["documents"], data["chunks"]

    def against(seconds: float, what: str = "of the full encode") -> str:
        return f" ({seconds / full:.2f} {what})" if full else ""

    lines = [f"Corpus: {documents:,} generated documents, {chunks:,} sentence chunks ({data['corpus_mib']:,.0f} MiB "
             f"of JSON lines); a one-layer BERT-shaped backbone (hidden 32, 2,048 positions) with a {data['dim']}-d "
             "projection, float32 vectors. One process per command; times are this machine's, so each is also given "
             "against the full encode.", ""]
    if "index" in data:
        x = data["index"]
        lines.append(f"- **index**: {x['chunks_per_second']:,.0f} chunks/s ({x['seconds'] / 60:.1f} min), peak RSS "
                     f"{x['peak_mib']:,.0f} MiB, {x['size_mib']:,.0f} MiB on disk ({x['segments']} segments after the "
                     "merges along the way)")
    if "resume" in data:
        x = data["resume"]
        lines.append(f"- **resume**: killed (SIGKILL) with {x['committed_when_killed']:,} of {documents:,} documents "
                     f"committed; the same command then took {x['resume_seconds'] / 60:.1f} min"
                     + against(x["resume_seconds"], f"of the full encode, for "
                               f"{1 - x['committed_when_killed'] / documents:.2f} of the documents")
                     + f"; result against the uninterrupted index: {x['same_as_uninterrupted']}")
    if "append" in data:
        x = data["append"]
        lines.append(f"- **append** of 50 documents: {x['bytes_written'] / 2**20:,.1f} MiB written of a "
                     f"{x['index_bytes'] / 2**20:,.0f} MiB index, {x['seconds']:.0f} s"
                     + against(x["seconds"], "of the full encode; reading and hashing the documents it keeps is most "
                               "of it") + f": `{x['report']}`")
    if "compact" in data:
        x = data["compact"]
        lines.append(f"- **compact**: {x['segments_before']} segments into 1 in {x['seconds']:.0f} s"
                     + against(x["seconds"]) + f", {x['size_before_mib']:,.0f} → {x['size_after_mib']:,.0f} MiB, "
                     f"peak RSS {x['peak_mib']:,.0f} MiB")
    if "lancedb" in data:
        x = data["lancedb"]
        lines.append(f"- **LanceDB**: {x['chunks_per_second']:,.0f} chunks/s, peak RSS {x['peak_mib']:,.0f} MiB, "
                     f"{x['size_mib']:,.0f} MiB on disk" + against(x["seconds"], "of the index's encode time"))
    if "search" in data:
        x = data["search"]
        lines.append(f"- **exact search**, one query at a time (k=10): index {x['index_seconds']:.2f} s a query"
                     + (f", LanceDB {x['lancedb_seconds']:.2f} s (LanceDB / index: "
                        f"{x['lancedb_seconds'] / x['index_seconds']:.1f}); the same top 10 documents: "
                        f"{x['same_documents']}" if "lancedb_seconds" in x else ""))
    if data.get("memory"):
        lines.append("- **memory** of an encode against the corpus's size (8 sentences a document, 64-d vectors): "
                     + ", ".join(f"{m['documents']:,} documents {m['peak_mib']:,.0f} MiB" for m in data["memory"]))
    if "paper" in data:
        lines += ["", "**On paper: Q2D-Web (190M documents) with pplx-embed-v2-context-0.6b** (derived, not measured: "
                  "the FLOPs of its inferred geometry, an assumed MFU, this machine's tokenizer throughput per core):",
                  "", *data["paper"]["lines"]]
    return lines

def headline(data: dict) -> str:
    """The run's last line (bench/run_all.py's summary row)."""
    parts = [f"{data['chunks']:,} chunks"]
    if "index" in data:
        parts.append(f"index {data['index']['chunks_per_second']:,.0f} chunks/s, peak RSS "
                     f"{data['index']['peak_mib']:,.0f} MiB")
    if "memory" in data:
        parts.append("peak RSS by corpus size " + ", ".join(f"{m['documents']:,} docs {m['peak_mib']:,.0f} MiB"
                                                            for m in data["memory"]))
    return "scale: " + "; ".join(parts)


Q2D_DOCUMENTS = 190_000_000
Q2D_TOKENS_PER_DOCUMENT = 512  # the benchmark truncates every document to 512 tokens (SPEC §5): an upper bound
TOKENS_PER_CHUNK = 25  # a sentence chunk, about (context-bench: ~2.5M sentences of ~39k documents of ~6k tokens)
H100_BF16_TFLOPS = 989.0
MFU = 0.4


def on_paper() -> dict:
    """The Q2D-Web projection (see the module docstring): every assumption named beside the figure it gives."""
    import json as json_

    from transformers import Qwen3_5TextConfig, Qwen3_5TextModel

    import _models

    with torch_device("meta"):
        text = Qwen3_5TextModel(Qwen3_5TextConfig(vocab_size=248_320, max_position_embeddings=32_768, use_cache=False,
                                                  **_models.PPLX_V2_06B))
    embedding = text.get_input_embeddings().weight.numel()
    body = sum(p.numel() for p in text.parameters()) - embedding
    full_layers = _models.PPLX_V2_06B["layer_types"].count("full_attention")
    heads, head_dim = _models.PPLX_V2_06B["num_attention_heads"], _models.PPLX_V2_06B["head_dim"]
    # 2 FLOPs a parameter a token, plus a full-attention layer's scores and weighted sum over a 512-token document
    flops = 2 * body + full_layers * 4 * Q2D_TOKENS_PER_DOCUMENT * heads * head_dim
    tokens = Q2D_DOCUMENTS * Q2D_TOKENS_PER_DOCUMENT
    gpu_rate = MFU * H100_BF16_TFLOPS * 1e12 / flops  # tokens/s on one H100
    gpu_hours = tokens / gpu_rate / 3600
    host = Path(__file__).resolve().parent / "results" / "host.json"
    per_core = None
    if host.is_file():
        ceiling = json_.loads(host.read_text()).get("ceiling", {})
        per_core = (ceiling.get("pplx-v2") or {}).get("tokenizer_tokens_per_second")
    chunks = Q2D_DOCUMENTS * Q2D_TOKENS_PER_DOCUMENT // TOKENS_PER_CHUNK
    sizes = {"2048-d int8": 2048, "1024-d int8": 1024, "1024-d binary": 128, "IVF-PQ, 64-byte codes": 64}
    lines = [f"- tokens: {Q2D_DOCUMENTS:,} documents × at most {Q2D_TOKENS_PER_DOCUMENT} (the benchmark's "
             f"truncation) = {tokens:.2e}; chunk vectors at ~{TOKENS_PER_CHUNK} tokens a sentence: {chunks:.1e}",
             f"- model: {body / 1e6:.0f}M parameters past the {embedding / 1e6:.0f}M-parameter embedding (inferred "
             f"0.6b geometry), {flops / 1e9:.2f} GFLOP a token at 512 tokens",
             f"- at {MFU:.0%} MFU of an H100's {H100_BF16_TFLOPS:g} bf16 TFLOP/s (optimistic for a model this "
             f"narrow at 512 tokens): {gpu_rate:,.0f} tokens/s a GPU, {gpu_hours:,.0f} GPU-hours for the corpus "
             f"({gpu_hours / 64:,.1f} h on 64 GPUs through Ray, one actor per GPU); at 10% MFU "
             f"{gpu_hours * MFU / 0.1:,.0f} GPU-hours ({gpu_hours * MFU / 0.1 / 64:,.1f} h on 64). Gated-DeltaNet's "
             "recurrence adds work beyond 2 FLOPs a parameter, and bench/gpu.py --model pipeline measures the real "
             "rate when a GPU is lent; the published full evaluation of the 4B model took ~4,608 H200 hours"]
    if per_core:
        lines.append(f"- host: the BPE tokenises {per_core:,.0f} tokens/s on one core here (bench/host.py), so each "
                     f"GPU needs ~{gpu_rate / per_core:.1f} cores of tokenisation beside it: prefetched, as the "
                     "encoder does, or the GPU waits")
    lines.append("- vectors: " + ", ".join(f"{name} {chunks * width / 1e12:,.1f} TB" for name, width in sizes.items())
                 + ". Exact search reads every vector for every query: at ~10 GB/s of memory bandwidth a machine "
                 f"scans {10e9 / 1024:.1e} 1024-d int8 vectors a second, so one query over {chunks:.0e} takes "
                 f"~{chunks * 1024 / 10e9 / 60:.0f} minutes: at 10^9–10^10 vectors exact search no longer fits, and "
                 "an approximate index sharded over machines does (IVF-PQ or DiskANN-style graphs on disk with "
                 "compressed codes and exact rescoring of a shortlist: Milvus, Vespa, Qdrant or LanceDB clusters); "
                 "the embedded index stays the exact store of one machine's corpus (tens of millions of vectors).")
    return {"tokens": tokens, "chunks": chunks, "flops_per_token": flops, "gpu_tokens_per_second": gpu_rate,
            "gpu_hours": gpu_hours, "tokenizer_tokens_per_second_per_core": per_core, "lines": lines}


def torch_device(name: str):
    import torch

    return torch.device(name)


def _same_index(a: Path, b: Path) -> str:
    from contextembed.stores.index import IndexStore

    with IndexStore(a) as one, IndexStore(b) as two:
        hashes = one.document_hashes()
        if hashes != two.document_hashes():
            return "different documents"
        sample = sorted(hashes)[:: max(1, len(hashes) // 200)]
        pairs = zip(one.fetch_documents(sample), two.fetch_documents(sample))
        equal = all(x.chunks == y.chunks and np.array_equal(x.vectors, y.vectors) for x, y in pairs)
        return (f"the same {len(hashes):,} documents and {one.count_chunks():,} chunks; "
                f"{'the same' if equal else 'different'} vectors, bit for bit, in a sample of {len(sample)} documents")


def _search(index: Path, lance: str | None, queries: int, dim: int) -> dict:
    from contextembed.stores import open_store

    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(queries, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = {}
    found = {}
    for name, uri in (("index", str(index)), ("lancedb", lance)):
        if uri is None:
            continue
        with open_store(uri) as store:
            store.search_documents(vectors[0], k=10)  # warm: the first read maps the files
            start = time.perf_counter()
            found[name] = [[h.document for h in store.search_documents(q, k=10)] for q in vectors]
            out[f"{name}_seconds"] = (time.perf_counter() - start) / queries
    if len(found) == 2:
        out["same_documents"] = f"{sum(a == b for a, b in zip(found['index'], found['lancedb']))} of {queries} queries"
    return out


if __name__ == "__main__":
    sys.exit(main())
