"""A small KernelBench-style problem and a faster ModelNew for it (tests, examples)."""

from pathlib import Path

PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 8
in_features = 32
out_features = 16


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''

FASTER = '''\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min(0)
'''


def write(folder: Path, **files: str) -> Path:
    """``folder`` (made) holding the example problem and ``files`` (name -> text)."""
    folder.mkdir(parents=True)
    (folder / "19_Linear_ReLU.py").write_text(PROBLEM)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder
