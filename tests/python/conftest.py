"""Shared fixtures of the Python tests: the tpu device must be there (the
README's test command builds it); CPU-fallback warnings are expected here."""

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "ignore:tpu.*has no native lowering")


@pytest.fixture(autouse=True)
def _tpu_ready():
    assert hasattr(torch, "tpu"), "import torch did not load the tpu device"
    assert torch.tpu.is_available(), torch.tpu.unavailable_reason()
    yield
    # The device stays usable after every test, errors included.
    torch.tpu.synchronize()
    assert torch.ones(2, device="tpu").sum().item() == 2.0
