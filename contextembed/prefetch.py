"""Host work beside the model: an iterator produced in a thread, a few items ahead of its consumer.

Tokenisers and torch release the GIL, so while the model runs batch N (on an accelerator, or in torch's own CPU
threads), a thread chunks, tokenises and pads batch N+1: the host's preparation runs beside the model's pass
instead of between passes. The encoder (`ContextEmbedder`), corpus encodes (`contextembed.pipeline`) and the server's
batcher prepare their batches through it. What runs in these threads is mostly the tokenizer's and numpy's compiled
code: Python code there holds the interpreter lock that the model's thread takes back after every torch call, and
slows it far more than the tokenizer does (docs/scale.md).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from contextembed.modeling import check_count


def prefetched(items: Iterator, depth: int = 1) -> Iterator:
    """`items`, produced in a thread up to `depth` ahead of the caller (tokenisers and torch release the GIL, so the
    host's preparation runs beside the model's pass). Order is kept; an error raised while producing surfaces here,
    in the caller; when the caller stops early (an interrupt, an error, `close`), the thread stops too.

    >>> list(prefetched(iter(range(5))))
    [0, 1, 2, 3, 4]
    """
    check_count(depth, "depth")
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stopped = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stopped.is_set():
                    try:
                        handoff.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stopped.is_set():
                    return
            outcome = (done, None)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread, which raises it
            outcome = (done, error)
        while not stopped.is_set():
            try:
                handoff.put(outcome, timeout=0.1)
                return
            except queue.Full:
                continue

    thread = threading.Thread(target=produce, name="contextembed-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = handoff.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stopped.set()
        thread.join(timeout=5)
