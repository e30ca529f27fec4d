"""The host's share of encoding: its ceiling per core against the tokenizer alone, and whether it hides behind a
device that blocks.

    python bench/host.py [--copies 4] [--repeats 3]

Corpus: the shipped sets' documents (real English, one-sentence chunks), `--copies` times over. Models: random
weights with real tokenisers (`bench/_models.py`): BERT (MiniLM's WordPiece), Qwen3 and pplx-embed-v2-context (a
byte-level BPE of Qwen's kind trained here).

1. **Host ceiling**, on one core (the process pinned to it, one torch thread, the tokenizer's own threads off): tokens/s
   of `encode_documents` with a small backbone (one layer, hidden 32; its attention is still quadratic in length) and
   with the backbone replaced by a device that costs nothing (the host's work alone: tokenising, layout, padding,
   pooling, copies), against `tokenize_text` alone on the same chunks, per layout, and the padding ratio (padded ÷
   real tokens) of the passes.
2. **A blocking device**, simulated on both cores: the backbone replaced by a stub that sleeps in proportion to the
   call's real tokens and returns zero states (a synchronous accelerator blocks the calling thread without using the
   CPU, and the backbone's work is the device's), scaled so the sleeps add up to the host's time H (the whole encode
   with a device that costs nothing, as before prefetching); the device's time D is the sleeps as they lasted (a
   sleep overshoots on a busy machine). Measured: the run as before (each batch prepared when the model needs it;
   `prefetch=0`) against now (batches prepared in a thread beside the model), each against H + D and max(H, D); then
   the same with torch at one thread (on an accelerator the pooling runs on the device; its CPU stand-in's OpenMP
   team would compete with the tokenizer's threads for the cores), then as on an accelerator (torch at one thread and
   the encoder's batch budget for an accelerator, 8 times the CPU's: the driving thread's work is per pass), and in a
   fresh process with `OMP_WAIT_POLICY=passive` (OpenMP's threads sleep instead of spinning while they wait). Each
   run also reports the driving thread's own time, on a core and ready but waiting for one, from the kernel's
   scheduler statistics (the run is the device's time plus that), and the seconds the whole process and torch's
   OpenMP workers spent on the cores: a worker that spins between the driving thread's parallel ops takes a core from
   the tokenizer.
3. **A plain CPU run** with the default model (MiniLM): now against before, side by side, to show nothing is slower.

Repeats are interleaved; medians are compared. Last line: the blocking device's ratio now ÷ max(H, D).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402
import _models  # noqa: E402

import contextembed  # noqa: E402
from contextembed.encoder import default_max_tokens_per_batch  # noqa: E402


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def as_before(encoder) -> None:
    """Each batch padded when the model needs it, every document tokenised before the first pass."""
    encoder.prefetch, encoder.prepare_group = 0, None


def as_now(encoder) -> None:
    encoder.prefetch, encoder.prepare_group = 2, 256


class Passes:
    """Counts the real and padded tokens of the backbone's calls."""

    def __init__(self, backbone):
        self.real = self.padded = 0
        self.handle = backbone.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        self.real += int(mask.sum()) if mask is not None else ids.numel()
        self.padded += ids.numel()

    def remove(self) -> None:
        self.handle.remove()


class Device:
    """The backbone replaced by a simulated accelerator: each call sleeps `seconds_per_token` per real token (a
    synchronous device blocks the calling thread without using the CPU) and returns zero states of the right shape.
    With 0 it costs nothing: what remains of an encode is the host's work."""

    def __init__(self, backbone, seconds_per_token: float = 0.0):
        from transformers.modeling_outputs import BaseModelOutput

        self.backbone, self.seconds_per_token, self.real, self.blocked = backbone, seconds_per_token, 0, 0.0
        hidden = backbone.config.hidden_size

        def forward(input_ids=None, attention_mask=None, **kwargs):
            real = int(attention_mask.sum()) if attention_mask is not None else input_ids.numel()
            self.real += real
            if self.seconds_per_token:
                start = time.perf_counter()
                time.sleep(real * self.seconds_per_token)
                self.blocked += time.perf_counter() - start  # what the device took: sleeps overshoot under load
            return BaseModelOutput(last_hidden_state=torch.zeros(*input_ids.shape, hidden))

        backbone.forward = forward

    def remove(self) -> None:
        del self.backbone.forward  # the class's own forward again


def host_ceiling(documents, repeats: int) -> dict:
    """Per layout, on one core: the encoder's and the tokenizer's tokens/s, and the passes' padding ratio."""
    out = {}
    for layout in _models.LAYOUTS:
        encoder = _models.encoder(layout)
        chunks = [c for d in documents for c in d]
        tokens = sum(len(r["input_ids"]) for r in encoder.processor.tokenize_documents(documents, task="document"))
        alone = timed(lambda: encoder.processor.tokenize_text(chunks), repeats)
        as_now(encoder)
        passes = Passes(encoder.model.backbone)
        encode = timed(lambda: encoder.encode_documents(documents, show_progress_bar=False), repeats)
        passes.remove()
        stub = Device(encoder.model.backbone)
        host_only = timed(lambda: encoder.encode_documents(documents, show_progress_bar=False), repeats)
        stub.remove()
        out[layout] = {"tokens": tokens, "tokenizer_tokens_per_second": sum(
            len(t) for t in encoder.processor.tokenize_text(chunks)) / alone,
            "encode_tokens_per_second": tokens / encode, "host_tokens_per_second": tokens / host_only,
            "padding_ratio": passes.padded / passes.real}
        out[layout]["encode_over_tokenizer"] = out[layout]["encode_tokens_per_second"] / out[layout][
            "tokenizer_tokens_per_second"]
    return out


