"""Device choice: the GPU when there is one, else the CPU."""

from __future__ import annotations

import torch


def best_device() -> torch.device:
    """Return ``cuda`` when PyTorch sees a GPU, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def devices_to_test() -> list[torch.device]:
    """The devices a test should run on: always the CPU, and the GPU when present."""
    found = [torch.device("cpu")]
    if torch.cuda.is_available():
        found.append(torch.device("cuda"))
    return found
