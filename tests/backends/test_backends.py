"""ONNX Runtime and OpenVINO backends: the exported core gives torch's vectors on batches of new shapes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import contextembed
from contextembed.backends import export
from contextembed.backends.core import INPUT_NAMES, OUTPUT_NAMES, ChunkSumsCore, example_inputs
from contextembed.backends.export import check_parity, float_kept_matmuls
from contextembed.cli import main
from tests.modeling.test_windowing import long_document

WORDS = "the lease rent tenant street company she table row section".split()


def batch_of_new_shapes(seed: int = 0) -> list[list[str]]:
    """Documents of 1 to 9 chunks and 1 to 12 words per chunk, plus two longer than the 64-token window."""
    g = torch.Generator().manual_seed(seed)
    docs = []
    for _ in range(7):
        n_chunks = int(torch.randint(1, 10, (1,), generator=g))
        docs.append([" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (int(torch.randint(1, 13, (1,),
                     generator=g)),), generator=g)) for _ in range(n_chunks)])
    return docs + [long_document(40, seed=seed), long_document(25, words_per_chunk=9, seed=seed + 1)]


def assert_same_vectors(reference, encoder, documents, atol, **kwargs):
    expected = reference.encode_documents(documents, **kwargs)
    got = encoder.encode_documents(documents, **kwargs)
    assert [len(v) for v in got] == [len(d) for d in documents]  # one vector per chunk, nothing dropped
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, atol=atol, rtol=0)


@pytest.fixture(scope="module")
def exported(built, tmp_path_factory):
    """family -> a copy of the tiny checkpoint with onnx/model.onnx written by `export`."""
    root = tmp_path_factory.mktemp("exported")
    result = {}
    for family, (path, _, _) in built.items():
        target = shutil.copytree(path, root / family)
        assert export(target, "onnx") == target / "onnx" / "model.onnx"
        result[family] = target
    return result


def test_onnx_matches_torch_on_new_shapes(exported, family):
    path = exported[family]
    reference = contextembed.load(path)
    onnx = contextembed.load(path, backend="onnx")
    assert onnx.backend == "onnx" and reference.backend == "torch"
    for seed in range(2):
        # Batch compositions unlike the traced (2, 16, 3): more rows, longer rows, windowed rows among short ones.
        assert_same_vectors(reference, onnx, batch_of_new_shapes(seed), atol=1e-4)
    assert_same_vectors(reference, onnx, batch_of_new_shapes(3), atol=1e-4, output_dim=8, batch_size=3)
    np.testing.assert_allclose(onnx.encode_queries(["rent street", "she"]),
                               reference.encode_queries(["rent street", "she"]), atol=1e-4, rtol=0)
    np.testing.assert_array_equal(
        np.concatenate(onnx.encode_documents(batch_of_new_shapes(1)[:4], precision="int8")),
        np.concatenate(reference.encode_documents(batch_of_new_shapes(1)[:4], precision="int8")),
    )


@pytest.mark.slow
def test_the_runtimes_run_on_the_threads_they_are_given(built, exported, tmp_path):
    """`num_threads` (what `contextembed serve --workers` gives each worker) sets the runtime's own threads and
    leaves the vectors as they are."""
    pytest.importorskip("openvino")
    onnx = contextembed.load(exported["bert"], backend="onnx")
    one = contextembed.load(exported["bert"], backend="onnx", num_threads=1)
    assert one.model._run.session.get_session_options().intra_op_num_threads == 1
    assert onnx.model._run.session.get_session_options().intra_op_num_threads == 0  # 0: ONNX Runtime's default
    assert_same_vectors(onnx, one, batch_of_new_shapes(5), atol=1e-6)
    path = shutil.copytree(built["bert"][0], tmp_path / "bert")
    export(path, "openvino")
    openvino = contextembed.load(path, backend="openvino", num_threads=1)
    assert openvino.model._run.compiled.get_property("INFERENCE_NUM_THREADS") == 1
    assert_same_vectors(contextembed.load(path, backend="openvino"), openvino, batch_of_new_shapes(5), atol=1e-6)


def test_onnx_one_document_alone_equals_in_batch(exported):
    onnx = contextembed.load(exported["bert"], backend="onnx")
    docs = batch_of_new_shapes(4)
    together = onnx.encode_documents(docs)
    for doc, vectors in zip(docs, together):
        np.testing.assert_allclose(onnx.encode_documents([doc])[0], vectors, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_onnx_int8_weights(built, tmp_path):
    path = shutil.copytree(built["bert"][0], tmp_path / "bert")
    assert export(path, "onnx", quantize="int8") == path / "onnx" / "model_qint8.onnx"
    assert (path / "onnx" / "model.onnx").is_file()
    reference = contextembed.load(path)
    int8 = contextembed.load(path, backend="onnx", file_name="onnx/model_qint8.onnx")
    docs = batch_of_new_shapes(5)
    for e, g in zip(reference.encode_documents(docs), int8.encode_documents(docs)):
        assert g.shape == e.shape
        assert (g * e).sum(1).min() > 0.95
    assert (path / "onnx" / "model_qint8.onnx").stat().st_size < (path / "onnx" / "model.onnx").stat().st_size


@pytest.mark.slow
def test_int8_export_keeps_the_early_feed_forward_blocks_in_float(built, tmp_path):
    """Both feed-forward matrices of the first half of the layers stay float MatMuls; the rest become int8."""
    import onnx

    for family in ("bert", "qwen3"):
        path = shutil.copytree(built[family][0], tmp_path / family)
        export(path, "onnx", quantize="int8")
        config = contextembed.load(path).model.backbone.config
        layers, hidden, inner = config.num_hidden_layers, config.hidden_size, config.intermediate_size
        kept = float_kept_matmuls(path / "onnx" / "model.onnx", hidden, inner)
        graph = onnx.load(str(path / "onnx" / "model_qint8.onnx")).graph
        shapes = {w.name: tuple(w.dims) for w in graph.initializer}
        float_weights = [n for n in graph.node if n.op_type == "MatMul" and len(shapes.get(n.input[1], ())) == 2]
        assert sorted(n.name for n in float_weights) == sorted(kept)
        ffn = [n for n in float_weights if shapes[n.input[1]] in {(hidden, inner), (inner, hidden)}]
        ups_per_layer = 2 if family == "qwen3" else 1  # gate and up projections
        assert len(ffn) == (layers + 1) // 2 * (1 + ups_per_layer)
        assert len(float_weights) - len(ffn) <= 1  # the projection of chunk sums, where the model has one
        assert sum(n.op_type == "MatMulInteger" for n in graph.node) > 0


@pytest.mark.slow
def test_openvino_matches_torch_on_new_shapes(built, tmp_path):
    path = shutil.copytree(built["qwen3"][0], tmp_path / "qwen3")
    assert export(path, "openvino") == path / "openvino" / "openvino_model.xml"
    assert (path / "openvino" / "openvino_model.bin").is_file()
    reference = contextembed.load(path)
    openvino = contextembed.load(path, backend="openvino")
    assert_same_vectors(reference, openvino, batch_of_new_shapes(6), atol=1e-4)


def test_the_parity_check_rejects_a_shape_specialised_graph(built, tmp_path):
    """A graph traced without dynamic shapes answers a new batch shape wrongly or not at all: never kept."""
    import onnxruntime

    _, model, _ = built["bert"]
    core = ChunkSumsCore(model).eval()
    path = tmp_path / "static.onnx"
    torch.onnx.export(core, example_inputs(2, 16, 3, vocab_size=model.config.text_config.vocab_size), str(path),
                      dynamo=False, input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(inputs):
        try:
            return session.run(None, dict(zip(INPUT_NAMES, inputs)))
        except Exception as error:  # onnxruntime refuses the shape outright: also a failed check
            raise RuntimeError(str(error)) from error

    with pytest.raises(RuntimeError):
        check_parity(core, run, 1e-4)
    # ... while the same check passes the exported graph.
    def run_torch(inputs):
        with torch.inference_mode():
            return [t.numpy() for t in core(*map(torch.from_numpy, inputs))]

    assert check_parity(core, run_torch, 1e-4) == 0


def test_bad_backend_requests(built, exported, tmp_path):
    path = built["bert"][0]
    with pytest.raises(ValueError, match="contextembed export"):
        contextembed.load(path, backend="onnx")  # nothing exported there
    with pytest.raises(ValueError, match="backend must be one of"):
        contextembed.load(exported["bert"], backend="tensorrt")
    with pytest.raises(ValueError, match="dtype"):
        contextembed.load(exported["bert"], backend="onnx", dtype="bfloat16")
    with pytest.raises(ValueError, match="device"):
        contextembed.load(exported["bert"], backend="onnx", device="cuda")
    with pytest.raises(ValueError, match="file_name"):
        contextembed.load(exported["bert"], file_name="onnx/model.onnx")
    with pytest.raises(ValueError, match="no torch weights"):
        contextembed.load(exported["bert"], backend="onnx").save_pretrained(tmp_path / "out")
    with pytest.raises(ValueError, match="torch.set_num_threads"):
        contextembed.load(exported["bert"], num_threads=1)  # torch's threads are the process's
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="num_threads must be a positive integer"):
            contextembed.load(exported["bert"], backend="onnx", num_threads=bad)
    with pytest.raises(ValueError, match="format='onnx' only"):
        export(exported["bert"], "openvino", quantize="int8")
    with pytest.raises(ValueError, match="format must be"):
        export(exported["bert"], "tflite")
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        export(tmp_path, "onnx")


@pytest.mark.slow
def test_export_and_encode_from_the_command_line(built, tmp_path, capsys):
    path = shutil.copytree(built["bert"][0], tmp_path / "bert")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"doc{i}.txt").write_text(". ".join(" ".join(d) for d in batch_of_new_shapes(i)[:5]) + ".")
    assert main(["export", str(path)]) == 0
    assert "onnx/model.onnx" in capsys.readouterr().out
    for backend in ("torch", "onnx"):
        assert main(["encode", str(corpus), str(tmp_path / backend), "--model", str(path), "--backend", backend,
                     "--no-progress"]) == 0
    from contextembed.stores import open_store

    with open_store(tmp_path / "onnx") as onnx, open_store(tmp_path / "torch") as torch_index:
        ids = sorted(torch_index.document_hashes())
        for a, b in zip(onnx.fetch_documents(ids), torch_index.fetch_documents(ids)):
            np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-4, rtol=0)
    assert main(["search", str(corpus), "rent", "--model", str(path), "--backend", "openvino"]) == 2
    assert "contextembed export" in capsys.readouterr().err


@pytest.mark.slow
def test_a_graph_exported_from_another_checkpoint_is_refused(built, backbone_dirs, exported, tmp_path):
    from safetensors.torch import load_file, save_file

    wide = tmp_path / "wide"  # 24-d where the tiny checkpoints are 16-d
    contextembed.build_checkpoint(backbone_dirs["bert"], wide, projection_dim=24, max_seq_length=64)
    export(wide, "onnx")
    wrong_width = shutil.copytree(built["bert"][0], tmp_path / "width")
    shutil.copytree(wide / "onnx", wrong_width / "onnx")
    with pytest.raises(ValueError, match=r"computes \d+-d vectors but the checkpoint's are \d+-d"):
        contextembed.load(wrong_width, backend="onnx")

    retrained = shutil.copytree(built["bert"][0], tmp_path / "same-shape")  # same shapes, other weights
    weights = load_file(retrained / "model.safetensors")
    name = next(n for n in weights if n.endswith("query.weight"))
    weights[name] = weights[name] + 0.01
    save_file(weights, retrained / "model.safetensors")
    shutil.copytree(exported["bert"] / "onnx", retrained / "onnx")
    with pytest.raises(ValueError, match="was exported from other weights than this checkpoint's"):
        contextembed.load(retrained, backend="onnx")
    assert contextembed.load(exported["bert"], backend="onnx").backend == "onnx"  # its own graph still loads


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_graph_is_named(exported, tmp_path, damage):
    path = shutil.copytree(exported["bert"], tmp_path / "damaged")
    graph = path / "onnx" / "model.onnx"
    data = graph.read_bytes()
    graph.write_bytes({"empty": b"", "truncated": data[: len(data) // 3], "garbage": b"\x00not onnx" * 50}[damage])
    with pytest.raises(ValueError, match=r"cannot load .*model.onnx.* as an onnx graph .* Re-run `contextembed export`"):
        contextembed.load(path, backend="onnx")


def torch_and_onnx_with(source, path, **settings):
    """A copy of the checkpoint at `source` with `settings` written into its config, exported: (torch, onnx) encoders,
    both checked to read the settings."""
    import json

    path = shutil.copytree(source, path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | settings))
    export(path, "onnx")
    reference, onnx = contextembed.load(path), contextembed.load(path, backend="onnx")
    for name, value in settings.items():
        assert getattr(reference.model.config, name) == getattr(onnx.model.config, name) == value
    return reference, onnx


@pytest.mark.slow
def test_onnx_carries_the_opening_like_torch(built, tmp_path):
    """With window_head_tokens set, every later window carries the opening in the exported graph too."""
    reference, onnx = torch_and_onnx_with(built["bert"][0], tmp_path / "head", window_head_tokens=8)
    documents = [long_document(40, seed=9), ["she is the company"] + long_document(40, seed=9)[1:]]
    assert_same_vectors(reference, onnx, documents, atol=1e-4)
    carried = onnx.encode_documents(documents)
    assert np.abs(carried[0][-1] - carried[1][-1]).max() > 1e-4  # the last window sees the edited opening


@pytest.mark.slow
def test_onnx_applies_the_tanh_head_like_torch(built, tmp_path):
    """With pplx-embed-v2's head (tanh after the projection, int8 as round(127 x)), the exported graph's sums give
    torch's vectors and codes: the activation is in the head both share."""
    reference, onnx = torch_and_onnx_with(built["bert"][0], tmp_path / "tanh", head_activation="tanh",
                                          int8_scheme="bounded")
    documents = batch_of_new_shapes(seed=5)
    assert_same_vectors(reference, onnx, documents, atol=1e-4)
    with torch.no_grad():
        raw = reference.model(**reference.processor(documents), normalize=False).chunk_embeddings
    assert raw.abs().max() < 1  # the head's output before normalisation is tanh's
    for torch_codes, onnx_codes in zip(reference.encode_documents(documents, precision="int8"),
                                       onnx.encode_documents(documents, precision="int8")):
        assert np.abs(torch_codes.astype(int) - onnx_codes).max() <= 1


def test_onnx_mixes_each_chunk_alone_like_torch(exported):
    """`local_mix` runs in the facade both backends share: the exported graph gives torch's mixed vectors."""
    reference = contextembed.load(exported["bert"])
    onnx = contextembed.load(exported["bert"], backend="onnx")
    assert_same_vectors(reference, onnx, batch_of_new_shapes(seed=6), atol=1e-4, local_mix=0.2)
