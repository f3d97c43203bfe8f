# TEMPORARY device benchmark (to be deleted): correctness + timing of baseline vs solution.
import os, sys, json, time, importlib.util, types, traceback
import torch, triton, yaml
from triton.testing import do_bench

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../.."))
RES = []
OUT = os.environ.get("OUT", "/tmp")

def load(path, pkg):
    d = os.path.dirname(path)
    if pkg not in sys.modules:
        p = types.ModuleType(pkg); p.__path__ = [d]; sys.modules[pkg] = p
    name = pkg + "." + os.path.basename(path)[:-3]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[name] = m; spec.loader.exec_module(m)
    return m

def fn(d, spec, pkg):
    f, n = spec.split(":"); return getattr(load(os.path.join(d, f), pkg), n)

def tup(x): return x if isinstance(x, (tuple, list)) else (x,)

def check(out, ref, tol):
    msgs, ok = [], True
    for o, r in zip(tup(out), tup(ref)):
        t = tol[str(o.dtype).replace("torch.", "")]
        od, rd = o.double(), r.double()
        err = (od - rd).abs(); lim = t.get("atol", 0.0) + t["rtol"] * rd.abs()
        ratio = (err / lim.clamp_min(1e-300)).max().item() if True else 0
        nbad = (err > lim).sum().item()
        l2 = (torch.linalg.vector_norm(od - rd) / torch.linalg.vector_norm(rd)).item()
        good = nbad == 0 and l2 <= t.get("max_rel_l2", 1e9) and not torch.isnan(od).any().item()
        ok &= good
        msgs.append(f"bad={nbad} ratio={ratio:.3g} l2={l2:.2e}")
        del od, rd, err, lim
    return ok, "; ".join(msgs)

def bench(f, inp):
    return do_bench(lambda: f(**inp), warmup=25, rep=150, return_mode="median")

def run_task(task, variants=None, only=None):
    tdir = f"{ROOT}/tasks/{task}"; sdir = f"{ROOT}/tests/solutions/{task}"
    y = yaml.safe_load(open(f"{tdir}/task.yaml"))
    tk = "t_" + task.replace("/", "_")
    make = fn(tdir, y["inputs"], tk); ref = fn(tdir, y["reference"], tk)
    base = fn(tdir, y.get("baseline", y["entrypoint"]), "b_" + task.replace("/", "_"))
    sol = fn(sdir, y["entrypoint"], "s_" + task.replace("/", "_"))
    cases = [("smoke", y["smoke_case"])] + [("case", c) for c in y["cases"]] + [("held", c) for c in y.get("held_out_cases", [])]
    for kind, c in cases:
        try:
            inp = make(c["params"], 0, "cuda")
            torch.cuda.synchronize(); t0 = time.time(); r = ref(**inp); torch.cuda.synchronize(); tr1 = (time.time() - t0) * 1e3
            ob = base(**inp); os_ = sol(**inp); torch.cuda.synchronize()
            same = all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(tup(ob), tup(os_)))
            okb, mb = check(ob, r, y["tolerance"]); oks, ms = check(os_, r, y["tolerance"])
            del ob, os_
            row = dict(task=task, kind=kind, case=c["name"], same=same, base_ok=okb, sol_ok=oks, base_chk=mb, sol_chk=ms, ref_first_ms=tr1)
            if kind != "smoke":
                row["ref_ms"] = do_bench(lambda: ref(**inp), warmup=1, rep=30, return_mode="median")
                row["base_ms"] = bench(base, inp); row["sol_ms"] = bench(sol, inp)
                row["speedup"] = row["base_ms"] / row["sol_ms"]
                if variants and kind == "case":
                    for vname, vf in variants.items():
                        try:
                            ov = vf(**inp); okv, mv = check(ov, r, y["tolerance"]); del ov
                            row["v_" + vname] = (round(bench(vf, inp), 4), okv)
                        except Exception as e:
                            row["v_" + vname] = repr(e)[:200]
            del r, inp
        except Exception as e:
            row = dict(task=task, kind=kind, case=c["name"], error=traceback.format_exc()[-1500:])
        torch.cuda.empty_cache()
        RES.append(row); print(json.dumps(row), flush=True)
        with open(f"{OUT}/bench.json", "w") as f: json.dump(RES, f, indent=1)

