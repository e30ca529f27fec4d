"""What a careless or hostile caller can hand the API, the command line and the loaders.

Every case is one row: a bad input and the message that must name its problem (a `ValueError` from the
API and the loaders, exit status 2 and `contextembed <command>: error: ...` on stderr from the CLI). Rows that
are not errors check the documented behaviour instead (generators, numpy integers, empty batches).
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

import contextembed
from contextembed.cli import main
from contextembed.quantization import quantize

LONG = [f"the lease rent {i} is due" for i in range(40)]  # longer than the 64-token window of the tiny model


@pytest.fixture(scope="module")
def tiny(built):
    path = built["bert"][0]
    return path, contextembed.load(str(path))


def out_of_order(text):
    return [(5, 9), (0, 4)]


API_ERRORS = {
    # empty chunks and queries: nothing to embed, so no silent zero vector
    "empty chunk": (lambda m: m.encode_documents([["", "x"]]), "document 0, chunk 0 is empty"),
    "whitespace chunk": (lambda m: m.encode_documents([["x"], ["x", " \n\t "]]), "document 1, chunk 1 is empty"),
    "zero-width chunk": (lambda m: m.encode_documents([["x", "\u200b\u200c"]]), "document 0, chunk 1 is empty"),
    "NUL-only chunk": (lambda m: m.encode_documents([["\x00\x00", "x"]]), "document 0, chunk 0 is empty"),
    "empty query": (lambda m: m.encode_queries(["rent", ""]), "query 1 is empty"),
    "whitespace query": (lambda m: m.encode_queries(["   "]), "query 0 is empty"),
    # the shape of the batch
    "documents as one string": (lambda m: m.encode_documents("one document"), "wrap a single document in a list"),
    "documents None": (lambda m: m.encode_documents(None), r"documents must be a list of documents .*, got NoneType"),
    "document is a dict": (lambda m: m.encode_documents([{"text": ["a"]}]),
                           r"documents\[0\] must be a non-empty list of chunk strings, got dict"),
    "chunk not a string": (lambda m: m.encode_documents([["a", 3]]), r"documents\[0\]\[1\] must be a string, got int"),
    "chunks nested too deep": (lambda m: m.encode_documents([[["a"]]]),
                               r"documents\[0\]\[0\] must be a string, got a list: documents are lists of chunks"),
    "document without chunks": (lambda m: m.encode_documents([["a"], []]),
                                r"documents\[1\] must be a non-empty list of chunk strings, got an empty list"),
    "queries as one string": (lambda m: m.encode_queries("rent"), "wrap a single query in a list"),
    "query not a string": (lambda m: m.encode_queries(["rent", None]), "query 1 must be a str, got NoneType"),
    # titles
    "titles as one string": (lambda m: m.encode_documents([["a"], ["b"], ["c"]], titles="xyz"),
                             "titles must be a list .* got str 'xyz': wrap it in a list"),
    "titles too few": (lambda m: m.encode_documents([["a"], ["b"]], titles=["t"]), "one entry per document"),
    "title not a string": (lambda m: m.encode_documents([["a"]], titles=[3]), r"titles\[0\] must be a string"),
    "title fills the window": (lambda m: m.encode_documents([LONG], titles=["rent " * 70]),
                               r"titles\[0\] has \d+ tokens.*shorten the title"),
    # text that is not valid Unicode
    "lone surrogate in a chunk": (lambda m: m.encode_documents([["ok", "bad \ud800 text"]]),
                                  r"document 0, chunk 1 contains a lone surrogate \(U\+D800\) at character 4"),
    "lone surrogate in raw text": (lambda m: m.encode_documents(["fine. bad \udfff."], chunker="sentences"),
                                   "document 0: the text contains a lone surrogate"),
    "lone surrogate in a query": (lambda m: m.encode_queries(["\ud83d"]), "query 0 contains a lone surrogate"),
    "lone surrogate in a title": (lambda m: m.encode_documents([["a"]], titles=["\ud800"]),
                                  r"titles\[0\] contains a lone surrogate"),
    # chunkers
    "chunker returns None": (lambda m: m.encode_documents(["some text"], chunker=lambda t: None),
                             "document 0: the chunker returned NoneType"),
    "chunker returns nothing": (lambda m: m.encode_documents(["some text"], chunker=lambda t: []),
                                "document 0: the chunker returned no chunks for a non-empty text"),
    "chunker returns a string": (lambda m: m.encode_documents(["some text"], chunker=lambda t: t),
                                 "the chunker returned str"),
    "spans out of order": (lambda m: m.encode_documents(["rent lease due"], chunker=out_of_order),
                           "chunk 1 starts at 0, before chunk 0 .* in document order"),
    "float offsets": (lambda m: m.encode_documents(["rent lease"], chunker=lambda t: [(0.0, 4.0)]),
                      "offsets must be integers, got float and float"),
    "span outside the text": (lambda m: m.encode_documents(["rent"], chunker=lambda t: [(0, 40)]),
                              r"span \(0, 40\) outside the text of length 4"),
    "empty span": (lambda m: m.encode_documents(["rent lease"], chunker=lambda t: [(0, 4), (4, 4)]),
                   "document 0, chunk 1 is empty"),
    "unknown chunker": (lambda m: m.encode_documents(["text"], chunker="words"), "chunker must be one of"),
    "chunker on chunk lists": (lambda m: m.encode_documents([["a"]], chunker="sentences"),
                               "document 0 must be raw text"),
    # options
    "float dim": (lambda m: m.encode_documents([["a"]], output_dim=16.0), r"output_dim must be one of \[8, 16\], got 16.0"),
    "bool dim": (lambda m: m.encode_queries(["a"], output_dim=True), "output_dim must be one of"),
    "unknown dim": (lambda m: m.encode_queries(["a"], output_dim=12), r"output_dim must be one of \[8, 16\], got 12"),
    "unknown precision": (lambda m: m.encode_queries(["a"], precision="int4"), "precision must be one of"),
    "float batch size": (lambda m: m.encode_documents([["a"]], batch_size=2.5), "batch_size must be a positive integer"),
    "zero batch size": (lambda m: m.encode_documents([["a"]], batch_size=0), "batch_size must be a positive integer"),
    "codes of raw vectors": (lambda m: m.encode_queries(["a"], precision="int8", normalize=False), "keep normalize=True"),
    "unknown long-document mode": (lambda m: m.encode_documents([["a"]], long_documents="drop"),
                                   "long_documents must be one of"),
    "unknown empty-chunk mode": (lambda m: m.encode_documents([["a"]], empty_chunks="skip"),
                                 "empty_chunks must be one of"),
    "long document in strict mode": (lambda m: m.encode_documents([LONG], long_documents="error"),
                                     r"document 0 has \d+ tokens, more than max_seq_length=64"),
    # scoring: the precision is stated, never guessed from the dtype
    "binary codes scored as floats": (
        lambda m: contextembed.maxsim(quantize(np.ones((1, 8)), "binary"), [quantize(np.ones((2, 8)), "binary")]),
        "queries are int8 codes, but precision='float32' scores float vectors"),
    "uint8 codes scored as int8": (
        lambda m: contextembed.maxsim(quantize(np.ones((1, 8)), "uint8"), [quantize(np.ones((2, 8)), "uint8")],
                                      precision="int8"), "queries are uint8, but precision='int8' scores int8 codes"),
    "float vectors scored as binary": (
        lambda m: contextembed.exact_search(np.ones((1, 8), np.float32), quantize(np.ones((3, 8)), "ubinary"),
                                            np.zeros(3, int), precision="ubinary"), "queries are float32"),
    "unknown scoring precision": (lambda m: contextembed.maxsim(np.ones((1, 8)), [np.ones((1, 8))], precision="int4"),
                                  "precision must be one of"),
    "binary of an odd dimension": (lambda m: quantize(np.ones((1, 12)), "binary"), "divisible by 8"),
}


@pytest.mark.parametrize("case", API_ERRORS)
def test_api_errors_name_the_problem(tiny, case):
    call, message = API_ERRORS[case]
    with pytest.raises(ValueError, match=message):
        call(tiny[1])


class TestDocumentedBehaviour:
    def test_generators_are_read_once_not_consumed_by_validation(self, tiny):
        m = tiny[1]
        np.testing.assert_array_equal(m.encode_queries(q for q in ["a", "b"]), m.encode_queries(["a", "b"]))
        vectors = m.encode_documents(d for d in [["a", "b"], "c"])
        for got, expected in zip(vectors, m.encode_documents([["a", "b"], "c"]), strict=True):
            np.testing.assert_array_equal(got, expected)

    def test_numpy_integer_spans_and_dims(self, tiny):
        m = tiny[1]
        (doc,) = m.encode_documents(["rent lease"], chunker=lambda t: [(np.int64(0), np.int64(4)), (5, 10)],
                                    output_dim=np.int64(8))
        assert [c.text for c in doc.chunks] == ["rent", "lease"] and doc.embeddings.shape == (2, 8)

    def test_empty_batches(self, tiny):
        m = tiny[1]
        assert m.encode_documents([]) == []
        assert m.encode_queries([]).shape == (0, 16)
        assert m.encode_queries([], precision="int8").dtype == np.int8

    def test_empty_chunks_opt_in_keeps_zero_rows(self, tiny):
        vectors = tiny[1].encode_documents([["", "rent", "  "]], empty_chunks="zero")[0]
        assert np.linalg.norm(vectors, axis=1).round(4).tolist() == [0.0, 1.0, 0.0]

    def test_empty_chunks_at_a_long_documents_edges(self, tiny):
        vectors = tiny[1].encode_documents([["", *LONG, " "]], empty_chunks="zero")[0]
        norms = np.linalg.norm(vectors, axis=1)
        assert len(vectors) == len(LONG) + 2 and norms[0] == 0 and norms[-1] == 0
        assert np.allclose(norms[1:-1], 1, atol=1e-5)

    def test_a_document_whose_chunks_are_all_empty(self, tiny):
        vectors = tiny[1].encode_documents([["", " "], LONG], titles=["rent " * 40, None], empty_chunks="zero")
        assert np.abs(vectors[0]).max() == 0 and len(vectors[1]) == len(LONG)


def tamper(src, dst, edit):
    shutil.copytree(src, dst)
    edit(dst)
    return dst


def edit_config(**changes):
    def edit(path):
        config = json.loads((path / "config.json").read_text())
        for key, value in changes.items():
            if value is None:
                config.pop(key)
            elif isinstance(value, dict):
                config[key].update(value)
            else:
                config[key] = value
        (path / "config.json").write_text(json.dumps(config))
    return edit


def drop_layer_weights(path):
    weights = load_file(path / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".layer.1." not in k}, path / "model.safetensors")


def truncate_weights(path):
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])


def truncate_file(name):
    def edit(path):
        data = (path / name).read_bytes()
        (path / name).write_bytes(data[: len(data) // 2])
    return edit


def pickle_weights(path):
    import torch

    torch.save(load_file(path / "model.safetensors"), path / "pytorch_model.bin")
    (path / "model.safetensors").unlink()


def remove_tokenizer(path):
    for name in ("tokenizer.json", "vocab.txt"):
        (path / name).unlink(missing_ok=True)


LOADING_ERRORS = {
    "truncated config.json": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", truncate_file("config.json")),
                              r"cannot read .*config.json.* as JSON \(is it damaged or truncated\?\)"),
    "config.json that is a list": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", lambda p: (
        p / "config.json").write_text("[1, 2]")), r"config.json' must hold a JSON object, got a list"),
    "tokenizer.json that is not JSON": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", truncate_file(
        "tokenizer.json")), r"cannot read .*tokenizer.json.* as JSON"),
    "no tokenizer": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", remove_tokenizer), "has no tokenizer"),
    "pickled weights": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", pickle_weights),
                        r"as a pickle \(pytorch_model.bin\): contextembed reads safetensors only"),
    "a plain BERT folder": (lambda ckpt, backbone, tmp: backbone,
                            "this is a 'bert' checkpoint, not a contextembed checkpoint.*contextembed build"),
    "config without text_config": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", edit_config(text_config=None)),
                                   "not a contextembed checkpoint: config.json has no `text_config`"),
    "config with fewer layers than the weights": (
        lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", edit_config(text_config={"num_hidden_layers": 1})),
        r"do not match its config.json: \d+ unexpected keys \(backbone.encoder.layer.1"),
    "weights with fewer layers than the config": (
        lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", drop_layer_weights),
        r"do not match its config.json: \d+ missing keys \(backbone.encoder.layer.1"),
    "truncated safetensors": (lambda ckpt, backbone, tmp: tamper(ckpt, tmp / "c", truncate_weights),
                              r"cannot read the weights of .* \(model.safetensors is damaged or truncated\)"),
    "a file, not a folder": (lambda ckpt, backbone, tmp: ckpt / "config.json", "is a file; pass a checkpoint directory"),
    "a folder without config.json": (lambda ckpt, backbone, tmp: tmp, "directory without config.json"),
}


@pytest.mark.parametrize("case", LOADING_ERRORS)
def test_loading_errors_name_the_problem(built, backbone_dirs, tmp_path, case):
    make, message = LOADING_ERRORS[case]
    path = make(built["bert"][0], backbone_dirs["bert"], tmp_path)
    with pytest.raises(ValueError, match=message):
        contextembed.load(str(path))
    assert main(["search", str(built["bert"][0].parent), "rent", "--model", str(path), "--no-progress"]) == 2


def write_corpus(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text("The lease is for one year. Rent is two.")
    (folder / "b.txt").write_text("The tenant is a company. She pays the rent.")
    return folder


def segment(index):
    """The index's one segment folder."""
    (folder,) = (index / "segments").iterdir()
    return folder


