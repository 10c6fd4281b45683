"""ZeRO-Offload / ZeRO-Infinity and the CPU optimizer (costmodels/offload.py): hand-worked memory, host
RAM and time, and two properties: offload never raises GPU memory, and more offload never makes the
step faster at a fixed layout."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import offload
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.files import loading

GIB = 2**30


def _train(stack: str = "deepspeed", **fields) -> TrainSpec:
    return loading.train_from_data({"global_batch_size": 32, "seq_length": 2048, "stack": stack, **fields})


def test_on_gpu_moves_the_offloaded_shares():
    ds = _train(offload_optimizer="cpu", offload_optimizer_fraction=0.5)
    assert offload.on_gpu(200.0, 200.0, 1200.0, 2, ds) == (200.0, 100.0, 600.0)  # ZeRO-2: grad partition too
    assert offload.on_gpu(200.0, 200.0, 1200.0, 1, ds) == (200.0, 200.0, 600.0)  # ZeRO-1 keeps full grads
    mcore = _train("megatron-core", offload_optimizer="cpu", offload_optimizer_fraction=0.5)
    assert offload.on_gpu(200.0, 400.0, 1200.0, 2, mcore) == (200.0, 400.0, 600.0)  # fp32 main grads stay
    z3 = _train(offload_optimizer="cpu", offload_params="cpu")
    assert offload.on_gpu(200.0, 200.0, 1200.0, 3, z3) == (0.0, 0.0, 0.0)
    assert offload.on_gpu(200.0, 200.0, 1200.0, 3, _train()) == (200.0, 200.0, 1200.0)


def test_host_bytes_per_gpu_hand_worked():
    """1e9 owned parameters, bf16 Adam: 12 (master + moments) + 4 (fp32 grad partition) = 16 GB on the
    host; parameter shards add 2 bytes each; NVMe keeps only the swap buffers and the 16-bit copy."""
    assert offload.host_bytes_per_gpu(1e9, _train(offload_optimizer="cpu")) == 16e9
    assert offload.host_bytes_per_gpu(1e9, _train(offload_optimizer="cpu", offload_params="cpu")) == 18e9
    nvme = _train(offload_optimizer="nvme", offload_params="nvme")
    assert offload.host_bytes_per_gpu(1e9, nvme) == 2e9 + 1.6e9 + 1e9
    assert offload.host_bytes_per_gpu(1e9, _train()) == 0.0


def test_offload_time_hand_worked():
    """DGX H100 (PCIe Gen5, 55.2 GB/s per GPU), DeepSpeed ZeRO-2, 1e9 owned parameters, one micro-batch,
    no compute to hide behind: D2H 2e9 / 55.2e9 = 36.2 ms, CPU-Adam 8 ranks x 1e9 x 30 B / 200 GB/s =
    1.2 s, H2D 36.2 ms."""
    cluster = loading.load_cluster("dgx-h100")
    t = offload.offload_time(1e9, cluster, _train(offload_optimizer="cpu"), 2, 1, 0.0, True)
    assert t.d2h_s == pytest.approx(2e9 / 55.2e9)
    assert offload.cpu_step_s(1e9, cluster, _train(offload_optimizer="cpu")) == pytest.approx(1.2)
    assert t.h2d_s == pytest.approx(2e9 / 55.2e9)
    nvme = offload.cpu_step_s(1e9, cluster, _train(offload_optimizer="nvme"))
    assert nvme == pytest.approx(1.2 + 8 * 1e9 * 28 / 25e9)  # + states read and written at 25 GB/s per node
    hidden = offload.offload_time(1e9, cluster, _train(offload_optimizer="cpu"), 2, 1, 1.0, True)
    assert hidden.d2h_s == 0.0 and hidden.total_s == pytest.approx(2e9 / 55.2e9)
    exposed = offload.offload_time(1e9, cluster, _train(offload_optimizer="cpu"), 2, 1, 1.0, False)
    assert exposed.d2h_s == pytest.approx(2e9 / 55.2e9)


def test_default_host_link_by_generation():
    """nvbandwidth on H200 (PCIe Gen5): 55.43 H2D / 55.06 D2H GB/s; A100 Gen4 at the same 88%."""
    assert offload.default_h2d_gb_per_s("h200") == 55.2
    assert offload.default_h2d_gb_per_s("a100-80gb") == 27.7
    assert offload.default_h2d_gb_per_s("gh200") == 359.0


def _problem():
    model = loading.load_model("llama2-7b")
    cluster = loading.load_cluster("dgx-a100", 1)
    return model, cluster


def test_zero3_full_offload_host_memory_is_18_bytes_per_param():
    """ZeRO-3 over 8 GPUs, optimizer and parameters on the CPU, bf16 Adam: the node holds every
    parameter's 12 + 4 + 2 bytes; the GPU keeps no state shard."""
    model, cluster = _problem()
    train = _train(precision="bf16", offload_optimizer="cpu", offload_params="cpu")
    est = estimate(model, cluster, train, Layout(zero=3, mbs=1))
    assert est.memory.host_bytes_per_node == pytest.approx(18 * est.params.total, rel=1e-9)
    stage = est.memory.stages[0]
    assert stage.weights_bytes == stage.grads_bytes == stage.optimizer_bytes == 0
    assert est.memory.host_ram_bytes == 2048 * GIB and est.memory.host_fits


