"""Fit the GPU profiles' compute efficiencies and the software stacks' parameters to published runs.

    python benchmarks/calibrate.py            # fit and print; --write updates the profiles

The split is declared by source (benchmarks/splits.py; the held-out rows are reported by
benchmarks/accuracy.py and never enter an objective). Three stages, each on its own rows:
1. a100-80gb GEMM curve and HBM fraction + stack megatron-2021 host/step overheads: vTrain
   blocks h1024x12, h2048x16 (single node) and h3072x30, h8192x48 (multi-node), every other row of each, and Korthikanti Table 4 (per layer).
2. h100-sxm GEMM curve, from the kernel prior (benchmarks/kernel_prior.py): Megatron-Core H100 weak-scaling
   rows MG-001, 003, 005, 007, 009 (host overheads and element-wise fusion carried from stage 1: the same
   Megatron code; overlap slowdown set, MEGATRON_CORE_OVERLAP_SLOWDOWN; attention the prior's, not fitted).
3. stacks torchtitan(-eager), from measured starting values: GEMM scale, overlap slowdown, element-wise
   fusion (eager and torch.compile), FP8 half size: the torchtitan rows of the Dec 2024 H100 benchmark
   and of docs/performance.md (A100, 405B), as measured/README.md suggests. SDPA attention
   (TORCHTITAN_SDPA_ATTN_SCALE) and the FP8 GEMM fraction (FP8_TENSORWISE) are measured, not fitted.
Collective parameters (scale_up, scale_out, launch, half sizes, NVLS) come from
benchmarks/calibrate_nccl.py on nccl-tests data and are not refitted here. Profiles without data
copy a sibling's numbers and say so (COPIES). Objective: mean |relative error| of step time, each
data set weighted equally; Nelder-Mead on log-parameters (scipy), several starts.
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import splits  # noqa: E402
from benchmarks.stack_yaml import read_profile, write_profile  # noqa: E402
from kernel_prior import kernel_prior  # noqa: E402

from costmodels.kernels import GENERATIONS  # noqa: E402
from costmodels.stack_fitted import Fitted  # noqa: E402
from planner.calibration.fitter import multi_start  # noqa: E402
from predict import TIED_GPUS, Param, Profiles, layer_s, mean_abs_err, predict_s, prepared  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1] / "hardware_profiles"
COPIES = {  # profile without its own data -> (source profile, note)
    ("gpu", "b200"): ("h100-sxm", "NOT FITTED: no public B200 step time in the fitting split; h100-sxm's fractions, "
                      "scaled by the generations' kernel ceilings (curve_gen)"),
    ("gpu", "mi300x"): ("h100-sxm", "NOT FITTED: no public measurement; h100-sxm's fractions, scaled by the "
                        "generations' kernel ceilings (curve_gen)"),
    ("gpu", "v100-sxm3-32gb"): ("a100-80gb", "NOT FITTED: a100-80gb's fractions, scaled by the generations' kernel "
                                "ceilings (curve_gen) (V100 rows are relative only)"),
    ("gpu", "b300"): ("b200", "NOT FITTED: no public B300 step time; b200's fractions (themselves h100-sxm's step-time "
                      "fit); kernel caps from the blackwell-ultra generation (costmodels.kernels)"),
    ("gpu", "gb200"): ("b200", "NOT FITTED: no public GB200 step time; b200's fractions (themselves h100-sxm's "
                       "step-time fit); kernel caps from the blackwell generation (costmodels.kernels)"),
    ("gpu", "mi355x"): ("mi300x", "NOT FITTED: no public MI355X step time; mi300x's fractions (themselves "
                        "h100-sxm's); kernel caps from the cdna4 generation (costmodels.kernels)"),
    ("stack", "fsdp"): ("torchtitan-eager", "NOT FITTED: torchtitan-eager's numbers (same FSDP units, eager)"),
    ("stack", "automodel"): ("torchtitan-eager", "NOT FITTED: torchtitan-eager's numbers (FSDP2 units, no "
                             "torch.compile: nemo_automodel BackendConfig) but megatron-core's GEMM and attention "
                             "scales (TE Linear and TE DotProductAttention, BackendConfig's defaults on GPU: the "
                             "kernels the h100-sxm curve is fitted with); its held-out MoE rows (automodel-moe) "
                             "measure it"),
}
KERNELS_FROM = {"automodel": "megatron-core"}  # stack -> stack whose GEMM and attention kernels it runs
KERNEL_FIELDS = ("gemm_scale", "attn_scale")
STACK_FIELDS = list(Fitted.model_fields)  # every fitted number of a stack (costmodels/stack_fitted.py)


def ratio_err(pairs, prof: Profiles) -> float:
    """Mean |predicted t_a/t_b over measured t_a/t_b - 1| of (case a, layout a, case b, layout b, ratio)."""
    return mean_abs_err([(predict_s(a, la, prof) / predict_s(b, lb, prof), r) for a, la, b, lb, r in pairs])


def objective_factory(params: list[Param], prof: Profiles, sets, layers, ratios=()):
    def objective(logx):
        for p, v in zip(params, logx):
            prof.set(p, _clip(p, math.exp(v)))
        errs = [mean_abs_err([(predict_s(c, lay, prof), c.measured_s) for c, lay in s]) for s in sets if s]
        if layers:
            errs.append(mean_abs_err([(layer_s(r, prof), r[-1]) for r in layers]))
        if ratios:
            errs.append(ratio_err(ratios, prof))
        return float(np.mean(errs))

    return objective


def _clip(p: Param, value: float) -> float:
    return min(max(value, p.lo), p.hi)


def fit(params: list[Param], prof: Profiles, sets, layers=(), starts: int = 3, ratios=(), maxiter_per_param: int = 300) -> float:
    """Nelder-Mead on log-parameters from a few starting points (planner.calibration.fitter.multi_start,
    the fitter `parplan calibrate` uses, here with scipy's simplex); leaves the best values in `prof`."""
    from scipy.optimize import minimize

    def scipy_nm(f, x0, n):
        return minimize(f, x0, method="Nelder-Mead", options={"maxiter": maxiter_per_param * n, "xatol": 1e-3, "fatol": 1e-5})

    def report(i, res):
        print(f"  start {i}: objective {res.fun:.4f} after {res.nfev} evaluations", file=sys.stderr)

    objective = objective_factory(params, prof, sets, list(layers), list(ratios))
    best = multi_start(objective, np.log([p.start for p in params]), starts, scipy_nm, report)
    objective(best.x)
    return float(best.fun)


def _at_bound(params: list[Param], prof: Profiles) -> list[str]:
    return [f"{p.profile}.{p.field}" for p in params if min(abs(prof.get(p) / p.lo - 1), abs(prof.get(p) / p.hi - 1)) < 1e-3]


# torchtitan runs attention through PyTorch SDPA, whose flash backend is FlashAttention-2 (kernels.py,
# one_attention_kernel), while Transformer Engine runs cuDNN's SM90 kernels. Measured on our H100 (torch 2.11,
# one Llama 3 8B layer's attention at 8k tokens, benchmarks/data/measured/gpu_layer_h100.csv): forward + backward
# 3.832 ms with cuDNN, 6.732 ms with flash: 0.57. The FA3 paper's forward table (Shah et al. 2024, H100, head
# dim 128, FA2 / cuDNN: causal 319/518, 333/529, 335/539 TFLOP/s at 4k-16k keys) gives 0.60-0.63 for the forward
# alone. On Ampere every stack runs FA2, so the scale does not apply there.
TORCHTITAN_SDPA_ATTN_SCALE = 0.57
# The FP8 GEMM fraction of per-tensor scaling (cuBLAS torch._scaled_mm, TE current/delayed scaling): the best
# achievable matmul of each dtype on H100 (kernels.json MAMF: fp8 1,402.6 of 1,979, bf16 794.5 of 989 TFLOP/s),
# FP8's ceiling over bf16's: 0.709 / 0.803 = 0.883 of twice the bf16 rate. The casts and amax reductions
# around the GEMMs are priced apart (costmodels.compute FP8 casts), so the fraction is the GEMMs' alone;
# fitted on the torchtitan rows it took those rows' unexplained time and moved every stack's FP8 price.
FP8_TENSORWISE = GENERATIONS["hopper"].fp8_ceiling / GENERATIONS["hopper"].gemm_ceiling
# FP8 GEMMs reach half their rate at this multiple of bf16's half size: 1.0, the kernel model's (costmodels.kernels
# gives FP8 bf16's K ramp; benchmarks/kernel_prior.py's shapes against H100's typical FP8 rates fit 1.00). Fitted on
# the torchtitan rows it went from 1.05 to 1.42 between two readings of two pipelined rows, and every stack's FP8
# price (DeepSeek-V3's recipe +11.5% to +16.0%) moved with it.
FP8_HALF_DIM_SCALE = 1.0
H100_PRIOR = kernel_prior("h100-sxm")  # benchmarks/kernel_prior.py: the kernel model's typical rates as a curve

STAGES = [
    ("A100 + megatron-2021", [
        Param("gpu", "a100-80gb", "gemm_max", 0.85, 0.3, 1.0),
        Param("gpu", "a100-80gb", "gemm_half_dim", 600.0, 1.0, 1e5),
        # physical range 0.8-4: compute.elementwise_bytes already counts Megatron's fused kernels (Apex LayerNorm,
        # bias-dropout-add, bias-GeLU, scale-mask-softmax), so fusion removes no more; below 1 only L2 hits can
        # (BOUND_REASONS). Down to 0.05 the fit took 0.357 and moved the rest into the A100 GEMM curve.
        Param("stack", "megatron-2021", "elementwise_scale", 1.0, 0.8, 4.0),
        Param("stack", "megatron-2021", "layer_overhead_s", 2.5e-3, 1e-6, 0.05),
        # floor 1 ms: chosen (BOUND_REASONS); at 10 us `parplan calibrate` starting from it stalled
        Param("stack", "megatron-2021", "step_overhead_s", 0.01, 1e-3, 5.0)], "a100"),
    ("H100 + megatron-core", [  # starting at (and, with no H100 row, kept at) the curve H100's kernels imply
        Param("gpu", "h100-sxm", "gemm_max", H100_PRIOR["gemm_max"], 0.3, 1.0),
        Param("gpu", "h100-sxm", "gemm_half_dim", H100_PRIOR["gemm_half_dim"], 1.0, 1e5),
        # h100-sxm.attn_max is not fitted: it is the kernel prior (cuDNN / FlashAttention-3 rates of the FA3 paper
        # through costmodels.kernels), set in run_stages; fitted, it took the rows' unexplained time
    ], "megatron-core"),
    ("torchtitan", [
        # starting values (the prior a fold without torchtitan rows keeps) measured or shared, not guessed:
        # GEMMs 1.0 (torch.mm and Transformer Engine call the same cuBLAS); overlap 0.3 (an NCCL-like copy beside a
        # bf16 GEMM slows it 23-56% at 8-32 CTAs, benchmarks/data/measured/gpu_overlap_h100.json, for part of the
        # step); eager element-wise 2.6 (one eager Llama 3 8B layer on our H100: 2.55-2.67x the counted bytes,
        # gpu_layer_h100.csv); compiled element-wise 1.0 (Inductor fuses what Megatron fuses: the counted bytes)
        Param("stack", "torchtitan-eager", "gemm_scale", 1.0, 0.3, 1.2),
        Param("stack", "torchtitan-eager", "overlap_slowdown", 0.3, 1e-3, 1.0),
        # eager element-wise ceiling 3.0: the 2.55-2.67 measured for one eager Llama 3 8B layer (gpu_layer_h100.csv)
        # plus the few kernels a stack fuses less; at 4.0 (1.5x the measurement) the fit had a second basin that
        # moved time from the GEMMs into element-wise work (gemm_scale 0.98, element-wise 4.0) and flipped into it
        # under a 1% change of the H100 curve, taking held-out ZeRO-3/FSDP rows from 7.7% to 9.5%
        Param("stack", "torchtitan-eager", "elementwise_scale", 2.6, 0.05, 3.0),
        Param("stack", "torchtitan", "elementwise_scale", 1.0, 0.05, 4.0),
        # torchtitan-eager.attn_scale is not fitted: TORCHTITAN_SDPA_ATTN_SCALE, set in run_stages
        # a100-80gb.attn_max is not fitted: it stays at 0.4, the floor of FlashAttention-2's published A100 range
        # (Dao 2023: 50-73% forward; 0.4 leaves room for the slower backward), where every fit of it ended
        # torchtitan-eager.fp8.tensorwise and fp8.half_dim_scale are not fitted: FP8_TENSORWISE and
        # FP8_HALF_DIM_SCALE, set in run_stages
    ], "torchtitan"),
    # rowwise scaling applies its scales in the GEMM's epilogue: no faster than per-tensor scaling's GEMMs
    ("FP8 rowwise", [Param("stack", "torchtitan-eager", "fp8.rowwise", 0.5, 0.1, FP8_TENSORWISE),
                     Param("stack", "torchtitan-eager", "fp8.rowwise_half_dim_scale", 2.0, 0.2, 50.0)], "fp8-rowwise"),
    ("DeepSpeed ZeRO-3", [
        # physical range: NCCL per-call floor 10-35 us (nccl_busbw.md section 1) plus DeepSpeed's fetch bookkeeping;
        # 100 us is the ceiling (costmodels.stack.ZERO3_CALL_OVERHEAD_MAX_S): above it a mechanism is missing
        Param("stack", "deepspeed", "zero3_call_overhead_s", 3e-5, 5e-6, 1e-4)], "deepspeed-ratios"),
    # deepspeed.overlap_slowdown is not fitted: the stack runs ZeRO-3 with zero3_prefetch 0 (nothing hides,
    # which the same-bandwidth ratios ZPP-001/009 and 017/025 match within 1%), so the rows cannot see it
]


BOUND_REASONS = {  # why a fitted value may sit at its bound: the bounds are published physical limits
    "h100-sxm.gemm_max": "at its ceiling 1.0, the curve's asymptote, which no GEMM reaches: with the fitted half "
                         "size (~3,000) a GEMM of harmonic size 8192 runs at 0.73 of peak and one of 16384 at 0.84, "
                         "the kernel model's typical rates (benchmarks/kernel_prior.py); the kernel bound caps it "
                         "at the MAMF ceiling 0.803, x 0.93 on a 700 W part (the clock it holds at its limit: "
                         "costmodels.kernels, Generation.sustained)",
    "megatron-2021.elementwise_scale": "at its floor 0.8: costmodels.compute.elementwise_bytes already counts the "
                                       "kernels Megatron fuses (Apex LayerNorm, bias-dropout-add, bias-GeLU, "
                                       "scale-mask-softmax), so no fusion is left to remove bytes; 20% is left for L2 "
                                       "hits (40 MB on A100) on the small vTrain tensors. Unbounded, the fit took 0.357 "
                                       "and ran the A100 GEMMs slower instead, which the H100 rows (twice the FLOPs per "
                                       "HBM byte) could not carry: held-out ZeRO-3/FSDP rows 10.9% -> 8.3% with the floor",
    "megatron-2021.step_overhead_s": "at its floor 1 ms, a chosen lower limit, not a measurement, for the host work "
                                     "of a Megatron step outside its layers (zeroing the gradient buffer, the fp16 "
                                     "found-inf all-reduce, timers): the vTrain and Korthikanti rows cannot tell it "
                                     "from the per-layer cost and want less",
    "torchtitan-eager.fp8.rowwise": "at its ceiling, the per-tensor fraction FP8_TENSORWISE (0.883, the MAMF ratio): "
                                    "rowwise scales cost no GEMM speed over per-tensor ones here; its half size "
                                    "carries the rowwise slowdown",
    "torchtitan-eager.elementwise_scale": "at its ceiling 3.0, above the 2.55-2.67 measured for one eager Llama 3 8B "
                                          "layer on our 700 W H100 (benchmarks/data/measured/gpu_layer_h100.csv): the "
                                          "torchtitan H100 rows, on 500 W HBM2e parts, want more time than their "
                                          "element-wise traffic can carry, so a mechanism of those runs is missing "
                                          "(their power limit's clocks; ring attention at cp >= 4, whose rows run "
                                          "~1.5x slower per attention FLOP than cp <= 2: docs/kernels.md)",
    "deepspeed.zero3_call_overhead_s": "at its ceiling 100 us, the physical per-call range (NCCL launch 10-35 us, "
                                       "nccl_busbw.md section 1): the ZeRO++ rows want the 4-link (400 Gb/s) network "
                                       "to move ZeRO-3 traffic only ~2x faster than the 1-link one, not 4x (with "
                                       "the 4-link rate halved the ratio error is 0.042); that network mechanism "
                                       "is missing, and a per-call cost must not stand in for it",
}


def bound_notes(params: list[Param], prof: Profiles) -> list[tuple[str, str]]:
    """(parameter, reason) for the parameters of a stage that sit at a bound."""
    return [(n, BOUND_REASONS.get(n, "(no reason recorded: investigate)")) for n in _at_bound(params, prof)]


def notes_for(profile: str, results: dict) -> str:
    """' At a bound: ...' sentences for the parameters of one profile."""
    pairs = [pair for _, _, found in results.values() for pair in found]
    return "".join(f"; at a bound: {n} {why}" for n, why in pairs if n.startswith(profile + "."))


CARRIED = {"megatron-core": "megatron-core", "torchtitan": "torchtitan-eager", "deepspeed-ratios": "deepspeed"}
CARRIED_FIELDS = ("layer_overhead_s", "step_overhead_s", "elementwise_scale")
# The deepspeed stack prices Hugging Face models in eager PyTorch (its memory semantics: the eager LlamaRMSNorm's
# fp32 copy, the unfused SwiGLU): its element-wise kernels are eager PyTorch's unfused ones, fitted on
# torchtitan-eager (stage 3; 2.55-2.67x the counted bytes measured on one eager Llama 3 8B layer), not Megatron's
# fused ones. Carried from Megatron they priced DeepSpeed ZeRO-3 with an HF model faster than compiled torchtitan on
# the same layout (42% against 41% MFU, Llama 3 8B on 8 H100; a new-user pass). GEMMs (the same cuBLAS) and
# attention (FlashAttention-2 through flash_attn or SDPA) keep the GPU's own curves. Its ratio rows (ZeRO++ on
# Megatron-DeepSpeed's GPT) are ratios of runs with the same kernels, which this hardly moves.
EAGER_KERNELS = {"deepspeed-ratios": ("deepspeed", "torchtitan-eager", ("elementwise_scale",))}
# Megatron-Core's TP overlap (TransformerEngine userbuffers) runs its collectives on a few reserved SMs
# (ub_cfgs num_sm, up to 16 of 132 on H100): about a 10% slowdown of the overlapped GEMMs. The fitting
# rows cannot identify it (none compares overlap on/off), so it is set, not fitted.
MEGATRON_CORE_OVERLAP_SLOWDOWN = 0.1


def run_stages(prof: Profiles, keep=None, refit=None, starts: int = 3,
               maxiter_per_param: int = 300) -> dict[str, tuple[float, list[str]]]:
    """Fit every stage in order; {stage: (objective, parameters at a bound)}. The subset-fitting entry
    point of leave-one-regime-out cross-validation (benchmarks/loro.py): `keep(case)` drops fitting rows,
    `refit(split, cases)` says whether a stage is refitted (else it keeps `prof`'s values), and a stage
    left with no rows keeps its parameters' starting values (the prior, never the shipped fit)."""
    out = {}
    for name, params, split in STAGES:
        if refit is not None and not refit(split):
            continue
        print(f"fitting {name}", file=sys.stderr)
        if split in CARRIED:
            for field in CARRIED_FIELDS:  # host code and fused kernels carried from Megatron of stage 1
                prof.set(Param("stack", CARRIED[split], field, 0, 0, 60), getattr(prof.stacks["megatron-2021"], field))
        if split in EAGER_KERNELS:
            stack, source, fields = EAGER_KERNELS[split]
            for field in fields:
                prof.set(Param("stack", stack, field, 0, 0, 60), getattr(prof.stacks[source], field))
        if split == "megatron-core":
            prof.set(Param("stack", "megatron-core", "overlap_slowdown", 0, 0, 1), MEGATRON_CORE_OVERLAP_SLOWDOWN)
            prof.set(Param("gpu", "h100-sxm", "attn_max", 0, 0, 1), H100_PRIOR["attn_max"])
        if split == "torchtitan":
            prof.set(Param("stack", "torchtitan-eager", "attn_scale", 0, 0, 2), TORCHTITAN_SDPA_ATTN_SCALE)
            for recipe in ("tensorwise", "mxfp8", "blockwise"):  # the GEMMs of all three run at the FP8 rate
                prof.set(Param("stack", "torchtitan-eager", f"fp8.{recipe}", 0, 0, 2), FP8_TENSORWISE)
            prof.set(Param("stack", "torchtitan-eager", "fp8.half_dim_scale", 0, 0, 20), FP8_HALF_DIM_SCALE)
        sets, layers = splits.fitting_sets(split, keep)
        if keep is not None:
            from reference_data import Case

            layers = [r for r in layers if keep(Case("korthikanti-table4", *r))]
        ratios = [(a, la, b, lb, r) for (a, la), (b, lb), r in splits.ratio_sets(split)]
        ratios = [x for x in ratios if keep is None or (keep(x[0]) and keep(x[2]))]
        if not any(sets) and not layers and not ratios:
            for p in params:
                prof.set(p, p.start)
            out[name] = (float("nan"), [], [])
            continue
        obj = fit(params, prof, [prepared(s) for s in sets], layers, ratios=ratios, starts=starts,
                  maxiter_per_param=maxiter_per_param)
        out[name] = (obj, _at_bound(params, prof), bound_notes(params, prof))
        print(f"  {name}: objective {obj:.4f}; " + ", ".join(f"{p.profile}.{p.field}={prof.get(p):.4g}"
                                                          for p in params), file=sys.stderr)
    return out


def write_gpu(name: str, prof: Profiles, note: str) -> None:
    """Replace the compute fields and the note of hardware_profiles/gpus/NAME.yaml's efficiency block."""
    path = ROOT / "gpus" / f"{name}.yaml"
    text = path.read_text()
    head = text.split("\nefficiency:")[0].rstrip("\n")
    eff = yaml.safe_load(text)["efficiency"]
    new = prof.gpus[name].efficiency
    for key in ("gemm_max", "gemm_half_dim", "hbm", "attn_max", "attn_half_seq", "layer_overhead_s", "step_overhead_s"):
        eff[key] = float(f"{getattr(new, key):.6g}")
    if new.curve_gen is not None and new.curve_gen != prof.gpus[name].tensor_core_gen:
        eff["curve_gen"] = new.curve_gen  # a curve copied from another generation (costmodels.timing.curve_transfer)
    old = eff.get("fitted_on", "")
    nccl = old[old.index("NCCL collectives"):] if "NCCL collectives" in old else ""
    eff["fitted_on"] = note + ("; " + nccl if nccl else "")
    path.write_text(head + "\n" + yaml.safe_dump({"efficiency": eff}, sort_keys=False, width=100))


def write_stack(name: str, prof: Profiles, note: str, rows: list[str], err: float | None) -> None:
    """Write the fitted fields into the profile's `fitted:` section and the note, the fitting rows, the
    error, this script and today's date into its `provenance:` (benchmarks/stack_yaml.py)."""
    path = ROOT / "stacks" / f"{name}.yaml"
    head, data = read_profile(path)
    stack = prof.stacks[name]
    fitted = data.setdefault("fitted", {})
    for key in STACK_FIELDS:
        value = getattr(stack.fitted, key)
        fitted[key] = _rounded(value.model_dump() if hasattr(value, "model_dump") else value)
    data["provenance"] = {**data.get("provenance", {}), "fitted_by": "benchmarks/calibrate.py",
                          "fitted_date": datetime.now(timezone.utc).date().isoformat(), "fitted_on": note,
                          "fit_rows": rows, "fit_error": None if err is None else float(f"{err:.4f}")}
    write_profile(path, head, data)


FP8_FROM = "torchtitan-eager"  # cuBLAS FP8 GEMMs: Transformer Engine per-tensor scaling = torchao tensorwise


def _rounded(v):
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return float(f"{v:.6g}") if isinstance(v, float) else v


def apply_copies(prof: Profiles) -> None:
    """Profiles without data take their source's fitted numbers (COPIES); every stack takes the FP8
    GEMM fractions fitted on torchtitan (the same cuBLAS/CUTLASS kernels)."""
    for name in prof.stacks:
        prof.stacks[name] = prof.stacks[name].model_copy(update={"fp8": prof.stacks[FP8_FROM].fp8})
    for (kind, name), (source, _) in COPIES.items():
        if kind == "gpu":
            src = prof.gpus[source].efficiency
            keep = prof.gpus[name].efficiency
            fields = {k: getattr(src, k) for k in ("gemm_max", "gemm_half_dim", "hbm", "attn_max", "attn_half_seq",
                                                    "layer_overhead_s", "step_overhead_s")}
            fields["curve_gen"] = src.curve_gen or prof.gpus[source].tensor_core_gen  # the curve's own generation
            prof.gpus[name] = prof.gpus[name].model_copy(update={"efficiency": keep.model_copy(update=fields)})
        else:
            src = prof.stacks[source]
            update = {k: getattr(src, k) for k in STACK_FIELDS}
            if name in KERNELS_FROM:
                update.update({k: getattr(prof.stacks[KERNELS_FROM[name]], k) for k in KERNEL_FIELDS})
            prof.stacks[name] = prof.stacks[name].model_copy(update=update)


def write_all(prof: Profiles, results: dict) -> None:
    """Write every fitted and copied profile with the rows behind it."""
    a100_obj, h100_obj, tt_obj, rowwise_obj, ds_obj = (results[name][0] for name, _, _ in STAGES)
    a100_note = (f"fitted by benchmarks/calibrate.py stage 1 on {splits.describe('a100')}; objective {a100_obj:.3f}"
                 + notes_for("a100-80gb", results))
    h100_note = (f"fitted by benchmarks/calibrate.py stage 2 on {splits.describe('megatron-core')}; objective "
                 f"{h100_obj:.3f}" + notes_for("h100-sxm", results))
    write_gpu("a100-80gb", prof, a100_note)
    write_gpu("a100-40gb", prof, "copied from a100-80gb (same die): " + a100_note)
    write_gpu("h100-sxm", prof, "gemm_max, gemm_half_dim " + h100_note + f"; attn_max {H100_PRIOR['attn_max']:.4g} "
              "the kernel prior (benchmarks/kernel_prior.py), not fitted; hbm carried from a100-80gb")
    for name in TIED_GPUS["h100-sxm"]:
        write_gpu(name, prof, "copied from h100-sxm (same compute die): " + h100_note)
    for (kind, name), (_, note) in COPIES.items():
        if kind == "gpu":
            write_gpu(name, prof, note)
    stack_notes = {
        "megatron-2021": (f"layer/step overhead {a100_note}" + notes_for("megatron-2021", results),
                          splits.row_ids("a100"), a100_obj),
        "megatron-core": (f"layer and step overhead and element-wise fusion carried from megatron-2021 (the same "
                          f"Megatron host code; its rows, {h100_note}, fit only the h100-sxm curve); overlap_slowdown "
                          f"{MEGATRON_CORE_OVERLAP_SLOWDOWN} set, not fitted (TE userbuffers' reserved SMs, see "
                          "calibrate.py)" + notes_for("megatron-core", results),
                          splits.row_ids("megatron-core"), h100_obj),
        "torchtitan-eager": (f"fitted by benchmarks/calibrate.py stage 3 on {splits.describe('torchtitan')}; "
                             f"fp8.rowwise (stage 4) on {splits.describe('fp8-rowwise')} (objective "
                             f"{rowwise_obj:.3f}); fp8 tensorwise, mxfp8 and blockwise NOT FITTED: the MAMF "
                             f"fp8/bf16 ratio {FP8_TENSORWISE:.3f}; attn_scale NOT FITTED: SDPA's FA2 over cuDNN "
                             f"measured on H100, {TORCHTITAN_SDPA_ATTN_SCALE}"
                             + notes_for("torchtitan-eager", results),
                             splits.row_ids("torchtitan") + splits.row_ids("fp8-rowwise"), tt_obj),
    }
    stack_notes["nemo"] = ("copied from megatron-core (TP overlap on by default): " + stack_notes["megatron-core"][0],
                           *stack_notes["megatron-core"][1:])
    stack_notes["torchtitan"] = ("element-wise fusion and the rest " + stack_notes["torchtitan-eager"][0],
                                 *stack_notes["torchtitan-eager"][1:])
    stack_notes["deepspeed"] = (
        f"zero3_call_overhead_s fitted by benchmarks/calibrate.py stage 5 on the step-time ratios of "
        f"{splits.describe('deepspeed-ratios')} (objective {ds_obj:.3f}: mean |ratio error|; the cross-bandwidth "
        "pairs want the 4-link network only ~2x the 1-link one, a missing network mechanism); zero3_prefetch 0: "
        "in those rows adding tokens adds its full compute time at either bandwidth (nothing hides); host and "
        "step overheads from megatron-2021, the element-wise scale from torchtitan-eager (Hugging Face models in "
        "eager PyTorch, as the memory semantics say; no DeepSpeed row has an absolute step time)"
        + notes_for("deepspeed", results),
        splits.row_ids("deepspeed-ratios"), ds_obj)
    for name, (note, rows, err) in stack_notes.items():
        write_stack(name, prof, note, rows, err)
    for (kind, name), (_, note) in COPIES.items():
        if kind == "stack":
            write_stack(name, prof, note, [], None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted numbers into the profiles")
    args = parser.parse_args()
    prof = Profiles()
    results = run_stages(prof)
    apply_copies(prof)
    for name, (obj, bound, _) in results.items():
        print(f"{name}: objective {obj:.4f}" + (f"; AT A BOUND: {', '.join(bound)}" if bound else ""))
    if args.write:
        write_all(prof, results)


if __name__ == "__main__":
    main()
