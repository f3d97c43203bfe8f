# TEMPORARY (removed after the GPU run): correctness + timing of implementations on the GPU.
import importlib.util, json, os, sys, types
import torch, triton, yaml
ROOT = os.getcwd()
S = "tests/solutions/"
IMPLS = {  # task -> [(label, file relative to ROOT or None=solution, patch)]
  "triton2triton/gelu": [("sol", None, {})],
  "triton2triton/softmax": [("sol", None, {}), ("sol_w32", None, {"_MAX_WARPS": 32})],
  "triton2triton/layer_norm": [("sol_r4", None, {}), ("sol_r2", None, {"_ROWS": 2}),
      ("sol_r8", None, {"_ROWS": 8}), ("sol_r1", None, {"_ROWS": 1}),
      ("sol_r4_e32", None, {"_ELEMS_PER_THREAD": 32}), ("sol_r8_e32", None, {"_ROWS": 8, "_ELEMS_PER_THREAD": 32})],
  "triton2triton/rms_norm": [("sol_r4", None, {}), ("sol_r2", None, {"_ROWS": 2}),
      ("sol_r8", None, {"_ROWS": 8}), ("sol_r1", None, {"_ROWS": 1}),
      ("sol_r4_e32", None, {"_ELEMS_PER_THREAD": 32}),
      ("base_2k", S + "triton2triton/rms_norm/_tmp_base_2k.py", {}),
      ("base_b256", S + "triton2triton/rms_norm/_tmp_base_b256.py", {}),
      ("base_b256w8", S + "triton2triton/rms_norm/_tmp_base_b256w8.py", {})],
}
sel = sys.argv[1:] or list(IMPLS)
n = [0]
def load(path):
    n[0] += 1; pkg = f"p{n[0]}"
    p = types.ModuleType(pkg); p.__path__ = [os.path.dirname(path)]; sys.modules[pkg] = p
    name = pkg + "." + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[name] = m; spec.loader.exec_module(m)
    return m
def check(out, ref, tol):
    o, r = out.double(), ref.double(); err = (o - r).abs()
    lim = tol.get("atol", 0.0) + tol["rtol"] * r.abs()
    rel = float((o - r).norm() / r.norm())
    return bool((err <= lim).all()) and rel <= tol.get("max_rel_l2", 1e9)
def bench(f, inputs):
    return triton.testing.do_bench(lambda: f(**inputs), warmup=50, rep=300, return_mode="median")
res = []
for t in sel:
    folder = os.path.join(ROOT, "tasks", t); sol = os.path.join(ROOT, S, t)
    y = yaml.safe_load(open(os.path.join(folder, "task.yaml")))
    get = lambda folder, spec: getattr(load(os.path.join(folder, spec.split(":")[0])), spec.split(":")[1])
    ref_fn = get(folder, y["reference"]); inp_fn = get(folder, y["inputs"])
    base_fn = get(folder, y.get("baseline", y["entrypoint"]))
    ename = y["entrypoint"].split(":")[1]
    impls = []
    for label, f, patch in IMPLS[t]:
        m = load(os.path.join(sol, "kernel.py") if f is None else os.path.join(ROOT, f))
        for k, v in patch.items(): setattr(m, k, v)
        impls.append((label, getattr(m, ename)))
    for case in y["cases"] + y.get("held_out_cases", []):
        inputs = inp_fn(case["params"], 0, "cuda"); ref = ref_fn(**inputs)
        b = base_fn(**inputs); tol = y["tolerance"][str(b.dtype)[6:]]
        nbytes = sum(v.numel() * v.element_size() for v in inputs.values() if torch.is_tensor(v))
        nbytes += b.numel() * b.element_size()
        tb = bench(base_fn, inputs)
        row = dict(task=t, case=case["name"], MB=round(nbytes / 1e6), base=[round(tb, 4), check(b, ref, tol), round(nbytes / tb / 1e9, 2)])
        for label, f in impls:
            o = f(**inputs); ok = check(o, ref, tol) and o.dtype == b.dtype and o.shape == b.shape
            tt = bench(f, inputs)
            row[label] = [round(tt, 4), ok, round(nbytes / tt / 1e9, 2), round(tb / tt, 2)]
        print(json.dumps(row), flush=True); res.append(row)
        del inputs, b, ref; torch.cuda.empty_cache()
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "bench.json"), "w"), indent=1)
