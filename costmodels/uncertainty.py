"""How far to trust a step time: the held-out error of the regime a layout falls in.

A regime is stack x sharding x scale: the software stack (hardware_profiles/stacks), the sharding
class of the layout (ddp: ZeRO 0; zero1-2; zero3; hsdp: ZeRO-3 with a shard group smaller than
dp*cp) and the GPU count (<=64, <=512, >512). benchmarks/accuracy.py measures, on published runs
the fit never saw (benchmarks/splits.py), the relative error of every regime and writes it into
the stack profile (`Stack.held_out`). A regime is validated when at least MIN_ROWS held-out rows
stand behind it and their mean |error| is at most MAX_MEAN_ERROR. Where a regime has no rows, the
band falls back to the stack's other regimes of the same sharding, then to all of the stack's
held-out rows, then to every stack's (`basis` says which), and is never validated.
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


def regime_key(stack: str, lay, num_gpus: int) -> str:
    """'stack/sharding/scale'."""
    return f"{stack}/{sharding_class(lay)}/{scale_class(num_gpus)}"


def validated(err: RegimeError) -> bool:
    """Enough held-out rows and a small enough mean error."""
    return err.rows >= MIN_ROWS and err.mean <= MAX_MEAN_ERROR


def validated_regimes(stack: Stack) -> list[str]:
    """The 'sharding/scale' regimes of `stack.held_out` that validate (fallback keys with ANY, or the
    all-stacks entry, never do)."""
    return sorted(k for k, e in stack.held_out.items() if ANY not in k and "/" in k and validated(e))


def _fallback(stack: Stack, sharding: str) -> tuple[RegimeError | None, str]:
    for key, basis in ((f"{sharding}/{ANY}", "stack and sharding, any scale"), (f"{ANY}/{ANY}", "stack, any regime"),
                       ("all-stacks", "every stack's held-out rows")):
        if key in stack.held_out:
            return stack.held_out[key], basis
    return None, "no held-out rows"


def uncertainty(stack: Stack, lay, num_gpus: int) -> UncertaintyOut:
    """The error band of a layout's step time under `stack` (module docstring)."""
    sharding, scale = sharding_class(lay), scale_class(num_gpus)
    key = regime_key(stack.regime_name, lay, num_gpus)
    err = stack.held_out.get(f"{sharding}/{scale}")
    basis = "regime"
    if err is None or err.rows == 0:
        err, basis = _fallback(stack, sharding)
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
