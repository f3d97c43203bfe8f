"""aka: an RL-ready environment for GPU-kernel agents (the core)."""

from aka_core.lazy import lazy_exports

__all__ = ["hookimpl"]
__version__ = "0.1.0"

# `@aka_core.hookimpl`: the marker lives in aka_core.plugin.hookspecs, imported on first use
__getattr__, __dir__ = lazy_exports(
    __name__, {"hookimpl": ("aka_core.plugin.hookspecs", "hookimpl")}, globals())
