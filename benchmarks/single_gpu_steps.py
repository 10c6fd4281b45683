"""Step time of one-GPU eager training steps on an H100 and an H200, against parplan's price of each.

    python benchmarks/single_gpu_steps.py

Rows: benchmarks/data/measured/gpu_memory_h100.csv and gpu_memory_h200.csv (benchmarks/gpu/measure_memory.py,
the same script, torch and configurations on one H100 80GB HBM3 on 2026-11-26 and one H200 on 2026-11-27;
`step_time_ms` is the median of three whole steps: forward, backward and a foreach AdamW over fp32 weights, bf16
autocast, cuDNN attention). Nothing is fitted on these step times, so both GPUs are out of sample. The H200
enters only through its spec sheet (hardware_profiles/gpus/h200.yaml: same SMs and tensor-core peak as the
H100, HBM3e at 4.8 TB/s against 3.35), so its column tests the new-hardware path.

Priced with the torchtitan-eager stack (plain PyTorch eager), one GPU of the dgx-h100 / hgx-h200 presets, ZeRO 0.
Rows whose mode parplan does not state (bf16-pure weights, FSDP2 on one rank) are left out; the allocator
setting (`base-expandable`) does not change the step and is priced as `base`.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hardware_profiles as hp  # noqa: E402
from costmodels.estimate import estimate  # noqa: E402
from costmodels.layout import Layout  # noqa: E402
from costmodels.train_spec import TrainSpec  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "measured"
GPUS = {"h100": ("gpu_memory_h100.csv", "dgx-h100"), "h200": ("gpu_memory_h200.csv", "hgx-h200")}
PRICED_MODES = {"fp32-autocast"}


def _price_ms(row: dict, cluster_name: str) -> float:
    """parplan's step of one measure_memory.py configuration on one GPU of `cluster_name`, ms."""
    model = hp.load_model("llama3-8b").model_copy(update=dict(
        name=row["name"], hidden_size=int(row["h"]), num_attention_heads=int(row["heads"]),
        num_kv_heads=int(row["kv_heads"]), ffn_hidden_size=int(row["ffn"]), num_layers=int(row["layers"]),
        vocab_size=int(row["vocab"])))
    cluster = hp.load_cluster(cluster_name, num_nodes=1).model_copy(update={"gpus_per_node": 1})
    mbs = int(row["mbs"])
    train = hp.resolve_train(TrainSpec(global_batch_size=mbs, seq_length=int(row["seq"])), "torchtitan-eager")
    lay = Layout(zero=0, mbs=mbs, recompute="full" if row["checkpoint"] == "True" else "none")
    return estimate(model, cluster, train, lay).time.step_s * 1e3


def _measured(name: str) -> dict[str, dict]:
    """A measure_memory.py CSV's rows by configuration name."""
    with (DATA / name).open() as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def rows() -> list[tuple[str, float, float, float, float]]:
    """(config, measured H100 ms, priced H100 ms, measured H200 ms, priced H200 ms) per priced configuration."""
    measured = {gpu: _measured(name) for gpu, (name, _) in GPUS.items()}
    out = []
    for name, row in measured["h100"].items():
        if row["mode"] not in PRICED_MODES or name not in measured["h200"]:
            continue
        out.append((name, float(row["step_time_ms"]), _price_ms(row, GPUS["h100"][1]),
                    float(measured["h200"][name]["step_time_ms"]), _price_ms(measured["h200"][name], GPUS["h200"][1])))
    return out


def main() -> None:
    table = rows()
    print("| config | H100 measured ms | priced | error | H200 measured ms | priced | error | H200/H100 measured | "
          "priced |\n|---|---|---|---|---|---|---|---|---|")
    for name, m100, p100, m200, p200 in table:
        print(f"| {name} | {m100:.1f} | {p100:.1f} | {p100 / m100 - 1:+.1%} | {m200:.1f} | {p200:.1f} | "
              f"{p200 / m200 - 1:+.1%} | {m200 / m100:.3f} | {p200 / p100:.3f} |")
    for i, gpu in ((1, "H100"), (3, "H200")):
        errs = [abs(r[i + 1] / r[i] - 1) for r in table]
        print(f"\n{gpu}: mean |error| {sum(errs) / len(errs):.1%}, max {max(errs):.1%} ({len(errs)} steps)", end="")
    print()


if __name__ == "__main__":
    main()
