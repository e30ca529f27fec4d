"""Run the doctests of every module of the installed package (the math is documented by example)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import contextembed

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(contextembed.__path__, "contextembed.") if not info.ispkg
) + ["contextembed.modeling.modeling_contextembed", "contextembed.modeling.processing_contextembed"]


@pytest.mark.parametrize("name", sorted(set(MODULES)))
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
