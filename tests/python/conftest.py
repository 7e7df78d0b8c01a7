"""Shared fixtures of the Python tests: the tpu device must be there (the
README's test command builds it); CPU-fallback warnings are expected here."""

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "ignore:tpu.*has no native lowering")


# The longest files (minutes each on a 2-core VM), first: `make test` runs
# the files on several processes (pytest-xdist, whole files each), and one
# of these starting last would keep the run going alone.
LONGEST_FIRST = ("test_distributed.py", "test_check.py", "test_compile.py",
                 "test_packaging.py", "test_eager_modes.py", "test_moe.py")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order


@pytest.fixture(autouse=True)
def _tpu_ready():
    assert hasattr(torch, "tpu"), "import torch did not load the tpu device"
    assert torch.tpu.is_available(), torch.tpu.unavailable_reason()
    yield
    # The device stays usable after every test, errors included.
    torch.tpu.synchronize()
    assert torch.ones(2, device="tpu").sum().item() == 2.0
