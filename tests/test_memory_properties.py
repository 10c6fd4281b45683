"""Properties of the per-GPU memory model over random small models and random valid layouts.

Models are GPT-style (LayerNorm, GELU, biases, learned positions, tied, dropout) or Llama-style
(RMSNorm, SwiGLU, GQA, no biases, untied, no dropout), built with tests/helpers.py. Layouts are
drawn valid by construction (powers of two that divide heads, ffn and kv heads), so every draw
resolves; a property that needs a second layout (tp or dp or pp doubled) assumes it is valid.

Sources of the properties: ZeRO (Rajbhandari et al., SC'20) Figure 1 for the sharding order;
Korthikanti et al. MLSys'23 section 4 for activations (recompute and 1F1B first-stage totals);
Narayanan et al. SC'21 section 2.2 for the 1F1B in-flight count min(p - stage, m).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from helpers import cluster, gpt, llama_like
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from costmodels import activations as act
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import StageMemory, act_shape, memory_by_stage
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
POW2 = [1, 2, 4, 8, 16, 32]
FIELDS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes", "transient_bytes")


@dataclass(frozen=True)
class Case:
    """One model with one layout; `gbs` stays fixed when a degree changes."""

    model: ModelSpec
    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp: int = 1
    mbs: int = 1
    gbs: int = 1
    zero: int = 0
    recompute: str = "none"
    sp: bool = False
    vpp: int = 1
    schedule: Optional[str] = None
    flash: bool = True
    stage_layers: Optional[tuple[int, ...]] = None

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def parts(self):
        train = TrainSpec(global_batch_size=self.gbs, flash_attention=self.flash)
        clus = cluster(self.world, per_node=8 if self.world % 8 == 0 else self.world)
        layout = Layout(tp=self.tp, cp=self.cp, pp=self.pp, dp=self.dp, mbs=self.mbs, zero=self.zero,
                        recompute=self.recompute, sp=self.sp, vpp=self.vpp, schedule=self.schedule,
                        stage_layers=list(self.stage_layers) if self.stage_layers else None)
        return self.model, clus, train, layout

    def resolved(self) -> Layout:
        model, clus, train, layout = self.parts()
        return resolve_layout(model, clus, train, layout)

    def memory(self, **changes) -> list[StageMemory]:
        case = replace(self, **changes)
        model, clus, train, _ = case.parts()
        return memory_by_stage(model, clus, train, case.resolved())


def tp_ok(m: ModelSpec, tp: int) -> bool:
    """Megatron's tp rules: heads, ffn divisible; kv heads a multiple or a divisor of tp."""
    kv = m.num_kv_heads
    return m.num_attention_heads % tp == 0 and m.ffn_hidden_size % tp == 0 and (kv % tp == 0 or tp % kv == 0)


@st.composite
def models(draw, style: Optional[str] = None, min_layers: int = 1) -> ModelSpec:
    style = style or draw(st.sampled_from(["gpt", "llama"]))
    layers = draw(st.integers(min_layers, 16))
    vocab = draw(st.integers(32, 5000))
    seq = draw(st.sampled_from([32, 64, 128, 256, 512, 1024]))
    if style == "gpt":
        a = draw(st.sampled_from([1, 2, 4, 8, 16]))
        d = draw(st.sampled_from([8, 16, 32, 64]))
        return gpt(a * d, a, layers, vocab=vocab, seq=seq)
    a = draw(st.sampled_from([2, 4, 8, 16, 32]))
    kv = draw(st.sampled_from([k for k in POW2 if a % k == 0]))
    d = draw(st.sampled_from([16, 32, 64]))
    ffn = 64 * draw(st.integers(1, 48))
    return llama_like(h=a * d, a=a, kv=kv, layers=layers, ffn=ffn, vocab=vocab, seq=seq)


