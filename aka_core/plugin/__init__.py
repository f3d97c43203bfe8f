"""The one module a plugin imports from aka: the stable face of the core for plugin authors.

A plugin's source imports aka only through ``aka_core.plugin``; its tests may also use
``aka_core.testing`` (contract suites, fixtures, and the core entry points a test drives). The rest
of ``aka_core`` is free to move: its layout is not a promise. ``tests/core/test_plugin_surface.py``
fails on any other import of aka under ``plugins/`` and pins ``__all__``, so a name added here is
added on purpose, and a name removed breaks a plugin loudly in review rather than at a user's run.

What is stable, by group:

- hooks: ``hookimpl`` (mark the ``aka_register_*`` and observer hooks); ``AKA_VERSION``.
- records a registration hook returns: ``TaskFormatSpec``, ``AgentSpec``, ``BackendSpec``,
  ``ScorerSpec``, ``ExecutorSpec``; the records the core hands a plugin or expects back:
  ``AgentInvocation``, ``BackendReadiness``, ``JudgeRequest``; and the Protocols a plugin object
  implements: ``TaskFormat``, ``Agent``, ``Backend``, ``Scorer``, ``TaskJudge``, ``TaskRunner``,
  ``Executor``.
- models a plugin builds or reads: ``Task`` and its parts (``Case``, ``Harness``, ``HeldOutDraws``,
  ``Requirements``, ``TaskRules``, ``Timeouts``, ``Tolerance``), ``DeviceInfo``, the agent's
  ``AgentExecution`` / ``AgentStatus`` / ``AgentUsage``, the scorer's ``EvaluationSummary`` /
  ``CaseTimes`` / ``ScoreOutcome``, ``TaskResult`` with its ``Acceptance``, and ``RunConfig``.
- errors: ``AkaError``, ``ConfigError`` with ``Problem`` (file:line findings), ``BuildError`` (a
  candidate that does not build: the candidate's fault, not the environment's), ``FailureKind``.
- kits, the shared machinery a kind of plugin is built on (modules or classes):
  ``native`` (compiled backends: builds, caches, compile-only hosts), ``PythonBackend`` and
  ``innermost_location`` (backends whose candidates are Python), ``CliAgent`` / ``CliCommand`` /
  ``CliRun`` and their helpers (agents that drive a CLI), ``sandbox`` (confining a process),
  ``disk_watch`` and ``memory_watch`` (stopping a confined process that fills the disk, or
  the host's memory or process ids), ``bounded_files`` (reading a file a candidate or an agent
  controls: regular, never through a link, never past a size), ``protocol`` (the judge's
  pipe to a runner), ``scoring`` (scorer gates), ``gpus``.
- helpers: YAML/JSON reading and atomic writing, ``structure`` / ``unstructure`` (the one
  converter), schema validation, process-tree signalling, the judge's runner environment, run and
  task-result paths, ``write_reports``, the runtime smoke checks, and ``PluginHost`` (for plugins
  that run the core elsewhere: executors).

This package also holds what the face is made of: ``hookspecs`` (every hook, documented),
``records`` and ``host``. A plugin imports the face, never those modules.

The records, models and errors are imported at once (they are small and every plugin uses them);
everything else is imported on first use through the module ``__getattr__``, so registering a
plugin costs no toolchain or evaluation imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aka_core import __version__ as AKA_VERSION
from aka_core.errors import AkaError, BuildError, ConfigError, Problem
from aka_core.evaluation.failures import FailureKind
from aka_core.lazy import lazy_exports
from aka_core.models import (
    TASK_FILE,
    Acceptance,
    AgentExecution,
    AgentStatus,
    AgentUsage,
    Case,
    CaseTimes,
    DeviceInfo,
    EvaluationSummary,
    Harness,
    HeldOutDraws,
    Requirements,
    RunConfig,
    ScoreOutcome,
    Task,
    TaskResult,
    TaskRules,
    Timeouts,
    Tolerance,
)
from aka_core.plugin.hookspecs import hookimpl
from aka_core.plugin.records import (
    Agent,
    AgentInvocation,
    AgentSpec,
    Backend,
    BackendReadiness,
    BackendSpec,
    Executor,
    ExecutorSpec,
    JudgeRequest,
    Run,
    Scorer,
    ScorerSpec,
    TaskFormat,
    TaskFormatSpec,
    TaskJudge,
    TaskRunner,
)

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from aka_core import bounded_files, gpus
    from aka_core.commands.smoke import Check, read_facts, runtime_checks
    from aka_core.convert import structure, unstructure
    from aka_core.evaluation import disk_watch, memory_watch, protocol, sandbox
    from aka_core.evaluation.evaluate import worker_base_environment
    from aka_core.evaluation.judge import SANDBOX_PROTECTED_ALWAYS, runner_environment
    from aka_core.kits import native, scoring
    from aka_core.kits.agent_runtime import (
        KEEP_FIRST_EVENTS,
        MAX_EVENTS_KEPT,
        CliAgent,
        CliAgentOptions,
        CliCommand,
        CliRun,
        as_float,
        as_int,
        common_agent_options_schema,
        strip_ansi,
    )
    from aka_core.kits.python_backend import PythonBackend, innermost_location
    from aka_core.plugin.host import PluginHost
    from aka_core.processes import children, signal_pids, signal_tree
    from aka_core.run.execute import DEVICE_ON_NODE, read_run_file
    from aka_core.run.lifecycle import AGENT_PHASE_FILE
    from aka_core.run.reports import write_reports
    from aka_core.run.results import now_iso, task_dir, task_result_path
    from aka_core.schema_validation import field_path, validate_document
    from aka_core.yamlio import (
        dump_yaml,
        line_of,
        load_plain_yaml,
        load_yaml,
        to_builtin,
        write_json_atomic,
        write_text_atomic,
        write_yaml_atomic,
    )

# name -> (module, attribute); attribute None: the name is the module itself (a kit used as a
# namespace, ``native.build(...)``).
_LAZY: dict[str, tuple[str, str | None]] = {
    # kits
    "native": ("aka_core.kits.native", None),
    "sandbox": ("aka_core.evaluation.sandbox", None),
    "disk_watch": ("aka_core.evaluation.disk_watch", None),
    "bounded_files": ("aka_core.bounded_files", None),
    "memory_watch": ("aka_core.evaluation.memory_watch", None),
    "scoring": ("aka_core.kits.scoring", None),
    "gpus": ("aka_core.gpus", None),
    "protocol": ("aka_core.evaluation.protocol", None),
    "PythonBackend": ("aka_core.kits.python_backend", "PythonBackend"),
    "innermost_location": ("aka_core.kits.python_backend", "innermost_location"),
    "CliAgent": ("aka_core.kits.agent_runtime", "CliAgent"),
    "CliAgentOptions": ("aka_core.kits.agent_runtime", "CliAgentOptions"),
    "CliCommand": ("aka_core.kits.agent_runtime", "CliCommand"),
    "CliRun": ("aka_core.kits.agent_runtime", "CliRun"),
    "KEEP_FIRST_EVENTS": ("aka_core.kits.agent_runtime", "KEEP_FIRST_EVENTS"),
    "MAX_EVENTS_KEPT": ("aka_core.kits.agent_runtime", "MAX_EVENTS_KEPT"),
    "as_float": ("aka_core.kits.agent_runtime", "as_float"),
    "as_int": ("aka_core.kits.agent_runtime", "as_int"),
    "common_agent_options_schema": ("aka_core.kits.agent_runtime", "common_agent_options_schema"),
    "strip_ansi": ("aka_core.kits.agent_runtime", "strip_ansi"),
    # helpers: files
    "dump_yaml": ("aka_core.yamlio", "dump_yaml"),
    "line_of": ("aka_core.yamlio", "line_of"),
    "load_plain_yaml": ("aka_core.yamlio", "load_plain_yaml"),
    "load_yaml": ("aka_core.yamlio", "load_yaml"),
    "to_builtin": ("aka_core.yamlio", "to_builtin"),
    "write_json_atomic": ("aka_core.yamlio", "write_json_atomic"),
    "write_text_atomic": ("aka_core.yamlio", "write_text_atomic"),
    "write_yaml_atomic": ("aka_core.yamlio", "write_yaml_atomic"),
    "structure": ("aka_core.convert", "structure"),
    "unstructure": ("aka_core.convert", "unstructure"),
    "field_path": ("aka_core.schema_validation", "field_path"),
    "validate_document": ("aka_core.schema_validation", "validate_document"),
    # helpers: processes and the judge's environment
    "children": ("aka_core.processes", "children"),
    "signal_pids": ("aka_core.processes", "signal_pids"),
    "signal_tree": ("aka_core.processes", "signal_tree"),
    "SANDBOX_PROTECTED_ALWAYS": ("aka_core.evaluation.judge", "SANDBOX_PROTECTED_ALWAYS"),
    "runner_environment": ("aka_core.evaluation.judge", "runner_environment"),
    "worker_base_environment": ("aka_core.evaluation.evaluate", "worker_base_environment"),
    # helpers: runs (executors)
    "PluginHost": ("aka_core.plugin.host", "PluginHost"),
    "AGENT_PHASE_FILE": ("aka_core.run.lifecycle", "AGENT_PHASE_FILE"),
    "now_iso": ("aka_core.run.results", "now_iso"),
    "task_dir": ("aka_core.run.results", "task_dir"),
    "task_result_path": ("aka_core.run.results", "task_result_path"),
    "DEVICE_ON_NODE": ("aka_core.run.execute", "DEVICE_ON_NODE"),
    "read_run_file": ("aka_core.run.execute", "read_run_file"),
    "write_reports": ("aka_core.run.reports", "write_reports"),
    "Check": ("aka_core.commands.smoke", "Check"),
    "read_facts": ("aka_core.commands.smoke", "read_facts"),
    "runtime_checks": ("aka_core.commands.smoke", "runtime_checks"),
}

__all__ = [
    "AGENT_PHASE_FILE",
    "AKA_VERSION",
    "DEVICE_ON_NODE",
    "KEEP_FIRST_EVENTS",
    "MAX_EVENTS_KEPT",
    "SANDBOX_PROTECTED_ALWAYS",
    "TASK_FILE",
    "Acceptance",
    "Agent",
    "AgentExecution",
    "AgentInvocation",
    "AgentSpec",
    "AgentStatus",
    "AgentUsage",
    "AkaError",
    "Backend",
    "BackendReadiness",
    "BackendSpec",
    "BuildError",
    "Case",
    "CaseTimes",
    "Check",
    "CliAgent",
    "CliAgentOptions",
    "CliCommand",
    "CliRun",
    "ConfigError",
    "DeviceInfo",
    "EvaluationSummary",
    "Executor",
    "ExecutorSpec",
    "FailureKind",
    "Harness",
    "HeldOutDraws",
    "JudgeRequest",
    "PluginHost",
    "Problem",
    "PythonBackend",
    "Requirements",
    "Run",
    "RunConfig",
    "ScoreOutcome",
    "Scorer",
    "ScorerSpec",
    "Task",
    "TaskFormat",
    "TaskFormatSpec",
    "TaskJudge",
    "TaskResult",
    "TaskRules",
    "TaskRunner",
    "Timeouts",
    "Tolerance",
    "as_float",
    "as_int",
    "bounded_files",
    "children",
    "common_agent_options_schema",
    "disk_watch",
    "dump_yaml",
    "field_path",
    "gpus",
    "hookimpl",
    "innermost_location",
    "line_of",
    "load_plain_yaml",
    "load_yaml",
    "memory_watch",
    "native",
    "now_iso",
    "protocol",
    "read_facts",
    "read_run_file",
    "runner_environment",
    "runtime_checks",
    "sandbox",
    "scoring",
    "signal_pids",
    "signal_tree",
    "strip_ansi",
    "structure",
    "task_dir",
    "task_result_path",
    "to_builtin",
    "unstructure",
    "validate_document",
    "worker_base_environment",
    "write_json_atomic",
    "write_reports",
    "write_text_atomic",
    "write_yaml_atomic",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
