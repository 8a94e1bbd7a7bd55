"""How many threads torch computes with in this process."""

from __future__ import annotations

import torch


def set_torch_threads(threads: int) -> None:
    """Use ``threads`` intra-op threads: small networks are fastest (and deterministic) on
    one, and rollout workers share the machine's cores. Nothing is called when torch
    already uses that many."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


__all__ = ["set_torch_threads"]