def blocking_device(documents, repeats: int, torch_threads: int | None = None,
                    max_tokens_per_batch: int | None = None) -> dict:
    """`torch_threads`: torch's intra-op threads for the run (None: as they are). On an accelerator the pooling and
    head run on the device; here their CPU stand-ins run in torch's OpenMP team, which competes with the tokenizer's
    threads for the same two cores. `max_tokens_per_batch`: the encoder's budget (None: its default for the model's
    device, the CPU's here, a pass an eighth of an accelerator's)."""
    threads = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        return _blocking_device(documents, repeats, max_tokens_per_batch)
    finally:
        torch.set_num_threads(threads)


def _blocking_device(documents, repeats: int, max_tokens_per_batch: int | None) -> dict:
    encoder = _models.encoder("bert")
    as_before(encoder)
    run = lambda: encoder.encode_documents(documents, show_progress_bar=False,  # noqa: E731
                                           max_tokens_per_batch=max_tokens_per_batch)
    free = Device(encoder.model.backbone)  # a device that costs nothing: the host's time H
    host = timed(run, repeats)
    free.remove()
    counted = Device(encoder.model.backbone)
    run()
    counted.remove()
    sleeping = Device(encoder.model.backbone, seconds_per_token=host / counted.real)
    times, driving, cores = {"before": [], "now": []}, [], []
    for _ in range(repeats):
        for name, setting in (("before", as_before), ("now", as_now)):
            setting(encoder)
            sleeping.blocked = 0.0
            cpu, queued = scheduled()
            threads, process = thread_seconds(), os.times()
            start = time.perf_counter()
            run()
            # (the run's time, the device's: the sleeps as they lasted)
            times[name].append((time.perf_counter() - start, sleeping.blocked))
            if name == "now":
                driving.append(tuple(b - a for a, b in zip((cpu, queued), scheduled())))
                cores.append(core_seconds(threads, process))
    sleeping.remove()
    before, now = (statistics.median(t for t, _ in times[k]) for k in ("before", "now"))
    device = statistics.median(d for k in times for _, d in times[k])
    return {"host_seconds": host, "device_seconds": device, "before_seconds": before, "now_seconds": now,
            "before_over_sum": before / (host + device), "now_over_max": now / max(host, device),
            "now_over_before": now / before,
            # the driving thread's own time in the runs with prefetching: on a core, and ready but waiting for one
            "driving_cpu_seconds": statistics.median(c for c, _ in driving),
            "driving_runqueue_seconds": statistics.median(q for _, q in driving),
            # the process's seconds on a core in those runs: all its threads, and torch's OpenMP workers among them
            "process_cpu_seconds": statistics.median(p for p, _ in cores),
            "openmp_cpu_seconds": statistics.median(w for _, w in cores)}


# The threads torch's OpenMP team was started with (main() runs a parallel op before any tokenizer call starts the
# tokenizer's own pool): the calling thread and its OpenMP workers.
TORCH_THREADS: set[int] = set()


