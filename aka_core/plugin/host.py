"""The plugin host: a typed facade over pluggy.

Builtins register first; each entry point of the ``aka`` group loads inside its own guard, so a
broken plugin is reported (with its distribution and version) and the rest still load.
``AKA_STRICT_PLUGINS=1`` makes a broken plugin fatal; ``AKA_DISABLE_PLUGINS=a,b`` skips entry
points by name (or distribution). Callers ask for records by kind and name; nobody outside this
module touches ``pm.hook``.
"""

from __future__ import annotations

import difflib
import functools
import os
import traceback
from collections.abc import Iterable
from importlib import metadata
from typing import Any, TypeVar

import attrs
import pluggy
import structlog

from aka_core.errors import PluginError
from aka_core.plugin import hookspecs
from aka_core.plugin.records import (
    RECORD_KINDS,
    AgentSpec,
    BackendSpec,
    ExecutorSpec,
    PluginRecord,
    ScorerSpec,
    TaskFormatSpec,
)

ENTRY_POINT_GROUP = "aka"
BUILTIN = "aka-core (builtin)"
log = structlog.get_logger("aka.host")

R = TypeVar("R", bound=PluginRecord)


@attrs.frozen
class Provider:
    """Who provided a plugin: its entry point, distribution and version."""

    plugin: str
    distribution: str
    version: str | None
    builtin: bool = False


@attrs.frozen
class Registered:
    record: PluginRecord
    provider: Provider

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.record.name,
            "kind": self.record.kind,
            "description": self.record.description,
            "distribution": self.provider.distribution,
            "version": self.provider.version,
            "plugin": self.provider.plugin,
            "builtin": self.provider.builtin,
        }


@attrs.frozen
class LoadError:
    plugin: str
    distribution: str | None
    version: str | None
    error: str
    traceback: str = ""

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _disabled_names() -> set[str]:
    raw = os.environ.get("AKA_DISABLE_PLUGINS", "")
    return {part.strip() for part in raw.split(",") if part.strip()}


