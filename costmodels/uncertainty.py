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

Dense and MoE models are apart: an MoE model's regime ends in '/moe', and its band comes from MoE rows only
(the 'moe:' entries: its regime, the same generation and sharding at any scale, the same generation, the
stack's MoE rows, every stack's MoE rows), never from a dense regime beside it. MoE step times err in their
own way (routing, dispatch, grouped GEMMs: docs/moe.md), so a dense band of 5% on a DeepSeek-V3 estimate, or
an MoE recipe's -34% in a dense Llama band, told the user nothing true. A held_out table without MoE entries
(a user's stack file) still bands an MoE model from its dense rows, and `basis` says so.
"""

from __future__ import annotations

from costmodels.outputs import MemoryUncertaintyOut, UncertaintyOut
from costmodels.stack import RegimeError, Stack

MIN_ROWS = 5
MAX_MEAN_ERROR = 0.15
SCALES = ((64, "<=64"), (512, "<=512"))
ANY = "*"
MOE = "moe"
MOE_PREFIX = "moe:"  # held_out keys of MoE rows: 'moe:hopper/zero1-2/<=64', 'moe:*/*'; and 'all-stacks:moe'
ALL_MOE = "all-stacks:moe"


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


def band_gpu(gpu) -> str:
    """What names a GPUProfile's band: its tensor-core generation, else its name (gpu_generation maps a preset's
    name to its generation; a user's GPU named my-h100 with tensor_core_gen hopper is banded as hopper, not as a
    regime of its own). Every caller of `uncertainty` (estimate, the search's validated filter) passes this."""
    return gpu.tensor_core_gen or gpu.name


def gpu_generation(gpu_profile: str) -> str:
    """The GPU generation of a profile name (a100-80gb -> ampere, h100-sxm-500w -> hopper), else the name."""
    return next((gen for prefix, gen in GENERATIONS if gpu_profile.startswith(prefix)), gpu_profile)


def regime_key(stack: str, lay, num_gpus: int, gpu: str | None = None, moe: bool = False) -> str:
    """'stack/sharding/scale/generation' ('stack/sharding/scale' when no GPU is given), with '/moe' last for
    an MoE model: the stack first, so that the regime of the JSON contract still starts with the stack and
    its old form is a prefix."""
    tail = (f"/{gpu_generation(gpu)}" if gpu else "") + ("/moe" if moe else "")
    return f"{stack}/{sharding_class(lay)}/{scale_class(num_gpus)}{tail}"


def parse_regime(regime: str) -> tuple[str, str, str, str | None, bool]:
    """(stack, sharding, scale, generation or None, moe) of a regime_key() string."""
    parts = regime.split("/")
    moe = parts[-1] == MOE
    stack, sharding, scale, *gen = parts[:-1] if moe else parts
    return stack, sharding, scale, (gen[0] if gen else None), moe


def validated(err: RegimeError) -> bool:
    """Enough held-out runs (distinct runs: a run predicted again by leave-one-regime-out refits counts once)
    and a small enough mean error."""
    return err.rows >= MIN_ROWS and err.mean <= MAX_MEAN_ERROR


def validated_regimes(stack: Stack) -> list[str]:
    """The regimes of `stack.held_out` that validate ('hopper/zero1-2/<=64', 'moe:hopper/zero1-2/<=64'; fallback
    keys with ANY, the all-stacks entries and the leave-one-regime-out entries never do)."""
    def own(key: str) -> bool:
        bare = key.removeprefix(MOE_PREFIX)
        return ANY not in bare and "/" in bare and ":" not in bare
    return sorted(k for k, e in stack.held_out.items() if own(k) and validated(e))


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


def _moe_band(held: dict, sharding: str, scale: str, gen: str | None) -> tuple[RegimeError | None, str]:
    """The MoE chain of band() (module docstring); (None, "") when the table has no MoE entries."""
    own = [(f"{gen}/{sharding}/{scale}", "regime"),
           (f"{gen}/{sharding}/{ANY}", "MoE rows of the same GPU generation, stack and sharding, any scale"),
           (f"{gen}/{ANY}/{ANY}", "MoE rows of the same GPU generation and stack, any regime")] if gen else \
          [(f"{sharding}/{scale}", "regime"), (f"{sharding}/{ANY}", "MoE rows of the stack and sharding, any scale")]
    chain = [(MOE_PREFIX + k, why) for k, why in own + [(f"{ANY}/{ANY}", "the stack's MoE rows, any regime")]]
    for key, why in chain + [(ALL_MOE, "every stack's MoE held-out rows")]:
        if key in held and held[key].rows:
            return held[key], why
    return None, ""


def band(held: dict, sharding: str, scale: str, gen: str | None = None,
         moe: bool = False) -> tuple[RegimeError | None, str]:
    """(error entry, basis) of a regime in a stack's `held_out` table (module docstring); basis
    "regime" only for the regime's own entry. An MoE model's band comes from MoE entries only, when the
    table has any."""
    if moe:
        err, basis = _moe_band(held, sharding, scale, gen)
        if err is not None:
            return err, basis
        err, basis = band(held, sharding, scale, gen)
        return err, (f"{basis} (dense rows: this table has no MoE held-out rows)" if err is not None else basis)
    own = [k for k in held if "/" in k and not k.startswith(MOE_PREFIX)]
    if not own and "all-stacks" in held:  # a stack with MoE rows only (automodel) bands a dense model
        return held["all-stacks"], "every stack's held-out rows (the stack has no dense held-out rows)"
    legacy = not any(k.count("/") == 2 for k in own)  # a table without generations (a user's stack file)
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


# exposed communication's share of a step beyond the regime's largest by more than this: extrapolated. A choice, not
# a fit: ten points of the step is about the p90 band of the validated regimes, so within it the runs' own spread
# covers what the communication model adds
COMM_REACH = 0.10


def comm_share(time) -> float:
    """Exposed communication's share of a step (a TimeOut): the tensor-, context-, expert-, pipeline- and
    data-parallel seconds no computation hides, over the step."""
    exposed = time.tp_comm_s + time.cp_comm_s + time.ep_comm_s + time.pp_comm_s + time.dp_comm_exposed_s
    return exposed / time.step_s if time.step_s > 0 else 0.0


def extrapolation(err: RegimeError, seq_len: int | None, comm: float | None = None) -> str | None:
    """Why an estimate lies beyond the runs behind `err`, else None: a sequence longer than the longest of them
    (attention's share, context parallelism and activation memory grow with it; a 1M-token plan on a regime of
    2k-8k runs had printed a validated +-3%), or a step whose exposed communication `comm` (comm_share) exceeds
    the largest among them by more than COMM_REACH (an FSDP 70B step on 2 x 200 Gb/s per node, 86% exposed
    data-parallel traffic, printed the validated +-13% of runs on 8 x 400 Gb/s)."""
    why = []
    if seq_len is not None and err.seq_max is not None and seq_len > err.seq_max:
        why.append(f"sequence {seq_len:,} tokens, beyond the longest of these runs ({err.seq_max:,})")
    if comm is not None and err.comm_max is not None and comm > err.comm_max + COMM_REACH:
        why.append(f"exposed communication {comm:.0%} of the step, beyond the largest among these runs "
                   f"({err.comm_max:.0%}): their errors did not test the communication model this far")
    return "; ".join(why) or None


def uncertainty(stack: Stack, lay, num_gpus: int, gpu: str | None = None, moe: bool = False,
                seq_len: int | None = None, comm: float | None = None) -> UncertaintyOut:
    """The error band of a layout's step time under `stack` on GPU profile `gpu`, for a dense or an MoE
    model at `seq_len` tokens whose predicted step leaves `comm` of it to exposed communication (module docstring);
    an estimate beyond its runs (extrapolation) is never validated."""
    sharding, scale = sharding_class(lay), scale_class(num_gpus)
    tables = [k for k in stack.held_out if "/" in k]  # a stack without rows of its own (fsdp) has none: not legacy
    legacy = bool(tables) and not any(k.count("/") == 2 for k in tables)
    key = regime_key(stack.regime_name, lay, num_gpus, None if legacy else gpu, moe)
    gen = gpu_generation(gpu) if gpu and not legacy else None
    err, basis = band(stack.held_out, sharding, scale, gen, moe)
    if err is None:
        return UncertaintyOut(rel_error_p50=None, rel_error_p90=None, bias=None, rows=0, regime=key,
                              validated=False, basis=basis, regime_rows=0)
    beyond = extrapolation(err, seq_len, comm)
    own = _own_rows(stack.held_out, sharding, scale, gen, moe)
    return UncertaintyOut(rel_error_p50=err.p50, rel_error_p90=err.p90, bias=err.bias, rows=err.rows, regime=key,
                          validated=basis == "regime" and validated(err) and beyond is None, basis=basis,
                          mean=err.mean, samples=err.samples, extrapolated=beyond, regime_rows=own)


def _own_rows(held: dict, sharding: str, scale: str, gen: str | None, moe: bool) -> int:
    """Held-out runs of the regime's own entry (0 when it has none): `rows` itself where the band is the regime's,
    said apart where the band is borrowed (a contract pass: `rows` 1,402 read as the regime's)."""
    bare = f"{gen}/{sharding}/{scale}" if gen else f"{sharding}/{scale}"
    entry = held.get(MOE_PREFIX + bare if moe else bare)
    return entry.rows if entry is not None else 0


def memory_uncertainty(stack: Stack, kind: str = "device") -> MemoryUncertaintyOut:
    """The held-out error of `kind` peaks under `stack`, else over every stack; `fits` is decided on
    device bytes, so that is the default kind."""
    held = stack.memory.held_out
    err = held.get(kind) or held.get(f"all-stacks:{kind}")
    if err is None:
        return MemoryUncertaintyOut(kind=kind, rows=0, mean=None, p90=None, bias=None)
    return MemoryUncertaintyOut(kind=kind, rows=err.rows, mean=err.mean, p90=err.p90, bias=err.bias)