def test_host_ram_too_small_does_not_fit():
    model, cluster = _problem()
    small = cluster.model_copy(update={"host_ram_gib": 64.0})
    train = _train(precision="bf16", offload_optimizer="cpu", offload_params="cpu")
    est = estimate(model, small, train, Layout(zero=3, mbs=1))
    assert not est.memory.host_fits and not est.fits
    assert estimate(model, small, _train(precision="bf16"), Layout(zero=3, mbs=1)).memory.host_fits


def test_offload_time_is_in_the_step():
    model, cluster = _problem()
    base = estimate(model, cluster, _train(precision="bf16"), Layout(zero=2, mbs=1))
    off = estimate(model, cluster, _train(precision="bf16", offload_optimizer="cpu"), Layout(zero=2, mbs=1))
    assert base.time.offload_s == 0.0 and off.time.offload_s > 0.0
    assert off.time.optimizer_s > 10 * base.time.optimizer_s  # CPU-Adam is far slower than the GPU's
    assert off.time.step_s == pytest.approx(base.time.step_s - base.time.optimizer_s + off.time.optimizer_s
                                            + off.time.offload_s)


def test_cluster_presets_carry_host_ram():
    for name in ("dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200"):
        assert hp.load_cluster(name).host_ram_gib == 2048.0


SETTINGS = st.tuples(st.sampled_from(["deepspeed", "megatron-core"]), st.sampled_from([1, 2, 3]),
                     st.sampled_from(["cpu", "nvme"]), st.floats(0, 1), st.floats(0, 1), st.booleans(),
                     st.sampled_from([1, 2, 4]))


@settings(max_examples=30, deadline=None)
@given(SETTINGS)
def test_offload_never_raises_gpu_memory_and_more_is_never_faster(case):
    stack, zero, device, f1, f2, params, mbs = case
    lo, hi = sorted((f1, f2))
    model, cluster = _problem()
    lay = Layout(zero=zero, mbs=mbs)
    par = device if params and zero == 3 else "none"
    runs = [_train(stack, precision="bf16")] + [
        _train(stack, precision="bf16", offload_optimizer=device, offload_optimizer_fraction=f, offload_params=par)
        for f in (lo, hi)]
    est = [estimate(model, cluster, t, lay) for t in runs]
    peaks = [e.memory.peak_bytes for e in est]
    steps = [e.time.step_s for e in est]
    assert peaks[1] <= peaks[0] and peaks[2] <= peaks[1]
    assert steps[1] >= steps[0] * (1 - 1e-12) and steps[2] >= steps[1] * (1 - 1e-12)


