"""Are tract's dedicated transformer ops faster than the same function written with standard NNEF ops?

    python bench/bench_tract_transformer_ops.py            # S=1/P=128, S=1/P=512, S=64/P=0; 200 reps
    python bench/bench_tract_transformer_ops.py --quick    # the same shapes, 20 reps

For a Llama-shaped 100M decoder (hidden 768, 12 heads, 4 KV heads, head dim 64) each case is a tiny NNEF folder
written by hand, with symbolic S and P (`extension tract_symbol`), loaded with
`tract.nnef().with_tract_transformers().with_tract_extra()` and run in tract with S and P set by the inputs.
To amortise the per-call cost of the Python binding, an op is chained as often as the 12-layer model holds it
(25 RMS norms, 12 attentions, 24 ropes). Columns: median and min ms per call, and each over the first (standard) row
of its group: below 1, that variant is faster. `std+detect` is the standard graph after tract's own
`transformers_detect_all` rewrite, which turns some standard patterns into the dedicated ops.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import nnef_torch

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 768, 12, 4, 64
EPS = 1e-6
HEADER = """version 1.0;
extension tract_registry tract_core;
extension tract_registry tract_transformers;
extension tract_symbol S;
extension tract_symbol P;
"""


@dataclass(frozen=True)
class Case:
    family: str
    variant: str  # "standard", "dedicated", ...
    chain: int
    body: str  # graph body, NNEF text
    inputs: tuple[tuple[str, tuple[str, ...]], ...]  # external name, symbolic shape
    variables: dict  # name -> numpy array


# ---------------------------------------------------------------- RMS norm


def rms_cases(chain: int, rng: np.random.Generator) -> list[Case]:
    weights = {f"w{i}": rng.standard_normal((1, 1, HIDDEN)).astype(np.float32) for i in range(chain)}
    forms = {
        "standard (x*rsqrt)": ["ms{i} = mean_reduce(sqr({x}), axes = [2]);",
                               "r{i} = rsqrt(add(ms{i}, {eps}));",
                               "n{i} = mul({x}, r{i});"],
        "standard (x/sqrt)": ["ms{i} = mean_reduce(mul({x}, {x}), axes = [2]);",
                              "r{i} = sqrt(add(ms{i}, {eps}));",
                              "n{i} = div({x}, r{i});"],
        "dedicated": ["n{i} = tract_transformers_rms_norm({x}, axis = 2, eps = {eps});"],
    }
    cases = []
    for variant, lines in forms.items():
        body, x = [], "x"
        for i in range(chain):
            body.append(f"w{i} = variable<scalar>(shape = [1, 1, {HIDDEN}], label = 'w{i}');")
            body += [line.format(i=i, x=x, eps=EPS) for line in lines]
            body.append(f"h{i} = mul(n{i}, w{i});")
            x = f"h{i}"
        body.append(f"y = copy({x});")
        cases.append(Case("rms_norm", variant, chain, "\n".join(body),
                          (("x", ("1", "S", str(HIDDEN))),), weights))
    return cases


# ---------------------------------------------------------------- attention (GQA, causal, with a KV cache)

ATTN_INPUTS = (("q", ("1", str(HEADS), "S", str(HEAD_DIM))),
               ("k_cache", ("1", str(KV_HEADS), "P", str(HEAD_DIM))),
               ("v_cache", ("1", str(KV_HEADS), "P", str(HEAD_DIM))),
               ("k_new", ("1", str(KV_HEADS), "S", str(HEAD_DIM))),
               ("v_new", ("1", str(KV_HEADS), "S", str(HEAD_DIM))))
KV_CONCAT = ["k = concat([k_cache, k_new], axis = 2);", "v = concat([v_cache, v_new], axis = 2);"]
# additive causal bias [1, 1, S, P+S]: query row i (absolute position P+i) sees keys 0..P+i
CAUSAL_BIAS = ["ones = tile([[1.0]], repeats = [S, P + S]);",
               "keep = tract_core_cast(tract_core_trilu(ones, k = P, upper = false), to = 'bool');",
               "bias = unsqueeze(select(keep, 0.0, -1e9), axes = [0, 1]);"]


def attention_cases(chain: int) -> list[Case]:
    group = HEADS // KV_HEADS
    scale = 1.0 / HEAD_DIM ** 0.5
    grouped = KV_CONCAT + CAUSAL_BIAS + ["k5 = unsqueeze(k, axes = [2]);", "v5 = unsqueeze(v, axes = [2]);",
                                         "bias5 = unsqueeze(bias, axes = [2]);"]
    repeated = KV_CONCAT + CAUSAL_BIAS + [
        f"kr = reshape(tile(unsqueeze(k, axes = [2]), repeats = [1, 1, {group}, 1, 1]), "
        f"shape = [1, {HEADS}, P + S, {HEAD_DIM}]);",
        f"vr = reshape(tile(unsqueeze(v, axes = [2]), repeats = [1, 1, {group}, 1, 1]), "
        f"shape = [1, {HEADS}, P + S, {HEAD_DIM}]);"]
    dedicated = list(KV_CONCAT)
    masked = KV_CONCAT + CAUSAL_BIAS
    x = "q"
    for i in range(chain):
        # grouped: q [1,12,S,64] -> [1,4,3,S,64]; K/V broadcast over the group axis, no copy of the cache
        grouped += [f"q5_{i} = reshape({x}, shape = [1, {KV_HEADS}, {group}, S, {HEAD_DIM}]);",
                    f"s{i} = matmul(q5_{i}, k5, transposeB = true);",
                    f"p{i} = softmax(add(mul(s{i}, {scale}), bias5), axes = [4]);",
                    f"o5_{i} = matmul(p{i}, v5);",
                    f"o{i} = reshape(o5_{i}, shape = [1, {HEADS}, S, {HEAD_DIM}]);"]
        # repeated: HF's repeat_kv (expand + reshape to 12 heads), then plain 4-D attention
        repeated += [f"s{i} = matmul({x}, kr, transposeB = true);",
                     f"p{i} = softmax(add(mul(s{i}, {scale}), bias), axes = [3]);",
                     f"o{i} = matmul(p{i}, vr);"]
        dedicated.append(f"o{i} = tract_transformers_sdpa({x}, k, v, scale = {scale}, datum_type = 'f32', "
                         f"acc_datum_type = 'f32', is_causal = true);")
        masked.append(f"o{i} = tract_transformers_sdpa({x}, k, v, bias, scale = {scale}, datum_type = 'f32', "
                      f"acc_datum_type = 'f32', is_causal = false);")
        x = f"o{i}"
    out = f"y = copy({x});"
    return [Case("attention", name, chain, "\n".join(lines + [out]), ATTN_INPUTS, {})
            for name, lines in (("standard (grouped 5-D)", grouped), ("standard (repeat_kv)", repeated),
                                ("dedicated (is_causal)", dedicated), ("dedicated (mask input)", masked))]


# ---------------------------------------------------------------- rotary embedding

ROPE_INPUTS = (("x", ("1", str(HEADS), "S", str(HEAD_DIM))),
               ("cos", ("1", "1", "S", str(HEAD_DIM))),
               ("sin", ("1", "1", "S", str(HEAD_DIM))))


def rope_cases(chain: int) -> list[Case]:
    half = HEAD_DIM // 2
    standard, dedicated, x = [], [], "x"
    for i in range(chain):
        standard += [f"a{i} = slice({x}, axes = [3], begin = [0], end = [{half}]);",
                     f"b{i} = slice({x}, axes = [3], begin = [{half}], end = [{HEAD_DIM}]);",
                     f"rh{i} = concat([neg(b{i}), a{i}], axis = 3);",
                     f"o{i} = add(mul({x}, cos), mul(rh{i}, sin));"]
        dedicated.append(f"o{i} = tract_transformers_apply_rope({x}, cos, sin);")
        x = f"o{i}"
    out = f"y = copy({x});"
    return [Case("rope", "standard", chain, "\n".join(standard + [out]), ROPE_INPUTS, {}),
            Case("rope", "dedicated", chain, "\n".join(dedicated + [out]), ROPE_INPUTS, {})]


# ---------------------------------------------------------------- folders, inputs, timing


def write_case(case: Case, folder: Path) -> Path:
    folder.mkdir(parents=True)
    externals = [f"{name} = external<scalar>(shape = [{', '.join(shape)}]);" for name, shape in case.inputs]
    names = ", ".join(name for name, _ in case.inputs)
    text = HEADER + f"\ngraph bench({names}) -> (y)\n{{\n" + "\n".join(
        "  " + line for line in externals + case.body.splitlines()) + "\n}\n"
    (folder / "graph.nnef").write_text(text)
    for name, array in case.variables.items():
        nnef_torch.write_tensor(folder / f"{name}.dat", array)
    return folder


def make_inputs(case: Case, s: int, p: int, rng: np.random.Generator) -> list[np.ndarray]:
    if case.family == "rope":  # real cos/sin of positions p..p+s-1
        inv = 1.0 / 10000 ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
        angles = np.outer(np.arange(p, p + s), inv)
        emb = np.concatenate([angles, angles], axis=-1)[None, None].astype(np.float32)
        return [rng.standard_normal((1, HEADS, s, HEAD_DIM)).astype(np.float32), np.cos(emb), np.sin(emb)]
    sizes = {"S": s, "P": p}
    return [rng.standard_normal([sizes[d] if d in sizes else int(d) for d in shape]).astype(np.float32)
            for _, shape in case.inputs]


def numpy_reference(case: Case, inputs: list[np.ndarray]) -> np.ndarray:
    """The chained function in float64 numpy, independent of the NNEF text."""
    x = inputs[0].astype(np.float64)
    if case.family == "rms_norm":
        for i in range(case.chain):
            x = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * case.variables[f"w{i}"]
        return x
    if case.family == "rope":
        cos, sin = inputs[1], inputs[2]
        for _ in range(case.chain):
            x = x * cos + np.concatenate([-x[..., HEAD_DIM // 2:], x[..., :HEAD_DIM // 2]], axis=-1) * sin
        return x
    k = np.repeat(np.concatenate([inputs[1], inputs[3]], axis=2), HEADS // KV_HEADS, axis=1)
    v = np.repeat(np.concatenate([inputs[2], inputs[4]], axis=2), HEADS // KV_HEADS, axis=1)
    s, total = x.shape[2], k.shape[2]
    visible = np.arange(total)[None, :] <= np.arange(total - s, total)[:, None]
    for _ in range(case.chain):
        scores = np.where(visible, x @ k.transpose(0, 1, 3, 2) / HEAD_DIM ** 0.5, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        x = weights / weights.sum(axis=-1, keepdims=True) @ v
    return x


def load(folder: Path, detect: bool = False):
    import tract
    model = tract.nnef().with_tract_transformers().with_tract_extra().load(str(folder))
    if detect:
        model.transform("transformers_detect_all")
    return model.into_runnable()


def run(runnable, inputs: list[np.ndarray]) -> np.ndarray:
    return runnable.run(inputs)[0].to_numpy()


def time_runs(runnable, inputs: list[np.ndarray], reps: int) -> tuple[float, float]:
    for _ in range(3):
        run(runnable, inputs)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run(runnable, inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, min(times) * 1e3


def all_cases(rng: np.random.Generator) -> list[Case]:
    return rms_cases(25, rng) + attention_cases(12) + rope_cases(24)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 repetitions instead of 200")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--families", default="rms_norm,attention,rope")
    args = parser.parse_args(argv)
    reps = args.reps or (20 if args.quick else 200)
    shapes = [(1, 128), (1, 512), (64, 0)]
    rng = np.random.default_rng(0)
    families = args.families.split(",")
    cases = [case for case in all_cases(rng) if case.family in families]
    import tract
    print(f"tract {tract.version()}, {reps} reps per cell; ms per call; ratio = variant / first row of its group")
    print("| op | S | P | chain | variant | median ms | min ms | ratio (median) | ratio (min) | max rel. err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        written = [(case, write_case(case, Path(tmp) / f"case{index}")) for index, case in enumerate(cases)]
        for family in families:
            for s, p in shapes:
                base = None
                for case, folder in (pair for pair in written if pair[0].family == family):
                    variants = [(case.variant, False)]
                    if case.variant.startswith("standard") and family != "rms_norm":
                        variants.append((case.variant + " +detect", True))
                    inputs = make_inputs(case, s, p, np.random.default_rng(s * 1000 + p))
                    reference = numpy_reference(case, inputs)
                    for label, detect in variants:
                        try:
                            runnable = load(folder, detect)
                            out = run(runnable, inputs)
                            if out.shape != inputs[0].shape:  # every case maps its first input's shape to y
                                raise ValueError(f"output shape {out.shape}, expected {inputs[0].shape}")
                            median, best = time_runs(runnable, inputs, reps)
                        except Exception as error:  # noqa: BLE001 - a failing variant is a result, shown in the table
                            print(f"| {family} | {s} | {p} | {case.chain} | {label} | fails: "
                                  f"{str(error).splitlines()[0][:120]} | | | | |")
                            continue
                        base = (median, best) if base is None else base
                        diff = float(np.abs(out - reference).max() / np.abs(reference).max())
                        print(f"| {family} | {s} | {p} | {case.chain} | {label} | {median:.3f} | {best:.3f} | "
                              f"{median / base[0]:.2f} | {best / base[1]:.2f} | {diff:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