def edit_manifest(index, **changes):
    manifest = json.loads((index / "manifest.json").read_text())
    (index / "manifest.json").write_text(json.dumps({**manifest, **changes}))


def rewrite(path, change):
    path.write_text(change(path.read_text()))


CLI_ERRORS = {
    "overwrite a database": (lambda idx, corpus, tmp: ["encode", str(corpus), f"lancedb://{tmp / 'l'}", "--overwrite"],
                             "--overwrite replaces an index folder"),
    "index into a folder of other files": (lambda idx, corpus, tmp: ["encode", str(corpus), str(corpus)],
                                           "is a non-empty folder that is not an index"),
    "index path is a file": (lambda idx, corpus, tmp: ["encode", str(corpus), str(corpus / "a.txt")],
                             "the output path .* is a file"),
    "manifest is not JSON": (lambda idx, corpus, tmp: ((idx / "manifest.json").write_text("{"),
                                                       ["search", str(idx), "rent"])[1], "manifest.json.* as JSON"),
    "index from another format version": (lambda idx, corpus, tmp: (edit_manifest(idx, format_version=5),
                                                                    ["search", str(idx), "rent"])[1],
                                          "format_version must be 4, got 5"),
    "index with an unknown precision": (lambda idx, corpus, tmp: (edit_manifest(idx, precision="int4"),
                                                                  ["search", str(idx), "rent"])[1],
                                        "precision must be one of"),
    "manifest naming a path as a segment": (lambda idx, corpus, tmp: (edit_manifest(idx, segments=[
        {"name": "../../etc", "documents": 1, "deleted": None}]), ["search", str(idx), "rent"])[1],
        "segments must list objects with a name"),
    "damaged vectors.npy": (lambda idx, corpus, tmp: ((segment(idx) / "vectors.npy").write_bytes(b"not numpy"),
                                                      ["search", str(idx), "rent"])[1],
                            "cannot read the segment .*seg-"),
    "segment missing a file": (lambda idx, corpus, tmp: ((segment(idx) / "texts.bin").unlink(),
                                                         ["search", str(idx), "rent"])[1],
                               "is not a complete segment: texts.bin is missing"),
    "documents.jsonl line is not JSON": (
        lambda idx, corpus, tmp: (rewrite(segment(idx) / "documents.jsonl", lambda t: t[:-5] + "\n"),
                                  ["search", str(idx), "rent"])[1], r"documents.jsonl:2: not valid JSON"),
    "texts.bin cut short": (
        lambda idx, corpus, tmp: ((segment(idx) / "texts.bin").write_bytes((segment(idx) / "texts.bin").read_bytes()[:-4]),
                                  ["search", str(idx), "rent"])[1], r"texts.bin holds \d+ bytes, the records say"),
    "fewer chunk records than vectors": (
        lambda idx, corpus, tmp: (np.save(segment(idx) / "chunks.npy", np.load(segment(idx) / "chunks.npy")[:-1]),
                                  ["search", str(idx), "rent"])[1], r"4 vectors but 3 chunk records"),
    "search an index at another dim": (lambda idx, corpus, tmp: ["search", str(idx), "rent", "--output-dim", "8"],
                                       "the index holds 16-d vectors, got --output-dim 8"),
    "empty query": (lambda idx, corpus, tmp: ["search", str(idx), "  "], "the query is empty"),
    "unknown dim": (lambda idx, corpus, tmp: ["search", str(corpus), "rent", "--output-dim", "100"],
                    r"output_dim must be one of \[8, 16\], got 100"),
}


@pytest.fixture
def encoded(built, tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    index = tmp_path / "index"
    model = str(built["bert"][0])
    assert main(["encode", str(corpus), str(index), "--model", model, "--no-progress"]) == 0
    return model, corpus, index


@pytest.mark.parametrize("case", CLI_ERRORS)
def test_cli_errors_name_the_problem(encoded, tmp_path, capsys, case):
    model, corpus, index = encoded
    make, message = CLI_ERRORS[case]
    argv = make(index, corpus, tmp_path)
    capsys.readouterr()
    assert main([*argv, "--model", model, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"contextembed {argv[0]}: error: ") and "Traceback" not in err
    assert re.search(message, err), err


def test_transformers_and_sentence_transformers_load_strictly_too(built, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    path = tamper(built["bert"][0], tmp_path / "c", edit_config(text_config={"num_hidden_layers": 1}))
    with pytest.raises(ValueError, match="unexpected keys"):
        AutoModel.from_pretrained(path)
    with pytest.raises(ValueError, match="unexpected keys"):
        SentenceTransformer(str(path))
