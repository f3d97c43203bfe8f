"""The judge loads only the plugin that provides its backend."""

from __future__ import annotations

from aka_core.plugin.host import PluginHost
from aka_core.run.lifecycle import backend_entry_point


def test_only_loads_the_named_entry_point_and_empty_loads_none() -> None:
    full = PluginHost()
    plugin = backend_entry_point(full, "triton")
    assert plugin == "triton"
    alone = PluginHost(only=plugin)
    assert alone.backend("triton").factory is full.backend("triton").factory
    assert "cuda" not in alone._collect()["backend"]
    builtins = PluginHost(only="")
    assert backend_entry_point(full, "python") == ""
    assert set(builtins._collect()["backend"]) == {"python"}
