"""An integration whose framework is not installed says which extra installs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCK = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if the package were not installed: importing it raises ImportError
try:
    import contextembed.integrations.{module}
except ImportError as error:
    print(error)
"""


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("langchain", ["langchain_core"], "langchain"),
    pytest.param("llamaindex", ["llama_index", "llama_index.core"], "llamaindex", marks=pytest.mark.slow),
    pytest.param("haystack", ["haystack"], "haystack", marks=pytest.mark.slow),
    pytest.param("ray", ["pyarrow"], "ray", marks=pytest.mark.slow),
])
def test_the_install_line_is_named(module, blocked, extra):
    out = subprocess.run([sys.executable, "-c", BLOCK.format(module=module, blocked=blocked)], capture_output=True,
                         text=True, timeout=300)
    assert f'pip install "contextembed[{extra}]"' in out.stdout, out.stdout + out.stderr
