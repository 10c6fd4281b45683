"""Step-time predictions with swappable GPU and stack profiles, for calibration and accuracy.

`Profiles` holds every shipped GPU profile and stack by name; a `Param` names one fitted field
(nested stack fields as "fp8.tensorwise"), and setting it also sets the profiles tied to it
(TIED_GPUS / TIED_STACKS: the same die, the same stack family).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_data import Case  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels.layout import resolve_layout  # noqa: E402
from costmodels.step import step_time  # noqa: E402
from costmodels.timing import layer_time, make_context  # noqa: E402

TIED_GPUS = {"h100-sxm": ["h100-sxm-500w", "h200", "h800"], "a100-80gb": ["a100-40gb"]}
TIED_STACKS = {"megatron-core": ["nemo"], "torchtitan-eager": ["torchtitan"]}


@dataclass(frozen=True)
class Param:
    """One free parameter: a field of a GPU profile's efficiency block or of a stack."""

    kind: str  # "gpu" | "stack"
    profile: str
    field: str  # "fp8.tensorwise" for nested fields
    start: float
    lo: float
    hi: float


class Profiles:
    """Current GPU profiles and stacks, by name, with parameters applied to tied profiles too."""

    def __init__(self):
        self.gpus = {n: hp.load_gpu(n) for n in hp.list_gpus()}
        self.stacks = {n: hp.load_stack(n) for n in hp.list_stacks()}

    def set(self, p: Param, value: float) -> None:
        ties = (TIED_GPUS if p.kind == "gpu" else TIED_STACKS).get(p.profile, [])
        for name in [p.profile, *ties]:
            if p.kind == "gpu":
                g = self.gpus[name]
                self.gpus[name] = g.model_copy(update={"efficiency": g.efficiency.model_copy(update={p.field: value})})
            else:
                self.stacks[name] = _set_stack_field(self.stacks[name], p.field, value)

    def get(self, p: Param) -> float:
        if p.kind == "gpu":
            return getattr(self.gpus[p.profile].efficiency, p.field)
        obj = self.stacks[p.profile]
        for part in p.field.split("."):
            obj = getattr(obj, part)
        return float(obj if obj is not None else p.start)


def _set_stack_field(stack, field: str, value: float):
    if "." in field:
        outer, inner = field.split(".")
        return stack.model_copy(update={outer: getattr(stack, outer).model_copy(update={inner: value})})
    return stack.model_copy(update={field: value})


def prepared(cases):
    """(case, resolved layout) pairs: layouts are resolved once, efficiencies vary."""
    return [(c, resolve_layout(c.model, c.cluster, c.train, c.layout)) for c in cases]


def with_profiles(case: Case, prof: Profiles | None) -> tuple:
    """(cluster, train) of a case with the current profiles swapped in."""
    if prof is None:
        return case.cluster, case.train
    gpu = prof.gpus.get(case.cluster.gpu_profile.name, case.cluster.gpu_profile)
    stack = case.train.stack_spec
    return (case.cluster.model_copy(update={"gpu": gpu}),
            case.train.model_copy(update={"stack": prof.stacks.get(stack.name, stack)}))


def predict_s(case: Case, lay, prof: Profiles | None = None) -> float:
    """Predicted step time of a case (the shipped profiles when `prof` is None)."""
    return predict_time(case, lay, prof).step_s


def predict_time(case: Case, lay, prof: Profiles | None = None):
    """The predicted step and its parts (a costmodels.outputs.TimeOut), as predict_s."""
    cluster, train = with_profiles(case, prof)
    return step_time(make_context(case.model, cluster, train, lay))


def layer_s(row, prof: Profiles | None = None) -> float:
    """Predicted forward + backward time of one layer (Korthikanti Table 4 row)."""
    name, model, cluster, train, layout, measured = row
    case = Case("korthikanti-table4", name, model, cluster, train, layout, measured)
    cl, tr = with_profiles(case, prof)
    lay = resolve_layout(model, cl, tr, layout)
    return layer_time(make_context(model, cl, tr, lay), moe=False).total_s


def mean_abs_err(pairs) -> float:
    """Mean |predicted/measured - 1|."""
    return float(np.mean([abs(p / m - 1) for p, m in pairs]))
