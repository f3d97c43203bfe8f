"""A worker process of a parallel run (``python -m aka_core.builtin.worker RUN_DIR WORKER --parent PID``,
started by ``parallel``): claims the run's tasks one by one and runs each as ``aka run-task``
does, until none is left. It lives above ``run.execute`` and ``parallel`` (it needs both); ``parallel``
starts it by module name and never imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from aka_core.builtin.parallel import TaskQueue, claim_next
from aka_core.convert import structure
from aka_core.evaluation.evaluate import die_with_parent  # one implementation of the guard
from aka_core.interrupt import EXIT_SIGTERM, Interrupted, install_sigterm_handler
from aka_core.logging_setup import bind_context, configure_logging
from aka_core.plugin.host import PluginHost
from aka_core.run.execute import read_run_file, run_one_task
from aka_core.run.resources import VISIBILITY_VARIABLES, Slot, describe

log = structlog.get_logger("aka.parallel")


def worker_main(run_dir: Path, worker: int, parent: int) -> int:
    """Claim and run tasks until none is left; stdout and stderr are the worker's log file."""
    guard = die_with_parent(parent)
    if guard is not None:
        guard()
    meta = read_run_file(run_dir)
    slot = structure(meta["parallel"]["slots"][worker], Slot)
    configure_logging(json_output=True, force=True)
    bind_context(run=run_dir.name, worker=worker, devices=describe(slot.devices))
    log.info("worker started", pid=os.getpid(),
             visible={k: os.environ[k] for k in VISIBILITY_VARIABLES if k in os.environ})
    host, queue = PluginHost(), TaskQueue(run_dir)
    finished = 0
    while (task_id := claim_next(queue, run_dir, meta["task_ids"], worker)) is not None:
        log.info("task claimed", task=task_id)
        result = run_one_task(run_dir, task_id, host)
        finished += 1
        log.info("task finished", task=task_id, status=result.status, score=result.score)
    log.info("nothing left to claim; worker exits", tasks=finished)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aka_core.builtin.worker",
        description="claim and run tasks of a run (started by `aka run`)")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("worker", type=int)
    parser.add_argument("--parent", type=int, required=True,
                        help="pid whose death ends this worker")
    args = parser.parse_args(argv)
    # The parent stops a worker with SIGTERM: the worker then stops its agent CLI (which has a
    # session of its own) and records the interrupted task before it exits.
    install_sigterm_handler()
    try:
        return worker_main(args.run_dir.resolve(), args.worker, args.parent)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole group; the parent reports it
        return 130
    except Interrupted:
        return EXIT_SIGTERM


if __name__ == "__main__":
    sys.exit(main())
