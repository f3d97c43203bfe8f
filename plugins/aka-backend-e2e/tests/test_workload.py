"""workload.yaml: its JSON Schema's errors name the field and the line; the lock catches every
change of the workload, of a kernel file the agent may not edit, and of the weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aka_backend_e2e import workload as wl
from aka_backend_e2e.kernels_api import BASELINE_TREE

from aka_core.plugin import ConfigError

DIGEST = "sha256:" + "ab" * 32
WORKLOAD = f"""\
engine: builtin
model: {{config: tiny, seed: 0}}
weights_digest: {DIGEST}
kernels: {{entrypoints: [rms_norm, fused_add_rms_norm]}}
cases:
  - name: c1
    input_len: [8, 16]
    output_len: [8, 8]
    requests: 4
    max_concurrency: 2
"""


def write_task(root: Path, text: str = WORKLOAD) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "workload.yaml").write_text(text, encoding="utf-8")
    shutil.copytree(BASELINE_TREE, root / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def lock(root: Path) -> dict:
    """The lock as ``write_lock`` writes it, without generating weights (tests pin a digest)."""
    workload = wl.load_workload(root)
    data = wl.expected_lock(root, workload, wl.pinned_weights(workload))
    (root / wl.LOCK_FILE).write_text(json.dumps(data), encoding="utf-8")
    return data


def problems(text: str, tmp_path: Path) -> str:
    write_task(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        wl.load_workload(tmp_path)
    return str(info.value)


def test_a_valid_workload_loads_with_its_defaults(tmp_path: Path) -> None:
    workload = wl.load_workload(write_task(tmp_path))
    assert workload.engine == "builtin" and workload.model.config == "tiny"
    assert workload.editable == ("kernels/norm.py",)
    case = workload.cases[0]
    assert case.request_rate == float("inf") and case.ignore_eos and case.warmup_requests == 8
    assert workload.measurement.min_pairs == 3 and workload.correctness.max_regret == 0.5
    assert workload.digest.startswith("sha256:")


def test_comments_and_key_order_do_not_change_the_digest(tmp_path: Path) -> None:
    first = wl.load_workload(write_task(tmp_path / "a")).digest
    reordered = "# a comment\n" + "\n".join(reversed(WORKLOAD.split("\ncases:")[0].splitlines()))
    reordered += "\ncases:" + WORKLOAD.split("\ncases:")[1]
    assert wl.load_workload(write_task(tmp_path / "b", reordered)).digest == first


def test_a_validation_record_is_the_tasks_not_the_workloads(tmp_path: Path) -> None:
    """validated_on is read (the task carries it) but left out of the digest: recording where a
    task ran needs no new lock; any other new key does change the digest."""
    plain = wl.load_workload(write_task(tmp_path / "a"))
    record = ('validated_on:\n- {device: NVIDIA H200, date: "2026-12-03", mode: run,\n'
              '   note: "A/A 1.000"}\n')
    recorded = wl.load_workload(write_task(tmp_path / "b", WORKLOAD + record))
    assert recorded.digest == plain.digest
    assert recorded.validated_on == ({"device": "NVIDIA H200", "date": "2026-12-03",
                                      "mode": "run", "note": "A/A 1.000"},)
    changed = wl.load_workload(write_task(tmp_path / "c", WORKLOAD + "precision: float32\n"))
    assert changed.digest != plain.digest
    assert "validated_on[0]" in problems(WORKLOAD + "validated_on:\n- {device: x}\n",
                                         tmp_path / "d")


@pytest.mark.parametrize(("change", "field", "words"), [
    (("engine: builtin", "engine: trt"), "engine", "builtin"),
    (("requests: 4", "requests: 0"), "cases[0].requests", "1"),
    (("max_concurrency: 2", "max_concurrency: two"), "cases[0].max_concurrency", "integer"),
    (("entrypoints: [rms_norm, fused_add_rms_norm]", "entrypoints: [layer_norm]"),
     "kernels.entrypoints[0]", "rms_norm"),
    (("input_len: [8, 16]", "input_len: [8]"), "cases[0].input_len", ""),
    (("output_len: [8, 8]", "output_len: [8, 8]\n    colour: red"), "cases[0]", "colour"),
])
def test_schema_errors_name_the_field_and_line(tmp_path: Path, change: tuple[str, str],
                                               field: str, words: str) -> None:
    text = problems(WORKLOAD.replace(*change), tmp_path)
    assert "workload.yaml:" in text and field in text, text
    assert words in text, text


def test_checks_beyond_the_schema(tmp_path: Path) -> None:
    text = problems(WORKLOAD.replace("input_len: [8, 16]", "input_len: [16, 8]") + """\
  - name: c1
    input_len: [8, 8]
    output_len: [8, 8]
    requests: 1
    max_concurrency: 1
""", tmp_path)
    assert "cases[0].input_len" in text and "empty" in text
    assert "cases[1].name" in text and "already used" in text
    served = problems(WORKLOAD.replace("model: {config: tiny, seed: 0}",
                                       "model: {id: Qwen/Qwen3-0.6B, revision: " + "a" * 40 + "}"),
                      tmp_path / "served")
    assert "builtin config" in served


def test_a_matching_lock_passes_and_every_change_is_named(tmp_path: Path) -> None:
    root = write_task(tmp_path)
    lock(root)
    wl.check_lock(root, wl.load_workload(root))  # unchanged: passes
    (root / "kernels" / "norm.py").write_text("# the agent's file: not in the lock\n")
    wl.check_lock(root, wl.load_workload(root))
    (root / "kernels" / "rotary.py").write_text("# changed\n")
    (root / "workload.yaml").write_text(WORKLOAD.replace("requests: 4", "requests: 5"))
    with pytest.raises(ConfigError) as info:
        wl.check_lock(root, wl.load_workload(root))
    text = str(info.value)
    assert "workload.lock" in text and "kernels/rotary.py changed" in text
    assert "workload.yaml changed" in text
    assert f"python -m aka_backend_e2e.workload lock {root}" in text


def test_a_missing_lock_or_other_weights_are_refused(tmp_path: Path) -> None:
    root = write_task(tmp_path)
    with pytest.raises(ConfigError, match=r"workload\.lock is missing"):
        wl.check_lock(root, wl.load_workload(root))
    data = lock(root)
    (root / wl.LOCK_FILE).write_text(json.dumps({**data, "weights": "sha256:" + "cd" * 32}))
    with pytest.raises(ConfigError, match="the weights differ"):
        wl.check_lock(root, wl.load_workload(root))


def test_the_lock_command_generates_the_weights_and_fills_in_their_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("AKA_E2E_CACHE", str(tmp_path / "cache"))
    root = write_task(tmp_path / "task", WORKLOAD.replace(f"weights_digest: {DIGEST}\n", ""))
    assert wl.main(["lock", str(root)]) == 0
    written = wl.load_workload(root).weights_digest
    assert written and written == json.loads((root / wl.LOCK_FILE).read_text())["weights"]
    assert (tmp_path / "cache" / "tiny-seed0.safetensors").is_file()
    assert wl.main(["check", str(root)]) == 0
    (root / "workload.yaml").write_text(
        (root / "workload.yaml").read_text().replace(written, DIGEST))
    assert wl.main(["lock", str(root)]) == 2, "a pinned digest that differs is not overwritten"


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(wl.schema())