def test_defaults_against_the_lent_h100():
    """benchmarks/gpu/offload_h100.json (one H100 80GB HBM3, PCIe Gen5 x16, 2026-11-26): pinned copies
    54.67 / 54.74 GB/s; fp32 and tf32 GEMMs below the datasheet peaks the profile carries."""
    import json
    from pathlib import Path
    got = json.loads((Path(__file__).parents[1] / "benchmarks" / "gpu" / "offload_h100.json").read_text())
    for key in ("h2d_gb_per_s", "d2h_gb_per_s"):
        assert offload.default_h2d_gb_per_s("h100-sxm") == pytest.approx(got[key], rel=0.02)
    gpu = hp.load_gpu("h100-sxm")
    assert 0.6 < got["fp32_tflops"] / gpu.fp32_tflops < 1 and 0.6 < got["tf32_tflops"] / gpu.tf32_tflops < 1
    per_node = offload.HOST_ADAM_BYTES_PER_S_PER_NODE / offload.CPU_ADAM_BYTES_PER_PARAM
    assert 0.5 < got["cpu_adam_params_per_s"] / per_node < 2  # a 16-core VM against a 2-socket node


@pytest.mark.parametrize("precision,opt,par,zero", [("fp32", "none", "none", 1), ("bf16", "cpu", "none", 2),
                                                    ("fp32", "cpu", "cpu", 3), ("bf16", "nvme", "nvme", 3)])
def test_planner_tables_match_the_estimate_with_offload_and_fp32(precision, opt, par, zero):
    """The planner's affine stage tables (costmodels.stage_linear) carry fp32 activations, the offloaded
    states and the host's CPU step exactly as memory_by_stage and step.optimizer_s do."""
    from costmodels.layout import resolve_layout
    from costmodels.memory import memory_by_stage
    from costmodels.params import stage_layer_mix
    from costmodels.stage_linear import layout_coefficients
    from costmodels.step import optimizer_s, _stage_params
    from costmodels.timing import make_context
    model, cluster = _problem()
    train = _train(precision=precision, offload_optimizer=opt, offload_params=par)
    lay = resolve_layout(model, cluster, train, Layout(pp=2, zero=min(zero, 1), mbs=1) if zero < 2 else
                         Layout(zero=zero, mbs=1))
    k = layout_coefficients(model, cluster, train, lay)
    c = make_context(model, cluster, train, lay)
    for i, (s, mem) in enumerate(zip(k.stages, memory_by_stage(model, cluster, train, lay))):
        n = stage_layer_mix(model, lay.stage_layers, i, lay.vpp)[::-1]
        assert s.memory_bytes.at(*n) == pytest.approx(mem.total_bytes, abs=8)
        assert s.optimizer_s.at(*n) == pytest.approx(optimizer_s(c, _stage_params(c, i)), rel=1e-9)


def test_megatron_cpu_optimizer_copies_fp32_and_exposed():
    """Megatron's HybridDeviceOptimizer: fp32 main grads down and fp32 params up (4 bytes each), after
    the reduction, so no backward hides them: 1e9 x 4 / 55.2e9 each way on DGX H100."""
    cluster = loading.load_cluster("dgx-h100")
    t = offload.offload_time(1e9, cluster, _train("megatron-core", offload_optimizer="cpu"), 1, 4, 10.0, True)
    assert t.d2h_s == pytest.approx(4e9 / 55.2e9) and t.h2d_s == pytest.approx(4e9 / 55.2e9)


def test_fp32_elementwise_work_moves_twice_the_bytes():
    """fp32 activations are 4 bytes: the memory-bound element-wise part of a layer doubles."""
    from costmodels.layout import resolve_layout
    from costmodels.timing import _passes, make_context
    model, cluster = _problem()
    lay = resolve_layout(model, cluster, _train(), Layout(zero=1, mbs=1))
    elem = [_passes(make_context(model, cluster, _train(precision=p), lay), False)[2] for p in ("bf16", "fp32")]
    assert elem[1] == pytest.approx(2 * elem[0])