@st.composite
def cases(draw, style: Optional[str] = None, uneven: bool = True, interleave: bool = True,
          min_stage_layers: int = 1, min_shards: int = 1, schedules=(None, "1f1b", "gpipe")) -> Case:
    model = draw(models(style, min_layers=min_stage_layers))
    L = model.num_layers
    tp = draw(st.sampled_from([t for t in POW2[:5] if tp_ok(model, t)]))
    cp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if d * cp >= min_shards]))
    pp = draw(st.sampled_from([p for p in range(1, min(L, 8) + 1)
                               if L // p >= min_stage_layers and (uneven or L % p == 0)]))
    stages: Optional[tuple[int, ...]] = None
    if pp > 1 and (L % pp or (uneven and min_stage_layers == 1 and draw(st.booleans()))):
        cuts = sorted(draw(st.lists(st.integers(1, L - 1), min_size=pp - 1, max_size=pp - 1, unique=True)))
        stages = tuple(b - a for a, b in zip([0, *cuts], [*cuts, L]))
        assume(min(stages) >= min_stage_layers)
    per_stage = list(stages) if stages else [L // pp] * pp
    vpp, schedule = 1, draw(st.sampled_from(list(schedules)))
    if interleave and pp > 1 and draw(st.booleans()):
        vs = [v for v in (2, 3, 4) if all(n % v == 0 for n in per_stage)]
        if vs:
            vpp, schedule = draw(st.sampled_from(vs)), None
    mbs = draw(st.sampled_from([1, 2, 4]))
    m = draw(st.integers(1, 12))
    if vpp > 1:  # Megatron's interleaved schedule needs m divisible by pp
        m = pp * draw(st.integers(1, 3))
    return Case(model=model, tp=tp, cp=cp, pp=pp, dp=dp, mbs=mbs, gbs=mbs * dp * m,
                zero=draw(st.integers(0, 3)), recompute=draw(st.sampled_from(["none", "selective", "full"])),
                sp=draw(st.booleans()), vpp=vpp, schedule=schedule, flash=draw(st.booleans()), stage_layers=stages)


def _each_le(new: list[StageMemory], old: list[StageMemory], field: str = "total_bytes") -> None:
    assert len(new) == len(old)
    for a, b in zip(new, old):
        assert getattr(a, field) <= getattr(b, field), (a, b)


# ---- structure -----------------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_fields_nonnegative_and_total_is_sum(case: Case):
    stages = case.memory()
    assert [s.stage for s in stages] == list(range(case.pp))
    assert sum(s.layers for s in stages) == case.model.num_layers
    for s in stages:
        assert all(getattr(s, f) >= 0 for f in FIELDS), s
        assert all(isinstance(getattr(s, f), int) for f in FIELDS), s
        assert s.total_bytes == sum(getattr(s, f) for f in FIELDS)
        assert s.weights_bytes > 0 and s.activations_bytes > 0


@SETTINGS
@given(cases())
def test_estimate_memory_agrees_with_stages(case: Case):
    result = estimate(*case.parts())
    stages = case.memory()
    mem = result.memory
    assert [s.total_bytes for s in mem.stages] == [s.total_bytes for s in stages]
    for out in mem.stages:
        assert out.total_bytes == sum(getattr(out, f) for f in FIELDS)
    assert mem.peak_bytes == max(s.total_bytes for s in stages)
    assert mem.stages[mem.peak_stage].total_bytes == mem.peak_bytes
    assert result.fits == (mem.peak_bytes <= mem.usable_bytes) == (mem.headroom_bytes >= 0)
    assert mem.floor_bytes <= mem.device_bytes <= mem.unhindered_device_bytes
    assert mem.allocator_pressure == (mem.device_bytes < mem.unhindered_device_bytes)


# ---- monotonicity in the degrees -----------------------------------------------------------------


@SETTINGS
@given(cases())
def test_doubling_tp_never_grows_memory(case: Case):
    """Same dp, cp, pp (the world doubles): every stage holds less or the same."""
    assume(tp_ok(case.model, 2 * case.tp))
    _each_le(case.memory(tp=2 * case.tp), case.memory())


@SETTINGS
@given(cases())
def test_doubling_dp_never_grows_memory(case: Case):
    """Same global batch: fewer micro-batches in flight, states sharded further."""
    assume(case.gbs % (case.mbs * 2 * case.dp) == 0)
    assume(case.vpp == 1 or (case.gbs // (case.mbs * 2 * case.dp)) % case.pp == 0)
    _each_le(case.memory(dp=2 * case.dp), case.memory())


@SETTINGS
@given(cases(style="llama", uneven=False, interleave=False, schedules=("1f1b",)))
def test_doubling_pp_never_grows_peak_without_dropout(case: Case):
    """Llama-style (no dropout masks), 1F1B, same dp: the peak stage never grows.

    (GPipe is left out: going from pp = 1 to 2 it keeps all m micro-batches instead of one. ZeRO-3
    going from pp = 1 to 2 is left out too: with pipelining a stage keeps its weights gathered and its
    gradients unsharded across the step's micro-batches, costmodels.memory.memory_zero.)
    """
    L = case.model.num_layers
    assume(L % (2 * case.pp) == 0)
    assume(case.zero < 3 or case.pp > 1)
    old = max(s.total_bytes for s in case.memory())
    new = max(s.total_bytes for s in case.memory(pp=2 * case.pp, schedule="1f1b"))
    assert new <= old


# ---- ZeRO ----------------------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_zero_0_1_2_never_grows(case: Case):
    z0, z1, z2 = (case.memory(zero=z) for z in (0, 1, 2))
    _each_le(z1, z0)
    _each_le(z2, z1)
    for a, b in zip(z1, z0):  # only the optimizer states move at stage 1
        assert (a.weights_bytes, a.grads_bytes, a.activations_bytes) == (b.weights_bytes, b.grads_bytes,
                                                                         b.activations_bytes)


@SETTINGS
@given(cases(min_stage_layers=4, min_shards=8, uneven=False))
def test_zero3_not_above_zero2_with_enough_shards_and_layers(case: Case):
    """ZeRO-3 adds gathered-layer buffers (two layers' weights + one layer's grads) but shards the
    weights over dp*cp >= 8: with >= 4 layers per stage the saving is larger. Without pipelining only:
    with it a stage keeps its weights gathered across micro-batches (costmodels.memory.memory_zero)."""
    assume(case.pp == 1)
    _each_le(case.memory(zero=3), case.memory(zero=2))


# ---- recompute -----------------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_selective_recompute_never_grows_activations(case: Case):
    _each_le(case.memory(recompute="selective"), case.memory(recompute="none"), "activations_bytes")


@SETTINGS
@given(cases())
def test_full_recompute_not_above_selective_with_two_layers(case: Case):
    """Full recompute keeps layer inputs plus one layer's working set while it recomputes; with at
    least two layers on a stage that is no more than selective recompute keeps (flash attention,
    so the working set holds no s x s scores)."""
    full = case.memory(recompute="full", flash=True)
    selective = case.memory(recompute="selective", flash=True)
    for f, s in zip(full, selective):
        if f.layers >= 2:
            assert f.activations_bytes <= s.activations_bytes, (f, s)


@SETTINGS
@given(cases())
def test_recompute_changes_only_activations(case: Case):
    none, full = case.memory(recompute="none"), case.memory(recompute="full")
    for a, b in zip(none, full):
        assert (a.weights_bytes, a.grads_bytes, a.optimizer_bytes, a.other_bytes) == (
            b.weights_bytes, b.grads_bytes, b.optimizer_bytes, b.other_bytes)


# ---- pipeline schedules --------------------------------------------------------------------------


@SETTINGS
@given(cases(uneven=False, interleave=False, schedules=("1f1b",)), st.integers(0, 8))
def test_1f1b_first_stage_holds_one_microbatch_of_every_layer(case: Case, extra: int):
    """Korthikanti section 4.2.3: with 1F1B and m >= p the first stage holds p micro-batches of L/p
    layers, i.e. one micro-batch's activations of all L layers (plus p embedding dropout masks)."""
    assume(case.pp >= 2)
    m = case.pp + extra
    case = replace(case, gbs=case.mbs * case.dp * m)
    model = case.model
    lay = case.resolved()
    x = act_shape(model, TrainSpec(global_batch_size=case.gbs, flash_attention=case.flash), lay)
    expected = (model.num_layers * act.layer_bytes(model, x, False) + case.pp * act.embedding_bytes(model, x)
                + act.recompute_working_bytes(model, x, False))
    got = case.memory()[0].activations_bytes
    assert abs(got - expected) <= 1 + 1e-12 * expected


@SETTINGS
@given(cases(uneven=False, interleave=False, schedules=("1f1b",)))
def test_1f1b_inflight_decreases_along_the_pipeline(case: Case):
    """Narayanan SC'21 section 2.2: stage i holds min(p - i, m) micro-batches; with equal layers and no
    embedding/head terms (middle stages) activations never grow from one stage to the next."""
    acts = [s.activations_bytes for s in case.memory()]
    middle = acts[1:-1]
    assert all(b <= a for a, b in zip(middle, middle[1:]))
    assert acts[0] >= max(middle, default=0)


@SETTINGS
@given(cases(uneven=False, interleave=False, schedules=("gpipe",)))
def test_gpipe_not_below_1f1b(case: Case):
    """GPipe keeps all m micro-batches in flight; 1F1B at most p."""
    _each_le(case.memory(schedule="1f1b"), case.memory(schedule="gpipe"), "activations_bytes")


@SETTINGS
@given(cases(uneven=False, interleave=True, schedules=("1f1b",)), st.integers(0, 8))
def test_interleaved_first_stage_korthikanti_factor(case: Case, extra: int):
    """Korthikanti section 4.2.3: interleaving with v chunks makes the first stage hold
    L * (1 + (p-1)/(p*v)) layers' activations of one micro-batch (m >= 2p so the warm-up is full)."""
    assume(case.vpp > 1)
    p, v, L = case.pp, case.vpp, case.model.num_layers
    case = replace(case, gbs=case.mbs * case.dp * p * (2 + extra))  # m a multiple of p (Megatron)
    model = case.model
    x = act_shape(model, TrainSpec(global_batch_size=case.gbs, flash_attention=case.flash), case.resolved())
    inflight = p * (1 + (p - 1) / (p * v))
    expected = (inflight * (L / p * act.layer_bytes(model, x, False) + act.embedding_bytes(model, x))
                + act.recompute_working_bytes(model, x, False))
    got = case.memory()[0].activations_bytes
    assert abs(got - expected) <= 1 + 1e-9 * expected