class PluginHost:
    """Discovers plugins and answers ``get(kind, name)`` with typed records."""

    def __init__(self, *, load_entry_points: bool = True, strict: bool | None = None,
                 only: str | None = None):
        """``only``: load that one entry point (by name) and no other; "" loads none (the
        built-ins alone). The judge knows which plugin provides its backend and needs no other."""
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.strict = _env_flag("AKA_STRICT_PLUGINS") if strict is None else strict
        self.load_errors: list[LoadError] = []
        self._providers: dict[int, Provider] = {}
        self._records: dict[str, dict[str, Registered]] | None = None
        from aka_core.builtin import hooks

        self.register(hooks, Provider("builtins", BUILTIN, _core_version(), builtin=True))
        if load_entry_points and only != "":
            self.load_entry_points(only)

    # ------------------------------------------------------------------ registration
    def register(self, plugin: object, provider: Provider | None = None) -> None:
        """Register a plugin module or object (tests use this for in-process plugins)."""
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        provider = provider or Provider(name, name, None)
        self.pm.register(plugin, name=f"{provider.distribution}:{provider.plugin}")
        try:
            self.pm.check_pending()  # a misspelled hook is an error, not silence
        except pluggy.PluginValidationError:
            self.pm.unregister(plugin)  # or every plugin registered after it would fail too
            raise
        self._providers[id(plugin)] = provider
        self._records = None

    def load_entry_points(self, only: str | None = None) -> None:
        disabled = _disabled_names()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if only is not None and ep.name != only:
                continue
            dist = ep.dist.name if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else None
            if ep.name in disabled or dist in disabled:
                log.debug("plugin disabled", plugin=ep.name, distribution=dist)
                continue
            provider = Provider(ep.name, dist, version)
            try:
                plugin = ep.load()
                self.register(plugin, provider)
            except Exception as exc:  # a broken plugin must not take the others down
                error = LoadError(
                    plugin=ep.name,
                    distribution=dist,
                    version=version,
                    error=f"{type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc(),
                )
                if self.strict:
                    raise PluginError(
                        f"plugin {ep.name!r} from {dist} {version} failed to load: {error.error} "
                        "(AKA_STRICT_PLUGINS is set; unset it to skip broken plugins)"
                    ) from exc
                self.load_errors.append(error)
                log.warning("plugin failed to load", plugin=ep.name, distribution=dist,
                            version=version, error=error.error)

    # ------------------------------------------------------------------ records
    def _collect(self) -> dict[str, dict[str, Registered]]:
        if self._records is not None:
            return self._records
        table: dict[str, dict[str, Registered]] = {kind: {} for kind in RECORD_KINDS}
        for kind, hook_name in hookspecs.REGISTRATION_HOOKS.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                provider = self._providers.get(id(impl.plugin)) or Provider(
                    impl.plugin_name, impl.plugin_name, None
                )
                try:
                    records = impl.function() or []
                    self._check_records(records, RECORD_KINDS[kind], provider)
                except Exception as exc:
                    if self.strict or isinstance(exc, PluginError):
                        raise PluginError(
                            f"{hook_name} of {provider.distribution} failed: {exc}"
                        ) from exc
                    self.load_errors.append(LoadError(
                        provider.plugin, provider.distribution, provider.version,
                        f"{hook_name}: {type(exc).__name__}: {exc}", traceback.format_exc()))
                    continue
                for record in records:
                    existing = table[kind].get(record.name)
                    if existing is not None:
                        raise PluginError(
                            f"{kind} {record.name!r} is provided twice: by "
                            f"{existing.provider.distribution} ({existing.provider.plugin}) and by "
                            f"{provider.distribution} ({provider.plugin}); uninstall one of them or "
                            "disable one with AKA_DISABLE_PLUGINS"
                        )
                    table[kind][record.name] = Registered(record, provider)
        self._records = table
        return table

    @staticmethod
    def _check_records(records: Iterable[Any], cls: type[PluginRecord], provider: Provider) -> None:
        if not isinstance(records, list | tuple):
            raise TypeError(f"expected a list of {cls.__name__}, got {type(records).__name__}")
        for record in records:
            if not isinstance(record, cls):
                raise TypeError(
                    f"{provider.distribution} returned {type(record).__name__}, "
                    f"expected {cls.__name__}"
                )

    def registered(self, kind: str | None = None) -> list[Registered]:
        table = self._collect()
        kinds = [kind] if kind else list(table)
        return [table[k][n] for k in kinds for n in sorted(table[k])]

    def names(self, kind: str) -> list[str]:
        return sorted(self._collect()[kind])

    def get(self, kind: str, name: str) -> Registered:
        table = self._collect()
        if kind not in table:
            raise PluginError(f"unknown plugin kind {kind!r}; kinds are {', '.join(table)}")
        found = table[kind].get(name)
        if found is not None:
            return found
        choices = sorted(table[kind])
        close = difflib.get_close_matches(name, choices, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        dist = f"aka-{kind.replace('_', '-')}-{name}"
        failed = [e for e in self.load_errors if name in (e.plugin, e.distribution)]
        extra = f" (a plugin named {name!r} failed to load: {failed[0].error})" if failed else ""
        raise PluginError(
            f"no {kind.replace('_', ' ')} named {name!r}{extra}; {hint}available: "
            f"{', '.join(choices) or 'none'}. A plugin providing it would be installed with "
            f"`pip install {dist}`"
        )

    def task_format(self, name: str) -> TaskFormatSpec:
        return self._typed(TaskFormatSpec, name)

    def agent(self, name: str) -> AgentSpec:
        return self._typed(AgentSpec, name)

    def backend(self, name: str) -> BackendSpec:
        return self._typed(BackendSpec, name)

    def backend_vendors(self, name: str) -> tuple[str, ...]:
        """The GPU vendors backend ``name`` runs on (``BackendSpec.vendors``); () for a portable
        backend, or one not installed (loading its task says so)."""
        try:
            return self.backend(name).vendors
        except PluginError:
            return ()

    def scorer(self, name: str) -> ScorerSpec:
        return self._typed(ScorerSpec, name)

    def executor(self, name: str) -> ExecutorSpec:
        return self._typed(ExecutorSpec, name)

    def _typed(self, cls: type[R], name: str) -> R:
        record = self.get(cls.kind, name).record
        assert isinstance(record, cls)
        return record

    def versions(self) -> dict[str, str | None]:
        """Distribution -> version of every plugin that registered records or observes (for run.yaml)."""
        out: dict[str, str | None] = {}
        for reg in self.registered():
            out[reg.provider.distribution] = reg.provider.version
        for observer in self.observers():
            out[observer["distribution"]] = observer["version"]
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ observers
    def notify(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call an observer hook; an exception in one plugin is logged, never raised."""
        if hook_name not in hookspecs.OBSERVER_HOOKS:
            raise ValueError(f"{hook_name} is not an observer hook")
        results = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            try:
                results.append(impl.function(**{a: kwargs[a] for a in impl.argnames}))
            except Exception as exc:
                provider = self._providers.get(id(impl.plugin))
                log.warning("observer hook failed", hook=hook_name,
                            plugin=provider.distribution if provider else impl.plugin_name,
                            error=f"{type(exc).__name__}: {exc}")
        return results

    def observers(self) -> list[dict[str, Any]]:
        """Plugins that only observe (``aka_report``, ``aka_after_task``, ...): kind
        ``observer``, named by their entry point, described by the hooks they implement."""
        hooks: dict[int, tuple[Provider, list[str]]] = {}
        for hook_name in hookspecs.OBSERVER_HOOKS:
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                provider = self._providers.get(id(impl.plugin))
                if provider is None or provider.builtin:
                    continue
                hooks.setdefault(id(impl.plugin), (provider, []))[1].append(hook_name)
        return [{"name": provider.plugin, "kind": "observer",
                 "description": "implements " + ", ".join(names),
                 "distribution": provider.distribution, "version": provider.version,
                 "plugin": provider.plugin, "builtin": False}
                for provider, names in sorted(hooks.values(), key=lambda item: item[0].plugin)]

    def describe(self) -> dict[str, Any]:
        return {
            "plugins": [r.as_dict() for r in self.registered()] + self.observers(),
            "load_errors": [e.as_dict() for e in self.load_errors],
        }


@functools.cache
def cached_host(only: str | None = None) -> PluginHost:
    """One plugin host per process (discovering plugins is not free), for the judge and what it
    starts ahead: ``only`` the plugin that provides a backend when a request names it."""
    return PluginHost(only=only)


def _core_version() -> str | None:
    try:
        return metadata.version("aka-core")
    except metadata.PackageNotFoundError:
        return None
