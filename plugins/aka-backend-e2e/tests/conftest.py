"""Fixtures shared by the tests of the model, the engine, the oracles and the mutants."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module: tiny tensors, so more threads only contend."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_weights():
    """The tiny model's weights, seed 0."""
    from aka_backend_e2e import model

    return model.init_weights(model.config_by_name("tiny"), 0)