def thread_seconds() -> dict[int, float]:
    """Each of the process's threads' seconds on a core (`scheduled`; Linux, empty elsewhere)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return {}
    return {int(task): scheduled(int(task))[0] for task in tasks}


def core_seconds(threads: dict[int, float], process) -> tuple[float, float]:
    """Since `threads` (`thread_seconds()`) and `process` (`os.times()`): the process's seconds on a core, and those
    of torch's OpenMP workers (the threads started with torch's team, less the one that drives the model)."""
    now, after = thread_seconds(), os.times()
    workers = TORCH_THREADS - {threading.get_native_id()}
    openmp = sum(now[t] - threads.get(t, 0.0) for t in workers if t in now)
    return after.user + after.system - process.user - process.system, openmp


def scheduled(thread: int | None = None) -> tuple[float, float]:
    """A thread's (default: the calling one's) seconds on a core and seconds ready to run but waiting for one, from
    the kernel's scheduler statistics (Linux; zeros elsewhere, or once the thread has ended)."""
    try:
        with open(f"/proc/self/task/{thread or threading.get_native_id()}/schedstat") as stats:
            on_cpu, waiting, _ = stats.read().split()
    except OSError:
        return 0.0, 0.0
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def passive_openmp(args) -> dict:
    """The blocking device in a fresh process whose OpenMP threads sleep while they wait instead of spinning (read
    once, when OpenMP starts). Spinning lengthens the driving thread's time on a core while the tokenizer's threads
    hold the other core: by between a third and as much again in this project's runs."""
    import json
    import subprocess

    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    out = subprocess.run([sys.executable, __file__, "--copies", str(args.copies), "--repeats", str(args.repeats),
                          "--device-json"], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def device_figures(d: dict) -> str:
    """One blocking-device measurement as a report's words."""
    return (f"host {d['host_seconds']:.1f} s, device {d['device_seconds']:.1f} s; before {d['before_over_sum']:.2f} × "
            f"(host + device), now {d['now_over_max']:.2f} × max(host, device); the driving thread "
            f"{d['driving_cpu_seconds']:.2f} s on a core and {d['driving_runqueue_seconds']:.2f} s ready but waiting "
            f"for one; the process {d['process_cpu_seconds']:.1f} s on the cores, torch's OpenMP workers "
            f"{d['openmp_cpu_seconds']:.1f} s of it")


def plain_cpu(documents, repeats: int) -> dict:
    encoder = contextembed.load()
    times = {"before": [], "now": []}
    for _ in range(repeats + 1):
        for name, setting in (("before", as_before), ("now", as_now)):
            setting(encoder)
            start = time.perf_counter()
            encoder.encode_documents(documents, show_progress_bar=False)
            times[name].append(time.perf_counter() - start)
    before, now = (statistics.median(times[k][1:]) for k in ("before", "now"))
    return {"before_seconds": before, "now_seconds": now, "now_over_before": now / before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=4, help="the shipped documents this many times over")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", nargs="+", choices=("ceiling", "device", "cpu"), default=["ceiling", "device", "cpu"])
    parser.add_argument("--device-json", action="store_true", help=argparse.SUPPRESS)  # passive_openmp's child
    args = parser.parse_args()
    torch.ones(1 << 20).sum()  # torch's OpenMP team starts here, before the tokenizer's pool
    TORCH_THREADS.update(thread_seconds())
    documents = _models.shipped_texts() * args.copies
    if args.device_json:
        import json

        print(json.dumps(blocking_device(documents, args.repeats)))
        return 0
    data, lines = {"documents": len(documents)}, []
    if "device" in args.parts:
        data["device"] = d = blocking_device(documents, args.repeats)
        lines.append(f"- **blocking device** (BERT layout, the backbone a simulated device): {device_figures(d)} "
                     f"(now ÷ before {d['now_over_before']:.2f})")
        data["device_one_torch_thread"] = d = blocking_device(documents, args.repeats, torch_threads=1)
        lines.append(f"  - the same with torch at one thread (the pooling's CPU stand-in no longer spreads over both "
                     f"cores beside the tokenizer): {device_figures(d)}")
        data["device_as_on_an_accelerator"] = d = blocking_device(
            documents, args.repeats, torch_threads=1, max_tokens_per_batch=default_max_tokens_per_batch("cuda"))
        lines.append(f"  - the same as on an accelerator: torch at one thread, and the encoder's batch budget for an "
                     f"accelerator ({default_max_tokens_per_batch('cuda'):,} tokens a pass, where the CPU's is "
                     f"{default_max_tokens_per_batch('cpu'):,}; the driving thread's work is per pass): "
                     f"{device_figures(d)}")
        data["device_passive_openmp"] = d = passive_openmp(args)
        lines.append(f"  - the same with OpenMP's threads sleeping while they wait (`OMP_WAIT_POLICY=passive`, a fresh "
                     f"process): {device_figures(d)}")
    if "cpu" in args.parts:
        data["cpu"] = c = plain_cpu(documents[: len(documents) // args.copies], args.repeats)
        lines.append(f"- **plain CPU run**, default model (MiniLM), both cores: now ÷ before {c['now_over_before']:.3f}")
    if "ceiling" in args.parts:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        torch.set_num_threads(1)
        data["ceiling"] = ceiling = host_ceiling(documents, args.repeats)
        lines.append("- **host ceiling on one core** (tokens/s of the whole encode with a one-layer backbone, and "
                     "with the backbone a device that costs nothing (the host's work alone), against the tokenizer "
                     "alone on the same chunks; padded ÷ real tokens of the passes):")
        lines += [f"  - {layout}: encode {c['encode_tokens_per_second']:,.0f} tokens/s, host alone "
                  f"{c['host_tokens_per_second']:,.0f} tokens/s, tokenizer "
                  f"{c['tokenizer_tokens_per_second']:,.0f} tokens/s (encode ÷ tokenizer "
                  f"{c['encode_over_tokenizer']:.2f}), padding {c['padding_ratio']:.3f}"
                  for layout, c in ceiling.items()]
    lines.insert(0, f"{len(documents):,} documents: the shipped sets' {len(documents) // args.copies} documents "
                    f"{args.copies} times over, one-sentence chunks.")
    print("\n".join(lines))
    write_result("host", "python bench/host.py " + " ".join(sys.argv[1:]), lines, data)
    if "device" in data:
        print(f"blocking device, now / max(host, device): {data['device']['now_over_max']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
