"""`contextembed encode` at scale, in small shapes: a JSON-lines corpus streamed into the index, an encode interrupted
(SIGINT, SIGTERM, SIGKILL) and resumed into the same index as a run that never stopped, and memory that does not grow
with the corpus (measured in a subprocess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import contextembed
from contextembed.cli import main
from contextembed.stores import open_store

WORDS = "the lease rent tenant company street table row section rule date year deposit landlord".split()


def write_corpus(path, documents: int, seed: int = 0):
    """A JSON-lines corpus: raw-text documents of 4 to 8 sentences, every tenth given as its sentences."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(documents):
            sentences = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 9)))) + "." for _ in range(
                int(rng.integers(4, 9)))]
            record = {"id": f"doc-{i:05d}", "sentences": sentences} if i % 10 == 0 else \
                {"id": f"doc-{i:05d}", "text": " ".join(sentences), "metadata": {"shard": i % 3}}
            f.write(json.dumps(record) + "\n")
    return path


def contents(uri) -> dict:
    """Every document of a store: its chunks, vectors, metadata and hash."""
    with open_store(uri) as store:
        ids = sorted(store.document_hashes())
        return {d.id: d for d in store.fetch_documents(ids)}


def assert_same_index(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for i in a:
        assert a[i].chunks == b[i].chunks and a[i].metadata == b[i].metadata and a[i].content_hash == b[i].content_hash
        assert np.array_equal(a[i].vectors, b[i].vectors), i  # the same forward passes: the same bits


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", 1000)


@pytest.fixture(scope="module")
def uninterrupted(built, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "index"
    assert main(["encode", str(corpus), str(out), "--model", str(built["bert"][0]), "--commit-every", "20",
                 "--no-progress"]) == 0
    return contents(out)


def test_a_jsonl_corpus_is_encoded_document_by_document(corpus, uninterrupted):
    assert len(uninterrupted) == 1000
    first = uninterrupted["doc-00000"]  # given as sentences: kept exactly, placed as if joined by a space
    record = json.loads(corpus.read_text().splitlines()[0])
    assert [c.text for c in first.chunks] == record["sentences"] and first.chunks[1].start == len(record["sentences"][0]) + 1
    assert uninterrupted["doc-00001"].metadata == {"shard": 1}


def encode_command(built, corpus, out, *extra):
    return [sys.executable, "-m", "contextembed", "encode", str(corpus), str(out), "--model", str(built["bert"][0]),
            "--commit-every", "20", "--no-progress", *extra]


def committed(out) -> int:
    try:
        return json.loads((out / "manifest.json").read_text())["num_documents"]
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize("signal_number", [signal.SIGINT, pytest.param(signal.SIGKILL, marks=pytest.mark.slow),
                                           pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_an_interrupted_encode_keeps_what_it_committed_and_the_same_command_finishes_it(
        built, corpus, uninterrupted, tmp_path, signal_number):
    out = tmp_path / "index"
    command = encode_command(built, corpus, out)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while committed(out) < 40 and process.poll() is None:  # two commits in: stop it mid-run
            time.sleep(0.01)
        process.send_signal(signal_number)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    kept = committed(out)
    assert 40 <= kept < 1000 and kept % 20 == 0, (kept, stderr)  # whole batches, and not the whole corpus
    if signal_number == signal.SIGKILL:
        assert process.returncode == -9
    else:
        assert process.returncode == 128 + signal_number, stderr
        assert f"interrupted: {kept} documents embedded and committed by this run, {kept} in {out} in all; " \
               "run the same command to resume" in stderr
    assert contents(out).keys() <= uninterrupted.keys()
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"added {1000 - kept}, replaced 0, deleted 0, kept {kept} documents" in resumed.stdout
    assert_same_index(contents(out), uninterrupted)


@pytest.mark.slow
def test_the_same_for_a_database_store(built, corpus, uninterrupted, tmp_path):
    pytest.importorskip("lancedb")
    uri = f"lancedb://{tmp_path / 'lance'}?table=docs"
    command = encode_command(built, corpus, uri)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while process.poll() is None and (not (tmp_path / "lance").exists() or len(contents(uri)) < 40):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
    finally:
        process.kill()
    kept = len(contents(uri))
    assert 40 <= kept < 1000
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and f"kept {kept} documents" in resumed.stdout, resumed.stderr
    done = contents(uri)
    assert sorted(done) == sorted(uninterrupted)
    for i in done:
        np.testing.assert_allclose(done[i].vectors, uninterrupted[i].vectors, atol=1e-6)


# The process's own peak (VmHWM of the memory it built after exec): getrusage's ru_maxrss would not do, since Linux
# carries the forking process's peak (here pytest's) over exec into the child's.
PEAK_MEMORY = """
import re, sys
from contextembed.cli import main
code = main(["encode", sys.argv[1], sys.argv[2], "--model", sys.argv[3], "--commit-every", "100", "--no-progress"])
print("peak", int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) // 1024, code)
"""


@pytest.fixture(scope="module")
def wide_checkpoint(backbone_dirs, tmp_path_factory):
    """Tiny backbone, heavy vectors: a 1024-d projection makes what the index would hold show in the memory."""
    out = tmp_path_factory.mktemp("wide") / "checkpoint"
    contextembed.build_checkpoint(backbone_dirs["bert"], out, projection_dim=1024, max_seq_length=64)
    return out


def test_memory_does_not_grow_with_the_corpus(wide_checkpoint, tmp_path):
    """300 documents and 2,000 (12,000 chunk vectors of 4 KiB: 47 MiB if an encode held them) peak alike.

    oneDNN's cache of CPU kernels, one per batch shape met, grows towards its capacity (1,024 kernels) over any long
    run, about 1.3 MiB per 1,000 of these documents: the model's own memory, bounded, switched off here so that
    what is measured is what contextembed holds (bench/scale.py measures with it)."""
    peaks = {}
    for documents in (300, 2000):
        corpus = write_corpus(tmp_path / f"{documents}.jsonl", documents, seed=documents)
        run = subprocess.run([sys.executable, "-c", PEAK_MEMORY, str(corpus), str(tmp_path / f"index-{documents}"),
                              str(wide_checkpoint)], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"})
        _, peak, code = run.stdout.splitlines()[-1].split()
        assert code == "0", run.stderr
        peaks[documents] = int(peak)
    assert peaks[2000] - peaks[300] < 10, peaks  # MiB
