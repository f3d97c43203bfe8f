"""aka: an RL-ready environment for GPU-kernel agents (the core)."""

from aka_core.hookspecs import hookimpl

__all__ = ["hookimpl"]
__version__ = "0.1.0"
