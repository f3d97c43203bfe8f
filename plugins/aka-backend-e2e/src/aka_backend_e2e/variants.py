"""Small variants of e2e tasks: the same kernels and entrypoints, served by the ``tiny`` builtin
model with little work, so that the whole judge runs on a CPU in seconds (tests, docs).

``python -m aka_backend_e2e.variants tasks/e2e/qwen3_norms /tmp/tasks/e2e/qwen3_norms_tiny``
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka_backend_e2e.workload import LOCK_FILE, WORKLOAD_FILE, write_lock

TINY: dict[str, Any] = {
    "model": {"config": "tiny", "seed": 0},
    "cases": [{"name": "tiny_c2", "input_len": [6, 12], "output_len": [6, 6], "requests": 4,
               "max_concurrency": 2, "seed": 1, "warmup_requests": 1}],
    "correctness": {"prompts": 3, "input_len": [4, 10], "output_len": 6, "seed": 7,
                    "audit_sequences": 2},
    "measurement": {"min_pairs": 1, "max_pairs": 1, "aa_floor": 0.5, "max_seconds": 120},
}


def write_tiny_variant(task_dir: Path, dest: Path, **overrides: Any) -> Path:
    """Copy the task at ``task_dir`` to ``dest`` with the tiny model and the work of ``TINY``
    (``overrides`` replace its top-level keys, e.g. ``measurement``), and lock it. ``dest``
    must not exist."""
    from ruamel.yaml import YAML

    shutil.copytree(task_dir, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [dest, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    yaml = YAML(typ="rt")
    doc = yaml.load((dest / WORKLOAD_FILE).read_text(encoding="utf-8"))
    for key, value in {**TINY, **overrides}.items():
        doc[key] = value
    doc.pop("weights_digest", None)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    (dest / WORKLOAD_FILE).write_text(buf.getvalue(), encoding="utf-8")
    (dest / LOCK_FILE).unlink(missing_ok=True)
    write_lock(dest)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m aka_backend_e2e.variants TASK_DIR DEST", file=sys.stderr)
        return 2
    dest = write_tiny_variant(Path(args[0]), Path(args[1]))
    print(f"wrote {dest} (tiny model, locked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
