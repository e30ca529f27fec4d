"""The user-facing encoder: `encode_documents` and `encode_queries` over a contextembed checkpoint.

A thin facade: tokenisation is the processor's, late chunking and long-document windows are the
model's, quantisation and scoring are pure functions elsewhere. What lives here is batching by
token budget (documents sorted by length, no pad-to-max), devices, dtypes and output formats.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from contextembed.choices import DTYPES, DType
from contextembed.batching import token_budget_batches
from contextembed.prefetch import prefetched
from contextembed.chunking import Chunk, ChunkerLike, chunk_text
from contextembed.mixing import check_local_mix, mix_alone
from contextembed.modeling import (
    ContextEmbedModel,
    ContextEmbedProcessor,
    EmptyChunks,
    LongDocuments,
    Precision,
    check_count,
    check_output_dim,
    normalize_documents,
    normalize_titles,
)
from contextembed.quantization import PRECISIONS, codes_raw_vectors, quantize

if TYPE_CHECKING:
    from contextembed.choices import Backend

logger = logging.getLogger(__name__)


@dataclass
class ChunkedEmbeddings:
    """A raw-text document after chunking: one vector per chunk, with the chunk texts and offsets."""

    embeddings: np.ndarray | torch.Tensor  # (n_chunks, D)
    chunks: list[Chunk]

    def __len__(self) -> int:
        """The number of chunks (one vector each)."""
        return len(self.chunks)


class ContextEmbedder:
    """Encode documents (lists of chunks, or raw text with a chunker) and queries.

    Build it with `contextembed.load(...)` or `ContextEmbedder.from_pretrained(...)`.
    """

    def __init__(self, model: ContextEmbedModel, processor: ContextEmbedProcessor, device: str | None = None):
        self.model = model.eval()
        self.processor = processor
        # What `encode_documents(local_mix=None)` uses: set it once (`model.local_mix = 0.1`) and every call uses it,
        # including the calls a RAG framework makes with this encoder. Not saved with the checkpoint.
        self.local_mix = 0.0
        # Host work beside the model: batches padded this many ahead in a thread (0: each when the model needs it),
        # and documents tokenised up to `prepare_group` at a time there (None: all at once, before the first pass).
        self.prefetch = 2
        self.prepare_group: int | None = 256
        if device is not None:
            self.model.to(device)

    @classmethod
    def from_pretrained(
        cls,
        path_or_id: str | Path,
        *,
        device: str | None = None,
        dtype: torch.dtype | DType | None = None,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | Path | None = None,
        local_files_only: bool = False,
        attn_implementation: str | None = None,
        backend: Backend = "torch",
        file_name: str | None = None,
        num_threads: int | None = None,
    ) -> ContextEmbedder:
        """Load a local checkpoint directory or a Hub repository (through the Hugging Face cache).

        `backend="onnx"` or `"openvino"` runs the graph that `contextembed export` wrote into the checkpoint
        (`file_name` picks another one, e.g. `"onnx/model_qint8.onnx"`) on the CPU, with the same processor,
        pooling and windowing as torch; `num_threads` sets its runtime's threads (default: every core; torch's are
        the process's own, `torch.set_num_threads`).
        """
        from contextembed.checkpoint import check_checkpoint_files
        from contextembed.convert import source_converter
        from contextembed.hub import resolve_checkpoint

        weights_dtype = resolve_dtype(dtype, device)  # a bad dtype is named before any download
        path = resolve_checkpoint(path_or_id, revision=revision, token=token, cache_dir=cache_dir,
                                  local_files_only=local_files_only)
        convert = source_converter(path) if backend == "torch" else None  # Perplexity's layouts, in memory
        if convert is None:  # (the converters check their own files)
            # Every file named by its problem, before transformers reads it (its errors name neither, and its
            # advice for a pickle is weights_only=False).
            check_checkpoint_files(path, weights=backend == "torch")
        if backend != "torch":
            from contextembed.backends import BackendModel

            ignored = {"dtype": dtype not in (None, "float32", torch.float32), "attn_implementation":
                       attn_implementation is not None, "device": device not in (None, "cpu")}
            if any(ignored.values()):
                raise ValueError(f"backend={backend!r} runs its exported float32 graph on the CPU: "
                                 f"{', '.join(k for k, v in ignored.items() if v)} cannot be set")
            return cls(BackendModel.from_pretrained(path, backend, file_name, num_threads),
                       ContextEmbedProcessor.from_pretrained(path))
        if file_name is not None:
            raise ValueError("file_name picks an exported graph: pass backend='onnx' or 'openvino' with it")
        if num_threads is not None:
            raise ValueError("num_threads sets ONNX Runtime's or OpenVINO's threads: torch's are the process's, "
                             "set with torch.set_num_threads")
        if convert is not None:  # `contextembed convert` saves the same conversion as a checkpoint
            if attn_implementation is not None:
                raise ValueError("attn_implementation cannot be set when a pplx checkpoint is converted on load")
            model, processor = convert(path, dtype=weights_dtype)  # a v2 projection stays fp32
            return cls(model, processor, device=device)
        kwargs = {"dtype": weights_dtype}
        if attn_implementation is not None:
            kwargs["attn_implementation"] = attn_implementation
        model = ContextEmbedModel.from_pretrained(path, **kwargs)
        processor = ContextEmbedProcessor.from_pretrained(path)
        return cls(model, processor, device=device)

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def backend(self) -> str:
        """`"torch"`, or the exported backend running the model (`"onnx"`, `"openvino"`)."""
        return getattr(self.model, "backend", "torch")

    @property
    def dim(self) -> int:
        """The width of the vectors returned when a call asks for none (`output_dim=None`): the checkpoint's default
        `output_dim`, else its full width (`embedding_dim`)."""
        return self.config.output_dim or self.config.embedding_dim

    def encode_documents(
        self,
        documents: Sequence[Sequence[str] | str],
        *,
        chunker: ChunkerLike | None = None,
        titles: Sequence[str | None] | None = None,
        batch_size: int = 32,
        max_tokens_per_batch: int | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        output_dim: int | None = None,
        precision: Precision = "float32",
        normalize: bool = True,
        long_documents: LongDocuments = "window",
        empty_chunks: EmptyChunks | None = None,
        local_mix: float | None = None,
    ) -> list[np.ndarray] | list[ChunkedEmbeddings]:
        """Embed every chunk of every document with the whole document in view.

        Args:
            documents: a list (or any iterable) of documents, each a list of chunk strings (kept exactly) or a
                raw string. A raw string is one chunk unless `chunker` is given.
            chunker: `"sentences"`, `"paragraphs"`, `"markdown"`, `"tokens"`, a `TokenChunks` or a callable;
                documents must then be raw strings, and each result carries its chunk texts and offsets.
            titles: optional text per document, kept as context in every window and never pooled.
            batch_size: most documents per forward pass.
            max_tokens_per_batch: most padded tokens per forward pass (documents are sorted by length); `None`:
                `default_max_tokens_per_batch(device)` (2048 on CPU, 16384 on an accelerator).
            show_progress_bar: `None` shows it for more than 256 documents.
            convert_to_tensor: return torch tensors instead of numpy arrays.
            output_dim: Matryoshka size (one of the checkpoint's dims); cut, then re-normalised.
            precision: one of `PRECISIONS`; int8/uint8/binary/ubinary use the checkpoint's fixed scheme.
            normalize: L2-normalise the vectors (required for the quantised precisions).
            long_documents: `"window"` (overlapping windows past the model's length) or `"error"`.
            empty_chunks: a chunk with no tokens (empty or whitespace only) is an error (`"error"`, naming the
                document and chunk) or keeps an all-zero row (`"zero"`); `None`: the checkpoint's processor's
                setting (`"error"`, except for pplx-embed-v2-context, whose reference gives a zero vector).
            local_mix: w in [0, 1]: each chunk's vector becomes `normalize((1 - w) * contextual + w * alone)`, with
                `alone` the chunk encoded by itself, so it keeps its own words beside its document (more of the
                supporting context ranks near the answer). It costs a second, short pass over every chunk; 0 (the
                default) is one pass. Needs normalised vectors; a query is one chunk, so queries need no mix.
                `None`: the encoder's `local_mix` attribute (0 unless set).

        Returns:
            One `(n_chunks, dim)` array per document, in input order; with a chunker, one `ChunkedEmbeddings` each.
        """
        documents = _as_list(documents, "documents", "a list of documents (wrap a single document in a list)")
        chunk_lists = None
        if chunker is None and documents:
            documents = normalize_documents(documents, "documents")  # a string is a one-chunk document
        if chunker is not None:
            chunk_lists = []
            for i, text in enumerate(documents):
                if not isinstance(text, str):
                    raise ValueError(f"with a chunker, document {i} must be raw text (str), got "
                                     f"{type(text).__name__}")
                try:
                    chunks = chunk_text(text, chunker, tokenizer=self.processor.tokenizer)
                except ValueError as error:
                    raise ValueError(f"document {i}: {error}") from error
                if not chunks:
                    raise ValueError(f"document {i} produced no chunks (it is empty or only whitespace)")
                chunk_lists.append(chunks)
            documents = [[c.text for c in chunks] for chunks in chunk_lists]
        local_mix = check_local_mix(self.local_mix if local_mix is None else local_mix)
        _check_options(batch_size, max_tokens_per_batch, precision, normalize)
        if local_mix and not normalize:
            raise ValueError("local_mix mixes unit vectors: keep normalize=True")
        if local_mix and precision != "float32" and codes_raw_vectors(self.config.int8_scheme):
            raise ValueError(f"local_mix mixes unit vectors, and this checkpoint's int8 scheme "
                             f"({self.config.int8_scheme!r}) codes raw vectors: use precision='float32' and code the "
                             "mixed vectors yourself")
        options = {"batch_size": batch_size, "max_tokens_per_batch": max_tokens_per_batch,
                   "show_progress_bar": show_progress_bar, "output_dim": output_dim, "normalize": normalize,
                   "long_documents": long_documents, "empty_chunks": empty_chunks}
        vectors = self._encode(documents, task="document", titles=titles,
                               precision="float32" if local_mix else precision, **options,
                               warn_long_chunks=chunker is not None)
        if local_mix:
            vectors = self._mix_alone(documents, vectors, local_mix, precision, options)
        vectors = [self._convert(v, convert_to_tensor) for v in vectors]
        if chunk_lists is None:
            return vectors
        return [ChunkedEmbeddings(v, chunks) for v, chunks in zip(vectors, chunk_lists)]

    def encode_queries(
        self,
        queries: Sequence[str],
        *,
        batch_size: int = 32,
        max_tokens_per_batch: int | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        output_dim: int | None = None,
        precision: Precision = "float32",
        normalize: bool = True,
    ) -> np.ndarray | torch.Tensor:
        """Embed queries (with the checkpoint's query prefix): one `(n_queries, output_dim)` array.

        An empty (or whitespace-only) query is an error naming it: it has nothing to embed.
        """
        queries = _as_list(queries, "queries", "a list of strings (wrap a single query in a list)")
        for i, query in enumerate(queries):
            if not isinstance(query, str):
                raise ValueError(f"query {i} must be a str, got {type(query).__name__}")
        vectors = self._encode([[q] for q in queries], task="query", titles=None, batch_size=batch_size,
                               max_tokens_per_batch=max_tokens_per_batch, show_progress_bar=show_progress_bar,
                               output_dim=output_dim, precision=precision, normalize=normalize,
                               long_documents="window", empty_chunks="error")
        if vectors:
            return self._convert(np.concatenate(vectors), convert_to_tensor)
        return self._convert(quantize(np.zeros((0, output_dim or self.dim), np.float32), precision,
                                      self.config.int8_clip_sigmas, self.config.int8_scheme), convert_to_tensor)

    def encode_tokenized(
        self,
        rows: Sequence[dict],
        *,
        batch_size: int = 32,
        max_tokens_per_batch: int | None = None,
        show_progress_bar: bool | None = None,
        output_dim: int | None = None,
        precision: Precision = "float32",
        normalize: bool = True,
    ) -> list[np.ndarray]:
        """Embed documents already tokenised by `processor.tokenize_documents` (its rows, for documents or queries):
        one `(n_chunks, dim)` array per row, as `encode_documents` / `encode_queries` give for the same texts. For a
        caller that tokenises anyway: the server tokenises each request once, to check its limits and count its
        usage before it queues it, and embeds those rows."""
        _check_options(batch_size, max_tokens_per_batch, precision, normalize)
        rows = list(rows)
        check_output_dim(self.config, output_dim)
        if not rows:
            return []
        return self._encode_rows([(0, rows)], len(rows), batch_size=batch_size,
                                 max_tokens_per_batch=max_tokens_per_batch, show_progress_bar=show_progress_bar,
                                 output_dim=output_dim, precision=precision, normalize=normalize, unit="documents")

    def _encode(self, documents, *, task, titles, batch_size, max_tokens_per_batch, show_progress_bar, output_dim,
                precision, normalize, long_documents, empty_chunks, warn_long_chunks=False) -> list[np.ndarray]:
        _check_options(batch_size, max_tokens_per_batch, precision, normalize)
        if len(documents) == 0:
            check_output_dim(self.config, output_dim)  # no forward pass runs to check it
            return []
        check_output_dim(self.config, output_dim)
        titles = normalize_titles(titles, len(documents))
        long_chunks: list[tuple[int, int]] = []

        def groups():
            """Documents tokenised a group at a time, in the prefetch thread beside the model's passes: groups grow
            from `batch_size` documents (the first pass starts soon) to `prepare_group` (passes are planned within a
            group, so a large one pads little)."""
            first, step = 0, min(batch_size, self.prepare_group or len(documents))
            while first < len(documents):
                try:
                    rows = self.processor.tokenize_documents(
                        documents[first : first + step], task=task, long_documents=long_documents,
                        empty_chunks=empty_chunks, titles=titles[first : first + step] if any(titles) else None)
                except ValueError as error:
                    raise _renumbered(error, first) from None
                if warn_long_chunks:
                    long_chunks.extend(_long_chunks(rows, self.config.max_seq_length, first))
                yield first, rows
                first, step = first + step, min(2 * step, self.prepare_group or len(documents))

        results = self._encode_rows(groups(), len(documents), batch_size=batch_size,
                                    max_tokens_per_batch=max_tokens_per_batch, show_progress_bar=show_progress_bar,
                                    output_dim=output_dim, precision=precision, normalize=normalize,
                                    unit="documents" if task == "document" else "queries")
        if long_chunks:
            _warn_long_chunks(long_chunks, self.config.max_seq_length)
        return results

    def _encode_rows(self, groups, count: int, *, batch_size, max_tokens_per_batch, show_progress_bar, output_dim,
                     precision, normalize, unit) -> list[np.ndarray]:
        """Embed rows that come in groups (`(index of the group's first row, rows)`), `count` rows in all: each
        group's rows batched by `token_budget_batches`, every batch padded (and, on CUDA, pinned) in the prefetch
        thread while the model runs the one before; results copied back without waiting on CUDA."""
        if max_tokens_per_batch is None:
            max_tokens_per_batch = default_max_tokens_per_batch(self.device)
        results: list[np.ndarray | None] = [None] * count
        cuda = self.device.type == "cuda"

        def batches():
            # the next group is tokenised in a thread of its own while this group's batches are padded and run: a
            # group holds many batches, more than the prefetch queue, so tokenising it between them would stall
            ahead = prefetched(groups, depth=1) if self.prefetch else groups
            try:
                for first, rows in ahead:
                    for batch in token_budget_batches([len(r["input_ids"]) for r in rows], batch_size,
                                                      max_tokens_per_batch):
                        features = self.processor.pad([rows[i] for i in batch])
                        if cuda:
                            features = {k: v.pin_memory() for k, v in features.items()}
                        yield [first + i for i in batch], [rows[i]["num_chunks"] for i in batch], features
            finally:
                if hasattr(ahead, "close"):
                    ahead.close()

        def finish(done) -> None:
            indices, chunks, vectors, copied = done
            if copied is not None:
                copied.synchronize()  # the copy back of this batch has landed
            vectors = vectors.numpy()  # (B, C, D), cut and normalised by the model
            finite = np.isfinite(vectors).all(axis=-1)  # (B, C); padding chunks are zero rows
            for row, (i, n) in enumerate(zip(indices, chunks)):
                results[i] = vectors[row, :n]
                if not finite[row, :n].all():
                    chunk = int(np.flatnonzero(~finite[row, :n])[0])
                    raise ValueError(f"the model gave {unit[:-1] if unit == 'documents' else 'query'} {i}, chunk "
                                     f"{chunk} a vector with NaN or infinite values: the checkpoint's weights or "
                                     "its dtype (float16 overflows) are broken, and no vector of it can be ranked")

        scheme = self.config.int8_scheme
        if precision in ("int8", "uint8") and codes_raw_vectors(scheme):
            normalize = False  # pplx-embed's schemes code the unnormalised chunk vector
        progress = _progress(count, show_progress_bar, unit)
        pending = None
        source = prefetched(batches(), depth=self.prefetch) if self.prefetch else batches()
        device = self.device  # read once: the property walks the model's parameters
        try:
            with torch.inference_mode():
                for indices, chunks, features in source:
                    features = {k: v.to(device, non_blocking=cuda) for k, v in features.items()}
                    out = self.model(**features, output_dim=output_dim, normalize=normalize)
                    vectors, copied = out.chunk_embeddings.float(), None
                    if cuda:  # queue the copy back and go on: the next batch is launched before this one is read
                        vectors = vectors.to("cpu", non_blocking=True)
                        copied = torch.cuda.Event()
                        copied.record()
                    if pending is not None:
                        finish(pending)
                    pending = (indices, chunks, vectors, copied)
                    if progress is not None:
                        progress.update(len(indices))
                if pending is not None:
                    finish(pending)
        finally:
            if progress is not None:
                progress.close()
            if hasattr(source, "close"):
                source.close()
        if precision != "float32":
            results = [quantize(v, precision, self.config.int8_clip_sigmas, scheme) for v in results]
        return results

    def _mix_alone(self, documents, vectors, weight, precision, options) -> list[np.ndarray]:
        """`vectors` (float32, one array per document) mixed with every chunk encoded alone, then coded."""
        chunks = [chunk for document in documents for chunk in document]
        alone = self._encode([[chunk] for chunk in chunks], task="document",
                             titles=None, precision="float32", **options)
        bounds = np.cumsum([0] + [len(v) for v in vectors])
        mixed = [mix_alone(v, np.concatenate(alone[a:b]) if b > a else v, weight)
                 for v, a, b in zip(vectors, bounds[:-1], bounds[1:])]
        if precision == "float32":
            return mixed
        return [quantize(v, precision, self.config.int8_clip_sigmas, self.config.int8_scheme) for v in mixed]

    def _convert(self, array: np.ndarray, convert_to_tensor: bool):
        return torch.from_numpy(array) if convert_to_tensor else array

    def save_pretrained(self, output_dir: str | Path) -> Path:
        """Save as a checkpoint loadable by contextembed, transformers and sentence-transformers."""
        from contextembed.checkpoint import save_checkpoint

        if self.backend != "torch":
            raise ValueError(f"this model runs an exported {self.backend} graph, which holds no torch weights to "
                             "save: load the checkpoint with backend='torch' to save it")
        return save_checkpoint(self.model, self.processor, output_dir)

    def push_to_hub(self, repo_id: str, *, private: bool | None = None, token: str | None = None,
                    commit_message: str = "Upload contextembed checkpoint") -> str:
        """Save to a temporary folder and upload it with `huggingface_hub.HfApi.upload_folder`."""
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp)
            return api.upload_folder(folder_path=tmp, repo_id=repo_id, commit_message=commit_message)


def _check_options(batch_size, max_tokens_per_batch, precision, normalize) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "float32" and not normalize:
        raise ValueError(f"precision={precision!r} codes unit vectors: keep normalize=True")
    checked = {"batch_size": batch_size}
    if max_tokens_per_batch is not None:  # None: the device's default
        checked["max_tokens_per_batch"] = max_tokens_per_batch
    for name, value in checked.items():
        check_count(value, name)


def default_max_tokens_per_batch(device: torch.device | str) -> int:
    """Padded tokens per forward pass when the caller sets none: 16384 on an accelerator, where small passes leave
    the device idle; 2048 on CPU, where a pass that large already runs at full speed per token and larger ones run
    slower (docs/serving.md: passes of 16384 took 1.2x as long as 512-2048 on the shipped recipes set).

    >>> default_max_tokens_per_batch("cpu"), default_max_tokens_per_batch("cuda:0")
    (2048, 16384)
    """
    return 2048 if torch.device(device).type == "cpu" else 16384


def _long_chunks(rows: list[dict], window: int, first: int = 0) -> list[tuple[int, int]]:
    """(document, tokens) of every chunk longer than a window, documents numbered from `first`."""
    long = []
    for doc, row in enumerate(rows, first):
        lengths = np.bincount(np.asarray(row["chunk_ids"]) + 1, minlength=row["num_chunks"] + 1)[1:]  # (C,)
        long += [(doc, int(n)) for n in lengths if n > window]
    return long


def _warn_long_chunks(long: list[tuple[int, int]], window: int) -> None:
    """One warning for the chunks a chunker made longer than a window (a long text with no sentence boundary, say):
    each still gets its one vector, but that vector averages pieces pooled in separate windows."""
    logger.warning(
        "%d chunk(s) are longer than a window of %d tokens (the first: %d tokens, in document %d); each is "
        "embedded as the mean of pieces pooled in separate windows, so one vector stands for a long span: "
        "split such text into smaller chunks (for example chunker='tokens')", len(long), window, long[0][1],
        long[0][0])


def _renumbered(error: ValueError, first: int) -> ValueError:
    """A tokeniser's error about "document i" / "query i" of a group, renumbered to the whole input's index."""
    import re

    message = re.sub(r"\b(document|query) (\d+)\b", lambda m: f"{m.group(1)} {int(m.group(2)) + first}",
                     str(error), count=1)
    return ValueError(message)


def _as_list(values, name: str, expected: str) -> list:
    """A list from any iterable (a generator is read once, here); a bare string or a non-iterable is an error."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable) or isinstance(values, Mapping):
        raise ValueError(f"{name} must be {expected}, got {type(values).__name__}")
    return list(values)


def _progress(count: int, show: bool | None, unit: str):
    """A bar over `count` documents (None: shown for more than 256), or None."""
    if show is False or (show is None and count <= 256):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=count, desc=f"Encoding {unit}", unit=unit[:-1] if unit.endswith("s") else unit)




def native_bf16(device: str | torch.device | None = None) -> bool:
    """Whether the device computes bfloat16 natively: a CUDA GPU that supports it, or a CPU with AVX512-BF16 / AMX
    (oneDNN's check). Elsewhere bf16 is emulated and slower than float32."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def resolve_dtype(dtype, device: str | torch.device | None = None) -> torch.dtype:
    """The weights' dtype: float32 by default; `"auto"` is bfloat16 where `native_bf16(device)`, else float32.

    >>> resolve_dtype(None), resolve_dtype("float16"), resolve_dtype("auto", "meta")
    (torch.float32, torch.float16, torch.float32)
    """
    if dtype is None:
        return torch.float32
    if isinstance(dtype, str):
        if dtype == "auto":
            return torch.bfloat16 if native_bf16(device) else torch.float32
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"dtype must be a torch dtype, its name (e.g. 'bfloat16') or 'auto', got {dtype!r}")
        return getattr(torch, dtype)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch dtype, its name (e.g. 'bfloat16') or 'auto', got {dtype!r}")
    return dtype