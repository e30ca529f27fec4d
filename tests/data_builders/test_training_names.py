"""Names for training families: the same seed draws the same names, in any process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.data_builders.conftest import FOLDER

DRAW = """
import random
from training_names import Names
names = [Names(random.Random(seed)) for seed in range(40)]
print([(n.place(), n.organisation(), n.group(), n.person("female")) for n in names])
"""


def test_the_same_seed_draws_the_same_names_whatever_the_hash_seed():
    """Faker's it_IT cities come from a set, whose order follows PYTHONHASHSEED; a training file built twice from
    one seed must still be the same file."""
    draws = [subprocess.run([sys.executable, "-c", DRAW], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(FOLDER)}).stdout
             for seed in (1, 2)]
    assert draws[0] == draws[1] and draws[0].count("(") > 40
