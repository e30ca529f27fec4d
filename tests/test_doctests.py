"""Run the doctests of every module of the installed package (the math is documented by example).

A module either has doctests that run, or is listed below as having none (glue: loading, writing files,
command-line parsing); a doctest-less module that is not listed fails, so examples cannot silently vanish.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import contextembed

# The model package is installed from another folder (modeling/), so it is walked on its own.
MODULES = sorted(
    info.name for package in (contextembed, contextembed.modeling)
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    if not info.ispkg and info.name != "contextembed.__main__"  # importing it runs the command
)

WITHOUT_DOCTESTS = {
    "contextembed.build", "contextembed.checkpoint", "contextembed.quiet",
    "contextembed.registration",  # import hooks, tested in fresh processes in tests/test_registration.py
    "contextembed.evaluation.loaders", "contextembed.evaluation.run",
    "contextembed.evaluation.protocols", "contextembed.hub",
    "contextembed.training.trainer",
    "contextembed.training.batches", "contextembed.training.model",
    # the command line: parsing and dispatch, tested through `main` in tests/test_cli.py and beside each command
    "contextembed.cli.checkpoints", "contextembed.cli.corpus", "contextembed.cli.evaluate",
    "contextembed.cli.options", "contextembed.cli.train", "contextembed.cli.serve",
    # the server's routes and worker thread: tested over HTTP on a real process in tests/serve
    "contextembed.serve.app", "contextembed.serve.batcher", "contextembed.serve.ray_serve",
    # the stores' database glue: tested against the real databases in tests/stores
    "contextembed.stores.index", "contextembed.index_legacy", "contextembed.stores.lancedb", "contextembed.stores.qdrant",
    "contextembed.stores.postgres",
    # framework adapters: glue around the doctested grouping rule, tested in each real framework
    "contextembed.integrations.haystack", "contextembed.integrations.langchain",
    "contextembed.integrations.llamaindex",
    # export, runtimes and the pplx converter: glue around torch.onnx, onnxruntime, openvino and transformers,
    # tested against torch and against a restated reference in tests/backends and tests/test_convert.py
    "contextembed.backends.export", "contextembed.backends.runtime", "contextembed.convert",
}


@pytest.mark.parametrize("name", sorted(set(MODULES)))
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name in WITHOUT_DOCTESTS:
        assert result.attempted == 0, f"{name} has doctests now: take it off WITHOUT_DOCTESTS"
    else:
        assert result.attempted > 0, f"{name} has no doctest: add one, or list it in WITHOUT_DOCTESTS"
