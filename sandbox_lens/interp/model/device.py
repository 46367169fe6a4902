"""Which device models are built on: the CPU unless asked (``interp --device cpu|cuda|auto``).

TransformerLens 3.9 puts a new ``HookedTransformer`` on CUDA whenever CUDA is present; sandbox-lens builds
every model on :func:`current` instead — the CPU by default, so the same command gives the same numbers on
any machine — and moves it only where ``--device`` says. The choice is process-wide and inherited by child
processes (the environment variable :data:`ENV`), so a sweep's local workers use it too. Files never
depend on it: checkpoints and saved models are written from CPU copies and load onto any device.
"""

from __future__ import annotations

import os
from typing import Any

from sandbox_lens.interp.errors import OptionError, SandboxError

__all__ = ["CHOICES", "ENV", "resolve", "current", "use", "device_of", "on", "to_numpy"]

CHOICES = ("cpu", "cuda", "auto")
#: the environment variable holding the resolved device ("cpu", "cuda", "cuda:1", …)
ENV = "SANDBOX_LENS_DEVICE"


def resolve(name: str) -> str:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when present, else the CPU) as a device string; a CUDA
    device that is not there is refused in one line."""
    import torch

    name = name.strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return "cpu"
    kind, _, index = name.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise OptionError(f"--device takes cpu, cuda, cuda:N or auto, not {name!r}")
    if not torch.cuda.is_available():
        raise OptionError(
            f"--device {name}: this machine has no CUDA device (torch {torch.__version__} sees none); "
            "use --device cpu or auto"
        )
    if index and int(index) >= torch.cuda.device_count():
        raise OptionError(f"--device {name}: there are {torch.cuda.device_count()} CUDA devices")
    return name


def current() -> str:
    """The device new models are built on (the CPU unless :func:`use` chose another). :data:`ENV`, when a user sets it
    by hand, is checked like ``--device`` (one line for ``tpu`` or a CUDA device this machine lacks)."""
    name = os.environ.get(ENV) or "cpu"
    if name == "cpu":
        return name
    try:
        return resolve(name)
    except SandboxError as e:
        raise SandboxError(f"{ENV}={name}: {e}") from None


def use(name: str) -> str:
    """Build new models on ``name`` (see :func:`resolve`) from now on, in this process and its children; returns
    the device string. The caller restores :data:`ENV` when it is done (``interp``'s main does)."""
    device = resolve(name)
    os.environ[ENV] = device
    return device


def device_of(model: Any) -> Any:
    """The torch device ``model``'s parameters are on."""
    import torch

    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def on(like: Any, values: Any, dtype: Any = None) -> Any:
    """``values`` (an array, a list or a tensor) as a tensor on the device of ``like`` (a tensor or a model):
    the analysis code creates its index, mask and label tensors through this, so a model on CUDA gets CUDA
    tensors and a model on the CPU the same tensors as before (no copy for a NumPy array on the CPU)."""
    import numpy as np
    import torch

    device = like.device if isinstance(like, torch.Tensor) else device_of(like)
    if isinstance(values, np.ndarray) and dtype is None:
        return torch.from_numpy(np.ascontiguousarray(values)).to(device)
    return torch.as_tensor(values, dtype=dtype, device=device)


def to_numpy(tensor: Any) -> Any:
    """A tensor's values as a NumPy array, from any device (detached; CPU tensors are not copied)."""
    return tensor.detach().cpu().numpy()