# ---------------- variants ----------------
def _mkgemm(modname, bias=False):
    sm = sys.modules[modname]
    kern = sm._gemm_bias_gelu_kernel if bias else sm._matmul_kernel
    def mks(BM, BN, BK, G, w, s):
        def f(a, b, bias=None):
            M, K = a.shape; N = b.shape[1]; c = torch.empty((M, N), device=a.device, dtype=a.dtype)
            v = sm._vec(a.stride(0), b.stride(0), c.stride(0))
            args = (a, b, bias, c) if bias is not None else (a, b, c)
            kern[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](*args, M, N, K, a.stride(0) // v, b.stride(0) // v, c.stride(0) // v, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=G, VEC=v, num_warps=w, num_stages=s)
            return c
        return f
    return mks

def gemm_variants():
    mks = _mkgemm("s_triton2triton_gemm_bf16.kernel")
    return {"s128x128x64w8s4": mks(128, 128, 64, 8, 8, 4), "s128x256x64w8s4": mks(128, 256, 64, 8, 8, 4), "s256x128x64w8s3": mks(256, 128, 64, 8, 8, 3), "torch": lambda a, b: a @ b}

def gelu_variants():
    mks = _mkgemm("s_torch2triton_gemm_bias_gelu.kernel", bias=True)
    return {"s128x128x64w8s4": mks(128, 128, 64, 8, 8, 4), "s128x128x64w4s4": mks(128, 128, 64, 8, 4, 4), "s128x256x64w8s4": mks(128, 256, 64, 8, 8, 4),
            "s256x128x64w8s3": mks(256, 128, 64, 8, 8, 3), "s128x256x32w8s5": mks(128, 256, 32, 8, 8, 5), "s64x256x64w4s4": mks(64, 256, 64, 8, 4, 4)}

def attn_variants():
    m = sys.modules["b_triton2triton_causal_attention.kernel"]
    sm = sys.modules["s_triton2triton_causal_attention.kernel"]
    def mk(BM, BN, w, s):
        def f(q, k, v):
            B, H, S, D = q.shape; o = torch.empty_like(q)
            m._attn_fwd_kernel[(triton.cdiv(S, BM), B * H)](q, k, v, o, D**-0.5, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, S, BLOCK_M=BM, BLOCK_N=BN, HEAD_D=D, num_warps=w, num_stages=s)
            return o
        return f
    def mks(BM, BN, w, s):
        def f(q, k, v):
            B, H, S, D = q.shape; o = torch.empty_like(q)
            sm._attn_fwd_kernel[(triton.cdiv(S, BM), B * H)](q, k, v, o, D**-0.5 * 1.4426950408889634, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, S, BLOCK_M=BM, BLOCK_N=BN, HEAD_D=D, num_warps=w, num_stages=s)
            return o
        return f
    import torch.nn.functional as F
    return {"s128x128w8s3": mks(128, 128, 8, 3), "s64x64w4s4": mks(64, 64, 4, 4), "s64x128w4s3": mks(64, 128, 4, 3),
            "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)}

import triton.language as tl

@triton.jit
def _rope_loop_kernel(x_ptr, out_ptr, pos_ptr, cos_ptr, sin_ptr, n_heads, half, stride_xt, stride_xh, stride_ot, stride_oh, stride_cos, stride_sin, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    offs = tl.arange(0, BLOCK); mask = offs < half
    pos = tl.load(pos_ptr + t)
    cos = tl.load(cos_ptr + pos * stride_cos + offs, mask=mask, other=0.0)
    sin = tl.load(sin_ptr + pos * stride_sin + offs, mask=mask, other=0.0)
    for h in range(n_heads):
        x_row = x_ptr + t * stride_xt + h * stride_xh
        x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_row + half + offs, mask=mask, other=0.0).to(tl.float32)
        o_row = out_ptr + t * stride_ot + h * stride_oh
        tl.store(o_row + offs, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(o_row + half + offs, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)

@triton.jit
def _rope_tb_kernel(x_ptr, out_ptr, pos_ptr, cos_ptr, sin_ptr, T, half, stride_xt, stride_xh, stride_ot, stride_oh, stride_cos, stride_sin, BLOCK_T: tl.constexpr, BLOCK: tl.constexpr):
    tb = tl.program_id(0); h = tl.program_id(1)
    ts = tb * BLOCK_T + tl.arange(0, BLOCK_T); offs = tl.arange(0, BLOCK)
    mask = (ts[:, None] < T) & (offs[None, :] < half)
    pos = tl.load(pos_ptr + ts, mask=ts < T, other=0)
    cos = tl.load(cos_ptr + pos[:, None] * stride_cos + offs[None, :], mask=mask, other=0.0)
    sin = tl.load(sin_ptr + pos[:, None] * stride_sin + offs[None, :], mask=mask, other=0.0)
    xp = x_ptr + ts[:, None] * stride_xt + h * stride_xh + offs[None, :]
    x1 = tl.load(xp, mask=mask, other=0.0).to(tl.float32); x2 = tl.load(xp + half, mask=mask, other=0.0).to(tl.float32)
    op = out_ptr + ts[:, None] * stride_ot + h * stride_oh + offs[None, :]
    tl.store(op, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(op + half, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)

def rope_variants():
    def mkloop(w):
        def ap(x, positions, cos_cache, sin_cache):
            T, H, D = x.shape; out = torch.empty_like(x)
            _rope_loop_kernel[(T,)](x, out, positions, cos_cache, sin_cache, H, D // 2, x.stride(0), x.stride(1), out.stride(0), out.stride(1), cos_cache.stride(0), sin_cache.stride(0), BLOCK=triton.next_power_of_2(D // 2), num_warps=w)
            return out
        return lambda positions, q, k, cos_cache, sin_cache: (ap(q, positions, cos_cache, sin_cache), ap(k, positions, cos_cache, sin_cache))
    def mktb(bt, w):
        def ap(x, positions, cos_cache, sin_cache):
            T, H, D = x.shape; out = torch.empty_like(x)
            _rope_tb_kernel[(triton.cdiv(T, bt), H)](x, out, positions, cos_cache, sin_cache, T, D // 2, x.stride(0), x.stride(1), out.stride(0), out.stride(1), cos_cache.stride(0), sin_cache.stride(0), BLOCK_T=bt, BLOCK=triton.next_power_of_2(D // 2), num_warps=w)
            return out
        return lambda positions, q, k, cos_cache, sin_cache: (ap(q, positions, cos_cache, sin_cache), ap(k, positions, cos_cache, sin_cache))
    return {"loop_w1": mkloop(1), "loop_w2": mkloop(2), "loop_w4": mkloop(4), "tb2_w1": mktb(2, 1), "tb4_w2": mktb(4, 2), "tb8_w4": mktb(8, 4)}

def gather_variants():
    m = sys.modules["b_triton2triton_embedding_gather.kernel"]
    sm = sys.modules["s_triton2triton_embedding_gather.kernel"]
    def mk(BD, w):
        def f(ids, table):
            N = ids.shape[0]; V, D = table.shape; out = torch.empty((N, D), device=table.device, dtype=table.dtype)
            m._gather_kernel[(N,)](ids, table, out, D, table.stride(0), out.stride(0), BLOCK_D=BD, num_warps=w)
            return out
        return f
    def mks(BN, BD, w):
        def f(ids, table):
            N = ids.shape[0]; V, D = table.shape; out = torch.empty((N, D), device=table.device, dtype=table.dtype)
            sm._gather_kernel[(triton.cdiv(N, BN), triton.cdiv(D, BD))](ids, table, out, N, D, table.stride(0), out.stride(0), BLOCK_N=BN, BLOCK_D=BD, EVEN_D=(D % BD == 0), num_warps=w)
            return out
        return f
    return {"b128w4": mk(128, 4), "b512w4": mk(512, 4), "b1024w4": mk(1024, 4), "b256w2": mk(256, 2),
            "s8x1024w8": mks(8, 1024, 8), "s2x2048w8": mks(2, 2048, 8), "s1x1024w4": mks(1, 1024, 4), "torch": lambda ids, table: table[ids]}

if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    which = sys.argv[1:] or ["gemm", "gelu", "attn", "rope", "gather", "fp8"]
    tasks = {"gemm": ("triton2triton/gemm_bf16", gemm_variants), "gelu": ("torch2triton/gemm_bias_gelu", gelu_variants),
             "attn": ("triton2triton/causal_attention", attn_variants), "rope": ("triton2triton/rotary_embedding", rope_variants),
             "gather": ("triton2triton/embedding_gather", gather_variants), "fp8": ("torch2triton/fp8_quantize", None)}
    for w in which:
        task, vf = tasks[w]
        # load modules first so variants can find them
        tdir = f"{ROOT}/tasks/{task}"; y = yaml.safe_load(open(f"{tdir}/task.yaml"))
        fn(tdir, y.get("baseline", y["entrypoint"]), "b_" + task.replace("/", "_")); fn(f"{ROOT}/tests/solutions/{task}", y["entrypoint"], "s_" + task.replace("/", "_"))
        run_task(task, vf() if vf else None)
    print("SUMMARY")
    for r in RES:
        if "error" in r: print(r["task"], r["case"], "ERROR", r["error"][-300:]); continue
        print(r["task"].split("/")[1][:14], r["kind"], r["case"][:26], "same" if r["same"] else "DIFF", "B" + ("ok" if r["base_ok"] else "FAIL"), "S" + ("ok" if r["sol_ok"] else "FAIL"),
              *(f"ref={r['ref_ms']:.3f} base={r['base_ms']:.4f} sol={r['sol_ms']:.4f} x{r['speedup']:.2f}",) if "ref_ms" in r else (), *(f"{k}={v}" for k, v in r.items() if k.startswith("v_")))
