"""How far to trust a step time: the held-out error of the regime a layout falls in.

A regime is stack x sharding x scale x GPU generation: the GPU generation (GENERATIONS: ampere,
hopper, blackwell, ...; an A100 estimate no longer borrows H100 bands), the software stack (hardware_profiles/stacks), the sharding
class of the layout (ddp: ZeRO 0; zero1-2; zero3; hsdp: ZeRO-3 with a shard group smaller than
dp*cp) and the GPU count (<=64, <=512, >512). benchmarks/accuracy.py measures, on published runs
the fit never saw (benchmarks/splits.py), the relative error of every regime and writes it into
the stack profile (`Stack.held_out`). A regime is validated when at least MIN_ROWS held-out rows
stand behind it and their mean |error| is at most MAX_MEAN_ERROR. Where a regime has no rows, the
band falls back to the stack's other regimes of the same sharding, then to all of the stack's
held-out rows, then to every stack's (`basis` says which), and is never validated. A GPU
generation the stack has no validation rows on takes the band that leaving a whole GPU generation
out of the fit earned (`loro:gpu-generation`, benchmarks/loro.py): the error of its nearest
held-out regime, said in `basis`. Without a GPU (old callers), or for a held_out table written
without generations (a user's stack file), the generation-free 'sharding/scale' keys are used.
"""

from __future__ import annotations

from costmodels.outputs import MemoryUncertaintyOut, UncertaintyOut
from costmodels.stack import RegimeError, Stack

MIN_ROWS = 5
MAX_MEAN_ERROR = 0.15
SCALES = ((64, "<=64"), (512, "<=512"))
ANY = "*"


def scale_class(num_gpus: int) -> str:
    """<=64, <=512 or >512 GPUs."""
    return next((name for limit, name in SCALES if num_gpus <= limit), ">512")


def sharding_class(lay) -> str:
    """ddp (ZeRO 0), zero1-2, zero3, or hsdp (ZeRO-3 sharded inside a group, replicated across)."""
    if lay.zero == 0:
        return "ddp"
    if lay.zero < 3:
        return "zero1-2"
    return "hsdp" if lay.replicas > 1 else "zero3"


GENERATIONS = (("a100", "ampere"), ("h100", "hopper"), ("h200", "hopper"), ("h800", "hopper"), ("b200", "blackwell"),
               ("gb200", "blackwell"), ("v100", "volta"), ("mi300", "cdna3"))
LORO_GPU = "loro:gpu-generation"


def gpu_generation(gpu_profile: str) -> str:
    """The GPU generation of a profile name (a100-80gb -> ampere, h100-sxm-500w -> hopper), else the name."""
    return next((gen for prefix, gen in GENERATIONS if gpu_profile.startswith(prefix)), gpu_profile)


def regime_key(stack: str, lay, num_gpus: int, gpu: str | None = None) -> str:
    """'stack/sharding/scale/generation' ('stack/sharding/scale' when no GPU is given): the stack first,
    so that the regime of the JSON contract still starts with the stack and its old form is a prefix."""
    tail = f"/{gpu_generation(gpu)}" if gpu else ""
    return f"{stack}/{sharding_class(lay)}/{scale_class(num_gpus)}{tail}"


def validated(err: RegimeError) -> bool:
    """Enough held-out rows and a small enough mean error."""
    return err.rows >= MIN_ROWS and err.mean <= MAX_MEAN_ERROR


def validated_regimes(stack: Stack) -> list[str]:
    """The 'sharding/scale' regimes of `stack.held_out` that validate (fallback keys with ANY, or the
    all-stacks entry, never do)."""
    return sorted(k for k, e in stack.held_out.items() if ANY not in k and "/" in k and ":" not in k and validated(e))


def _generation_band(held: dict, gen: str, sharding: str, scale: str) -> tuple[RegimeError | None, str]:
    for key, basis in ((f"{gen}/{sharding}/{scale}", "regime"),
                       (f"{gen}/{sharding}/{ANY}", "same GPU generation, stack and sharding, any scale")):
        if key in held and held[key].rows:
            return held[key], basis
    if f"{gen}/{ANY}/{ANY}" not in held and LORO_GPU in held:
        return held[LORO_GPU], ("nearest held-out regime: a whole GPU generation left out of the fit "
                                "(leave-one-regime-out, benchmarks/loro.py)")
    if f"{gen}/{ANY}/{ANY}" in held:
        return held[f"{gen}/{ANY}/{ANY}"], "same GPU generation and stack, any regime"
    return None, ""


def band(held: dict, sharding: str, scale: str, gen: str | None = None) -> tuple[RegimeError | None, str]:
    """(error entry, basis) of a regime in a stack's `held_out` table (module docstring); basis
    "regime" only for the regime's own entry."""
    legacy = not any(k.count("/") == 2 for k in held)  # a table without generations (a user's stack file)
    err, basis = _generation_band(held, gen, sharding, scale) if gen and not legacy else (None, "")
    if err is None and (not gen or legacy):
        err, basis = held.get(f"{sharding}/{scale}"), "regime"
    if err is None or err.rows == 0:
        for key, why in ((f"{sharding}/{ANY}", "stack and sharding, any scale"), (f"{ANY}/{ANY}", "stack, any regime"),
                         ("all-stacks", "every stack's held-out rows")):
            if key in held:
                return held[key], why
        return None, "no held-out rows"
    return err, basis


def uncertainty(stack: Stack, lay, num_gpus: int, gpu: str | None = None) -> UncertaintyOut:
    """The error band of a layout's step time under `stack` on GPU profile `gpu` (module docstring)."""
    sharding, scale = sharding_class(lay), scale_class(num_gpus)
    legacy = not any(k.count("/") == 2 for k in stack.held_out)
    key = regime_key(stack.regime_name, lay, num_gpus, None if legacy else gpu)
    err, basis = band(stack.held_out, sharding, scale, gpu_generation(gpu) if gpu else None)
    if err is None:
        return UncertaintyOut(rel_error_p50=None, rel_error_p90=None, bias=None, rows=0, regime=key,
                              validated=False, basis=basis)
    return UncertaintyOut(rel_error_p50=err.p50, rel_error_p90=err.p90, bias=err.bias, rows=err.rows, regime=key,
                          validated=basis == "regime" and validated(err), basis=basis, mean=err.mean)


def memory_uncertainty(stack: Stack, kind: str = "device") -> MemoryUncertaintyOut:
    """The held-out error of `kind` peaks under `stack`, else over every stack; `fits` is decided on
    device bytes, so that is the default kind."""
    held = stack.memory.held_out
    err = held.get(kind) or held.get(f"all-stacks:{kind}")
    if err is None:
        return MemoryUncertaintyOut(kind=kind, rows=0, mean=None, p90=None, bias=None)
    return MemoryUncertaintyOut(kind=kind, rows=err.rows, mean=err.mean, p90=err.p90, bias=err.bias)
