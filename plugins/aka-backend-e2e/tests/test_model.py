"""The builtin model, its weights file, the kernel contract and the pipe's tensor format."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aka_backend_e2e import kernels_api, model, tensors, weights  # noqa: E402

from aka_core.plugin import BuildError, ConfigError  # noqa: E402

TINY = model.config_by_name("tiny")
# The digest of tiny's seed-0 weights file. Tasks pin their weights digest in their lock: if
# this changes, every task's lock breaks (the generator or the file layout changed).
TINY_SEED0_DIGEST = "sha256:8d1f68441726300340fdd0cc8150c38790fc846761d1daf6976342bdca2a8ddc"


pytestmark = pytest.mark.usefixtures("one_thread")


def test_unknown_config_names_the_choices():
    with pytest.raises(ConfigError, match=r"qwen3-0\.6b"):
        model.config_by_name("qwen9")


def test_qwen3_config_is_the_real_shape():
    c = model.config_by_name("qwen3-0.6b")
    assert (c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim, c.intermediate, c.vocab) == (
        1024, 28, 16, 8, 128, 3072, 151936)
    shapes = model.weight_shapes(c)
    assert shapes["layers.0.qkv_proj.weight"] == (4096, 1024)
    params = sum(int(torch.tensor(s).prod()) for s in shapes.values())
    assert 590e6 < params < 600e6  # Qwen3-0.6B with a tied lm head


def test_weights_are_reproducible_bit_for_bit(tmp_path):
    path, digest = weights.ensure_weights(TINY, 0, tmp_path)
    assert digest == TINY_SEED0_DIGEST
    assert weights.file_digest(path) == digest
    again = model.init_weights(TINY, 0)
    loaded, _ = weights.read_weights(path)
    assert all(torch.equal(loaded[n], again[n]) for n in again)
    other = model.init_weights(TINY, 1)
    assert not torch.equal(other["embed_tokens.weight"], again["embed_tokens.weight"])
    # Cached: the second call reads the file it made.
    assert weights.ensure_weights(TINY, 0, tmp_path) == (path, digest)


def test_hashed_uniform_is_pinned_and_uniform():
    u = model.hashed_uniform(200_000, 0, "x")
    assert u.dtype == torch.float32 and float(u.min()) > -1 and float(u.max()) < 1
    assert abs(float(u.mean())) < 0.01 and abs(float(u.std()) - 3 ** -0.5) < 0.01
    # Chunk boundaries change nothing: the value is a function of the index alone.
    assert torch.equal(model.hashed_uniform(5, 0, "x"), u[:5])


def test_weight_scales():
    w = model.init_weights(TINY, 0)
    assert all(t.dtype == torch.bfloat16 for t in w.values())
    assert abs(float(w["layers.0.down_proj.weight"].float().std()) - 128 ** -0.5) < 0.01
    assert abs(float(w["layers.1.q_norm.weight"].float().mean()) - 1.0) < 0.05
    model.check_weights(TINY, w, "w")
    del w["norm.weight"]
    with pytest.raises(ConfigError, match=r"norm\.weight"):
        model.check_weights(TINY, w, "w")


def test_safetensors_round_trip_and_digest_check(tmp_path):
    data = {"a": torch.arange(3, dtype=torch.int16), "b": torch.randn(4, 5).to(torch.bfloat16),
            "c": torch.arange(6, dtype=torch.int64).view(2, 3), "empty": torch.empty(0, 3)}
    path = tmp_path / "w.safetensors"
    digest = weights.save_weights(data, path, {"k": "v"})
    loaded, got = weights.read_weights(path, digest.removeprefix("sha256:"))
    assert got == digest
    assert all(torch.equal(loaded[k], v) for k, v in data.items())
    with pytest.raises(weights.WeightsError, match="digest mismatch"):
        weights.read_weights(path, "sha256:" + "0" * 64)
    try:
        from safetensors.torch import load_file
    except ImportError:
        pass
    else:  # any safetensors reader reads our file
        assert torch.equal(load_file(str(path))["b"], data["b"])


@pytest.mark.parametrize("corrupt", ["short", "header_len", "not_json", "offsets"])
def test_malformed_weights_files_are_refused(tmp_path, corrupt):
    blob = weights.encode_safetensors({"a": torch.zeros(4)})
    if corrupt == "short":
        blob = blob[:5]
    elif corrupt == "header_len":
        blob = (10**9).to_bytes(8, "little") + blob[8:]
    elif corrupt == "not_json":
        blob = blob[:8] + b"{" * (len(blob) - 8)
    else:
        blob = blob[:-4]
    with pytest.raises(weights.WeightsError):
        weights.decode_safetensors(bytearray(blob), "w")


def test_rope_table_is_neox_cos_then_sin():
    table = model.rope_table(TINY, 10)
    assert table.shape == (10, TINY.head_dim) and table.dtype == torch.float32
    half = TINY.head_dim // 2
    assert torch.equal(table[0, :half], torch.ones(half))
    assert torch.equal(table[0, half:], torch.zeros(half))
    assert abs(float(table[3, 0]) - float(torch.tensor(3.0).cos())) < 1e-6


def test_decoder_is_causal_and_the_baseline_tracks_the_reference():
    w = model.init_weights(TINY, 0)
    ids = torch.tensor([3, 17, 99, 5, 250, 7], dtype=torch.int64)
    ref = model.Decoder(TINY, {k: v.float() for k, v in w.items()}, kernels_api.REFERENCE)
    logits = ref.teacher_forced_logits(ids)
    assert logits.shape == (6, TINY.vocab)
    changed = ids.clone()
    changed[4] = 1
    assert torch.allclose(ref.teacher_forced_logits(changed)[:4], logits[:4], atol=1e-5)
    assert not torch.allclose(ref.teacher_forced_logits(changed)[4:], logits[4:], atol=1e-2)
    base = model.Decoder(TINY, w, kernels_api.load_tree(kernels_api.BASELINE_TREE))
    bf16 = base.teacher_forced_logits(ids).float()
    assert (bf16 - logits).abs().max() < 0.1 * logits.std()


# --------------------------------------------------------------------------- kernel trees


def _copy_tree(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "kernels"
    shutil.copytree(kernels_api.BASELINE_TREE, root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_load_tree_gives_every_entrypoint_and_a_digest(tmp_path):
    root = _copy_tree(tmp_path)
    kernels = kernels_api.load_tree(root)
    assert all(callable(kernels.entrypoint(n)) for n in kernels_api.ENTRYPOINTS)
    assert kernels.digest == kernels_api.tree_digest(kernels_api.BASELINE_TREE)
    (root / "notes.txt").write_text("x")
    assert kernels_api.tree_digest(root) != kernels.digest
    with pytest.raises(KeyError, match="choose one of"):
        kernels.entrypoint("softmax")


def test_trees_load_into_private_packages(tmp_path):
    root = _copy_tree(tmp_path)
    norm = root / "norm.py"
    norm.write_text(norm.read_text().replace("return normed.to(x.dtype) * weight",
                                             "return normed.to(x.dtype) * weight * 2"))
    changed = kernels_api.load_tree(root)
    baseline = kernels_api.load_tree(kernels_api.BASELINE_TREE)
    x, w = torch.ones(1, 4, dtype=torch.bfloat16), torch.ones(4, dtype=torch.bfloat16)
    assert float(changed.rms_norm(x, w, 1e-6)[0, 0]) == pytest.approx(2.0, rel=1e-2)
    assert float(baseline.rms_norm(x, w, 1e-6)[0, 0]) == pytest.approx(1.0, rel=1e-2)


def test_a_missing_entrypoint_names_the_file_and_function(tmp_path):
    root = _copy_tree(tmp_path)
    attention = root / "attention.py"
    attention.write_text(attention.read_text().replace("def kv_write(", "def kv_write_v2("))
    with pytest.raises(BuildError, match="kv_write") as info:
        kernels_api.load_tree(root)
    assert info.value.file == "attention.py"


def test_a_broken_file_points_at_its_line(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "rotary.py").write_text("import torch\n\nx = (\n")
    with pytest.raises(BuildError) as info:
        kernels_api.load_tree(root)
    assert info.value.file == "rotary.py" and info.value.line is not None


def test_recording_notes_each_entrypoint_called():
    called: set[str] = set()
    kernels = kernels_api.REFERENCE.recording(called)
    kernels.silu_and_mul(torch.ones(2, 4))
    assert called == {"silu_and_mul"}


# --------------------------------------------------------------------------- tensors on the pipe


def test_tensor_round_trip():
    for t in (torch.randn(3, 5).to(torch.bfloat16), torch.arange(7), torch.empty(0, 2),
              torch.tensor([1, 2], dtype=torch.int32)):
        back = tensors.decode_tensor(tensors.encode_tensor(t))
        assert back.dtype == t.dtype and torch.equal(back, t)
    assert tensors.decode_value(1e-6) == 1e-6


@pytest.mark.parametrize("mutate", [
    lambda d: {**d, "dtype": "complex64"},
    lambda d: {**d, "shape": [3, 4]},
    lambda d: {**d, "shape": [-1, 5]},
    lambda d: {**d, "shape": "3,5"},
    lambda d: {**d, "data": d["data"][:-4]},
    lambda d: {**d, "data": "!" * len(d["data"])},
    lambda d: {**d, "extra": 1},
    lambda d: {**d, "shape": [2**20, 2**20]},
    lambda d: [d],
])
def test_malformed_tensors_are_refused(mutate):
    desc = tensors.encode_tensor(torch.randn(3, 5).to(torch.bfloat16))
    with pytest.raises(tensors.TensorFormatError):
        tensors.decode_value(mutate(desc))
