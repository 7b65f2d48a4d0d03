"""The sandbox's command line on a GPU machine, checked without one (``make gpu-check`` runs the
box on a GPU): the GPU's devices bound, the driver's library path and the GPU selection kept
across ``--clearenv``, memory limited by ``--data`` (CUDA reserves far more address space than it
uses); on a machine without a GPU, none of them and ``--as``."""

from __future__ import annotations

from pathlib import Path

from autograder import sandbox
from autograder.limits import Limits


def _box(monkeypatch, devices: list[str]) -> list[str]:
    monkeypatch.setattr(sandbox.glob, "glob", lambda pattern: devices if pattern == "/dev/nvidia*" else [])
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: "bwrap")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    return sandbox.command(["python3"], Limits(), Path("/tmp/view"))


def _setenv(argv: list[str]) -> dict[str, str]:
    return {argv[i + 1]: argv[i + 2] for i, arg in enumerate(argv) if arg == "--setenv"}


def test_on_a_gpu_machine_the_box_finds_the_driver(monkeypatch):
    argv = _box(monkeypatch, ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    assert argv.index("--clearenv") < argv.index("/dev/nvidia0")
    for device in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"):
        assert argv[argv.index(device) - 1 : argv.index(device) + 2] == ["--dev-bind", device, device]
    assert _setenv(argv)["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert _setenv(argv)["CUDA_VISIBLE_DEVICES"] == "0"
    assert f"--data={Limits().memory_mb * 2**20}" in argv and not any(a.startswith("--as=") for a in argv)


def test_without_a_gpu_the_box_passes_no_driver_path(monkeypatch):
    argv = _box(monkeypatch, [])
    assert not any(a.startswith("/dev/nvidia") for a in argv)
    assert "LD_LIBRARY_PATH" not in _setenv(argv) and "CUDA_VISIBLE_DEVICES" not in _setenv(argv)
    assert f"--as={Limits().memory_mb * 2**20}" in argv
