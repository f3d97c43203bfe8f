"""The conformance suite of CLI agents: plugins built on ``aka_core.kits.agent_runtime.CliAgent``.

Every CLI agent is run the same way by the shared runtime, so every one must behave the same way
when its CLI finishes, fails, is refused, hangs past its budget, prints lines that are not JSON or
is missing. ``CliAgentContract`` checks all of that (and ``AgentContract``'s checks) against a fake
CLI (``aka_core.testing.fake_cli``) that replays the plugin's own event streams: a plugin's test
class gives only its CLI's streams and the exact ``AgentUsage`` each one implies::

    class TestCodexContract(CliAgentContract):
        record = aka_register_agents()[0]
        plugin = aka_agent_codex
        cli_version = "codex-cli 0.130.0"
        requires = Requires(args=(("exec",), ("--json",)), stdin_prompt=True, last_arg="-")
        replies = (Reply(argv=("login", "status"), stderr="Logged in using an API key"),)
        completed = Outcome(script=Script.from_file(FIXTURES / "exec_completed.jsonl"),
                            usage=AgentUsage(input_tokens=24763, cached_input_tokens=24448,
                                             output_tokens=122))
        failed = Outcome(script=Script.from_file(FIXTURES / "exec_context_window.jsonl",
                                                 exit_code=1), usage=AgentUsage())
        refused = Script.from_file(FIXTURES / "exec_unauthorized.jsonl", exit_code=1)
        stopped = Outcome(script=Script.from_file(FIXTURES / "exec_completed.jsonl").head(2),
                          usage=AgentUsage())
        rate_limited = Ending(script=Script.from_file(FIXTURES / "exec_rate_limited.jsonl",
                                                      exit_code=1), message="429")
        infra_error = Ending(script=Script.from_file(FIXTURES / "exec_failed.jsonl",
                                                     exit_code=1), message="disconnected")
        model_says_unauthorized = ...  # a failed run whose model text quotes a 401

How a run ended is checked too: the statuses a trainer acts on, each from a run of the CLI's own
signals (``rate_limited``, ``infra_error``, and ``max_turns``/``budget_exhausted`` for a CLI with
such limits: ``Ending(script, message)``, the message being the CLI's reason, quoted in the
execution's message), a failed run whose model text merely says "401 Unauthorized"
(``model_says_unauthorized``: ``failed``, never ``not_authenticated``), and a CLI that lingers after
its final result event (stopped within 5 s, with a child in a session of its own, still
``completed``; the plugin's ``is_final_event`` must recognise the last event of ``completed``).

Fixtures a subclass's own tests may use, besides ``AgentContract``'s: ``fake`` (the installed
``FakeCli``, playing ``completed``), ``invocation`` (the fake first on its ``PATH``), and the
helper ``run_with(agent, invocation, fake, script)``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import attrs
import pytest

from aka_core.kits.agent_runtime import RESULT_EXIT_SECONDS, RESULT_GRACE_SECONDS, CliAgent
from aka_core.models import AgentExecution, AgentUsage
from aka_core.plugin.records import AgentInvocation, AgentSpec
from aka_core.testing.contracts import AgentContract
from aka_core.testing.fake_cli import (
    FakeCli,
    Reply,
    Requires,
    Script,
    append,
    ignore_sigterm,
    linger,
    spawn_child,
)
from aka_core.testing.processes import wait_for

NOT_JSON = ("plain text that is not JSON", '{"type": "cut off', "[1, 2, 3]")
"""Lines a CLI may print among its events that are not JSON objects (a JSON array included)."""


def cli_agent(spec: AgentSpec, options: dict[str, Any]) -> CliAgent:
    """The agent ``spec`` builds with ``options``, which must be a ``CliAgent``."""
    agent = spec.make(options)
    assert isinstance(agent, CliAgent), f"{spec.name}'s factory must return a CliAgent"
    return agent


@attrs.frozen(kw_only=True)
class Outcome:
    """A run the fake CLI plays, and what the agent must record of it: exactly ``usage``, and
    ``message`` (text the CLI printed on stderr, say) within the execution's message."""

    script: Script
    usage: AgentUsage
    message: str | None = None


@attrs.frozen(kw_only=True)
class Ending:
    """A run the fake CLI plays that must end with a given status, and ``message``: the CLI's own
    reason, which the execution's message must quote."""

    script: Script
    message: str


class CliAgentContract(AgentContract):
    """A CLI agent runs its CLI headless in the workspace, records what it reported, and says how
    the run ended: completed, failed with the CLI's exit code, not authenticated, rate-limited, an
    infrastructure failure, at its turn or spending limit, timed out (the CLI and its children
    stopped), or not installed; and stops a CLI that lingers after its final result."""

    plugin: ClassVar[ModuleType]
    """The module whose hookimpls register the agent."""
    cli_version: ClassVar[str]
    """What the fake CLI answers to ``--version`` (recorded as ``execution.version``)."""
    requires: ClassVar[Requires] = Requires()
    """What the plugin's command line must hold (the fake refuses it otherwise)."""
    replies: ClassVar[tuple[Reply, ...]] = ()
    """The CLI's answers to other command lines (its login status when logged in ...)."""
    completed: ClassVar[Outcome]
    """A run that finishes (exit 0)."""
    failed: ClassVar[Outcome]
    """A run that fails: its script's non-zero exit code, ``message`` from its stderr."""
    refused: ClassVar[Script]
    """What the CLI prints and exits with when its credentials are refused."""
    stopped: ClassVar[Outcome]
    """What the CLI prints before it hangs past the budget, and the usage recorded of that."""
    not_json: ClassVar[tuple[str, ...]] = NOT_JSON
    """Lines that are not JSON objects, printed among the events of ``completed``."""
    rate_limited: ClassVar[Ending]
    """A run its provider throttled (HTTP 429, a usage limit), as the CLI reports it."""
    infra_error: ClassVar[Ending]
    """A run that failed for reasons outside the agent (a server error, a lost connection)."""
    max_turns: ClassVar[Ending | None] = None
    """A run stopped at the CLI's turn limit; None for a CLI without one."""
    budget_exhausted: ClassVar[Ending | None] = None
    """A run stopped at the CLI's spending limit; None for a CLI without one."""
    model_says_unauthorized: ClassVar[Script]
    """A failed run (non-zero exit, no credential problem) whose model text says "401
    Unauthorized" / "invalid API key": it must be ``failed``, not ``not_authenticated``."""
    budget_seconds: ClassVar[float] = 2.0

    options = {"grace_seconds": 1}

    # ------------------------------------------------------------------ fixtures

    @pytest.fixture
    def fake(self, spec: AgentSpec, tmp_path_factory: pytest.TempPathFactory,
             monkeypatch: pytest.MonkeyPatch) -> FakeCli:
        """The fake CLI, installed under the agent's executable name, playing ``completed``. It
        lies outside ``tmp_path``, so the check that nothing outside the workspace changes is
        not disturbed by it; the developer's own credentials are removed from the environment."""
        agent = cli_agent(spec, {})
        for key in agent.credential_env:
            monkeypatch.delenv(key, raising=False)
        return FakeCli.install(tmp_path_factory.mktemp("fake-cli") / "bin", agent.executable,
                               version=self.cli_version, replies=self.replies,
                               requires=self.requires, script=self.completed.script)

    @pytest.fixture
    def invocation(self, request: pytest.FixtureRequest, make_invocation: Any,
                   fake: FakeCli) -> AgentInvocation:
        return fake.on_path(make_invocation(self.task_id))

    @staticmethod
    def run_with(agent: CliAgent, invocation: AgentInvocation, fake: FakeCli,
                 script: Script) -> AgentExecution:
        """``agent`` run on ``invocation`` with the fake playing ``script``."""
        fake.play(script)
        return agent.run(invocation)

    # ------------------------------------------------------------------ the contract

    def test_registered_through_the_host(self, spec: AgentSpec, register_plugin: Any) -> None:
        assert register_plugin(self.plugin).agent(spec.name).factory is spec.factory

    def test_completed_run_records_what_the_cli_reported(
        self, spec: AgentSpec, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        execution = agent.run(invocation)
        assert (execution.agent, execution.status, execution.exit_code, execution.timed_out) == (
            spec.name, "completed", 0, False), execution.message
        assert execution.version == self.cli_version
        assert execution.usage == self.completed.usage
        got = fake.received(invocation)
        assert Path(got["cwd"]).resolve() == invocation.workspace.resolve()
        assert invocation.prompt in (got["stdin"], got["argv"][-1]), "the prompt did not arrive"
        kept = (invocation.logs_dir / "agent.jsonl").read_text(encoding="utf-8").splitlines()
        assert kept == [text.strip() for text in self.completed.script.printed]

    def test_lines_that_are_not_json_are_counted_and_kept(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        execution = self.run_with(agent, invocation, fake,
                                  self.completed.script.interleaved(self.not_json))
        assert execution.status == "completed", execution.message
        assert f"{len(self.not_json)} lines were not JSON" in (execution.message or "")
        assert execution.usage == self.completed.usage
        logged = [json.loads(text) for text in
                  (invocation.logs_dir / "agent.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [e["aka_unparsed_line"] for e in logged if "aka_unparsed_line" in e] == list(
            self.not_json)
        assert [e for e in logged if "aka_unparsed_line" not in e] == self.completed.script.events

    def test_a_hang_is_stopped_at_the_budget_with_its_children(
        self, spec: AgentSpec, plugin_options: dict[str, Any], make_invocation: Any,
        fake: FakeCli
    ) -> None:
        budget = self.budget_seconds
        invocation = fake.on_path(make_invocation(self.task_id, timeout_seconds=budget))
        agent = cli_agent(spec, {**plugin_options, "grace_seconds": 1})
        started = time.monotonic()
        execution = self.run_with(agent, invocation, fake,
                                  attrs.evolve(self.stopped.script, hang=True))
        elapsed = time.monotonic() - started
        assert (execution.status, execution.timed_out) == ("timed_out", True), execution.message
        # the budget and the grace, plus the version query and start-up on a loaded machine
        assert elapsed < budget + 1 + 5, f"took {elapsed:.1f} s for a {budget} s budget"
        assert f"stopped at the budget of {budget:.0f} s" in (execution.message or "")
        wait_for(lambda: not fake.processes(), 5, "the CLI and its child to be gone")
        assert execution.usage == self.stopped.usage

    def test_a_non_zero_exit_fails_with_its_code(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        execution = self.run_with(agent, invocation, fake, self.failed.script)
        assert (execution.status, execution.exit_code, execution.timed_out) == (
            "failed", self.failed.script.exit_code, False), execution.message
        if self.failed.message:
            assert self.failed.message in (execution.message or "")
        assert execution.usage == self.failed.usage

    def test_refused_credentials_are_not_authenticated(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        execution = self.run_with(agent, invocation, fake, self.refused)
        assert (execution.status, execution.exit_code) == (
            "not_authenticated", self.refused.exit_code), execution.message

    def test_a_cli_lingering_after_its_result_is_stopped_within_5_s(
        self, spec: AgentSpec, plugin_options: dict[str, Any], invocation: AgentInvocation,
        fake: FakeCli
    ) -> None:
        """After its final result event the CLI does not exit (it ignores SIGTERM, and a child
        in a session of its own keeps running): it is stopped, with that child, within 5 s of
        the event, far from its budget, and the run still counts as completed."""
        agent = cli_agent(spec, {**plugin_options, "grace_seconds": 30})
        fake.play(self.completed.script.then(spawn_child(new_session=True), ignore_sigterm(),
                                             linger()))
        execution = agent.run(invocation)
        stopped = time.time()
        last_event = (invocation.logs_dir / "agent.jsonl").stat().st_mtime
        assert (execution.status, execution.timed_out) == ("completed", False), execution.message
        assert stopped - last_event < 5, f"stopped {stopped - last_event:.1f} s after the result"
        assert stopped - last_event >= RESULT_EXIT_SECONDS - 0.5, "stopped before it could exit"
        assert "after its final result event" in (execution.message or "")
        assert execution.usage == self.completed.usage
        wait_for(lambda: not fake.processes(), 5, "the CLI and its child to be gone")
        assert RESULT_EXIT_SECONDS + RESULT_GRACE_SECONDS < 5

    @pytest.mark.parametrize("status", ["rate_limited", "infra_error", "max_turns",
                                        "budget_exhausted"])
    def test_the_cli_signals_say_how_the_run_ended(
        self, status: str, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        ending: Ending | None = getattr(self, status)
        if ending is None:
            pytest.skip(f"{type(self).__name__}'s CLI has no {status} signal")
        execution = self.run_with(agent, invocation, fake, ending.script)
        assert execution.status == status, execution.message
        assert ending.message in (execution.message or ""), "the CLI's reason is not quoted"

    def test_a_model_text_saying_unauthorized_is_no_auth_failure(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        assert self.model_says_unauthorized.exit_code != 0, "the run must fail"
        assert "unauthorized" in json.dumps(self.model_says_unauthorized.events).lower()
        execution = self.run_with(agent, invocation, fake, self.model_says_unauthorized)
        assert execution.status == "failed", execution.message

    def test_not_on_path_is_not_installed(
        self, agent: CliAgent, make_invocation: Any, tmp_path: Path
    ) -> None:
        empty = tmp_path / "empty-bin"
        empty.mkdir()
        invocation = attrs.evolve(make_invocation(self.task_id), environment={"PATH": str(empty)})
        execution = agent.run(invocation)
        assert execution.status == "not_installed"
        assert f"{agent.executable!r} is not on PATH" in (execution.message or "")

    def test_the_cli_gets_its_credentials_a_private_home_and_no_other_secret(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli,
        monkeypatch: pytest.MonkeyPatch
    ) -> None:
        credentials = {key: f"secret-{i}" for i, key in enumerate(agent.credential_env)}
        for key, value in credentials.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
        monkeypatch.setenv("GITHUB_TOKEN", "must-not-leak")
        execution = agent.run(invocation)
        assert execution.status == "completed", execution.message
        env = fake.received(invocation)["env"]
        assert {key: env.get(key) for key in credentials} == credentials
        assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env
        home = invocation.logs_dir / "agent_home"
        assert env["HOME"] == str(home)
        if agent.config_dir_env:
            assert env[agent.config_dir_env] == str(home / f".{agent.name}")

    def test_no_credential_is_passed_when_none_is_set(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        agent.run(invocation)
        env = fake.received(invocation)["env"]
        assert not [key for key in agent.credential_env if key in env]

    def test_the_fake_refuses_a_command_line_without_what_the_plugin_relies_on(
        self, agent: CliAgent, invocation: AgentInvocation, fake: FakeCli
    ) -> None:
        """Each token sequence of ``requires.args`` taken out of the plugin's command line makes
        the fake CLI refuse it (exit 3), as the real one would: the fake checks what it should."""
        command = agent.command
        for tokens in self.requires.args:
            def without(invocation: AgentInvocation, executable: str,
                        tokens: tuple[str, ...] = tokens) -> Any:
                cmd = command(invocation, executable)
                argv, n = list(cmd.argv), len(tokens)
                at = next(i for i in range(len(argv)) if tuple(argv[i:i + n]) == tokens)
                return attrs.evolve(cmd, argv=argv[:at] + argv[at + n:])

            agent.command = without  # type: ignore[method-assign]
            execution = agent.run(invocation)
            assert (execution.status, execution.exit_code) == ("failed", 3), execution.message
            assert f"missing {' '.join(tokens)}" in (execution.message or "")

    def test_usage_of_no_events_is_all_unknown(self, spec: AgentSpec) -> None:
        assert cli_agent(spec, {}).usage([]) == AgentUsage()

    def test_check_reports_the_installed_version(self, spec: AgentSpec, fake: FakeCli) -> None:
        found = cli_agent(spec, {"executable": str(fake.executable)}).check()
        assert (found.installed, found.version) == (True, self.cli_version), found.detail

    def test_check_without_the_cli(self, spec: AgentSpec, tmp_path: Path) -> None:
        found = cli_agent(spec, {"executable": str(tmp_path / "nowhere" / "cli")}).check()
        assert (found.installed, found.ready) == (False, False)

    # ------------------------------------------------------------------ whole runs

    def whole_run(self, spec: AgentSpec, plugin_options: dict[str, Any], tmp_path: Path,
                  make_task: Any, fake: FakeCli, **options: Any) -> Path:
        """One ``aka_core.api.run`` of ``task_id`` with this agent and the fake CLI; the run
        directory. The plugin is registered if it is not installed."""
        from aka_core import api
        from aka_core.plugin.host import PluginHost
        from aka_core.yamlio import dump_yaml

        make_task(self.task_id)
        config = tmp_path / "run_config.yaml"
        config.write_text(dump_yaml({
            "agent": {"template": spec.name, "timeout_seconds": 120,
                      "options": {**plugin_options, "executable": str(fake.executable),
                                  "grace_seconds": 1, **options}},
            "tasks": [self.task_id], "target_gpu_model": "cpu",
            "tasks_directory": str(tmp_path / "tasks"),
        }), encoding="utf-8")
        host = PluginHost()
        if spec.name not in host.names("agent"):
            host.register(self.plugin)
        return api.run(config, output_root=tmp_path / "out", host=host).run_dir

    @pytest.mark.slow
    def test_a_whole_run_records_the_execution_and_its_usage(
        self, spec: AgentSpec, plugin_options: dict[str, Any], tmp_path: Path, make_task: Any,
        fake: FakeCli
    ) -> None:
        from aka_core.run.results import agent_cost_path, read_task_result, task_result_path
        from aka_core.yamlio import load_plain_yaml

        run_dir = self.whole_run(spec, plugin_options, tmp_path, make_task, fake)
        result = read_task_result(task_result_path(run_dir, self.task_id))
        execution = result.agent_execution
        assert execution is not None
        assert (execution.agent, execution.status, execution.exit_code, execution.timed_out,
                execution.version) == (spec.name, "completed", 0, False, self.cli_version)
        usage = attrs.asdict(self.completed.usage)
        raw = load_plain_yaml(task_result_path(run_dir, self.task_id))
        assert raw["agent_execution"]["usage"] == usage
        costs = json.loads(agent_cost_path(run_dir, self.task_id).read_text(encoding="utf-8"))
        assert costs == {"task_id": self.task_id, "agent": spec.name, **usage}
        assert result.candidate_accepted is True, result.acceptance

    @pytest.mark.slow
    def test_a_whole_run_rejects_a_write_into_the_task_folder(
        self, spec: AgentSpec, plugin_options: dict[str, Any], tmp_path: Path, make_task: Any,
        fake: FakeCli
    ) -> None:
        """Unconfined (``confinement: off``), a CLI can write into the task's own folder; the
        integrity check then rejects the candidate."""
        from aka_core.run.results import read_task_result, task_result_path

        reference = tmp_path / "tasks" / self.task_id / "reference.py"
        fake.play(self.completed.script.after(
            append(reference, "\n# written by the agent outside its workspace\n")))
        run_dir = self.whole_run(spec, plugin_options, tmp_path, make_task, fake,
                                 confinement="off")
        assert "written by the agent" in reference.read_text(), "the fake did not write there"
        result = read_task_result(task_result_path(run_dir, self.task_id))
        assert result.agent_execution is not None
        assert result.agent_execution.status == "completed", result.agent_execution.message
        assert result.candidate_accepted is False
        assert result.acceptance is not None
        gates = {gate.name: gate for gate in result.acceptance.gates}
        assert gates["evaluator_files_untouched"].passed is False
        assert "reference.py" in (gates["evaluator_files_untouched"].detail or "")
