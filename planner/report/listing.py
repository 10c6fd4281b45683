"""`parplan models` and `parplan hardware`: the presets as rows (JSON) and as Rich tables."""

from __future__ import annotations

from rich.table import Table

import hardware_profiles as hp
from costmodels.params import active_params, total_params


def model_rows() -> list[dict]:
    """One row per model preset, raw numbers."""
    rows = []
    for name in hp.list_models():
        m = hp.load_model(name)
        rows.append(dict(name=name, layers=m.num_layers, hidden=m.hidden_size, heads=m.num_attention_heads,
                         kv_heads=m.num_kv_heads, experts=m.num_experts, top_k=m.top_k, moe_layers=m.num_moe_layers,
                         params=total_params(m), active=active_params(m), seq_length=m.seq_length,
                         sources=hp.model_sources(name)))
    return rows


MODEL_OPTIONAL = ("seq", "kv", "heads", "hidden", "layers")  # left out first when the terminal is narrow


def models_table(rows: list[dict], width: int | None = None) -> Table:
    """Model presets with parameter counts in billions; at `width` columns the least useful columns are
    left out (planner.report.fit), never cut."""
    from planner.report.fit import fit_table

    return fit_table(lambda out: _models_table(rows, out), width or 10_000, MODEL_OPTIONAL)


def _models_table(rows: list[dict], left_out: frozenset) -> Table:
    table = Table(title="Model presets")
    cols = [c for c in ("name", "layers", "hidden", "heads", "kv", "experts", "params (B)", "active (B)", "seq")
            if c not in left_out]
    for col in cols:
        table.add_column(col, justify="left" if col == "name" else "right", no_wrap=True)
    for r in rows:
        experts = f"{r['experts']} top-{r['top_k']}" if r["experts"] else "-"
        if r["experts"] and r["moe_layers"] != r["layers"]:
            experts += f", {r['moe_layers']} layers"  # dense layers before (DeepSeek) or between (Llama 4)
        cells = {"name": r["name"], "layers": str(r["layers"]), "hidden": str(r["hidden"]), "heads": str(r["heads"]),
                 "kv": str(r["kv_heads"]), "experts": experts, "params (B)": f"{r['params'] / 1e9:.2f}",
                 "active (B)": f"{r['active'] / 1e9:.2f}", "seq": str(r["seq_length"])}
        table.add_row(*(cells[c] for c in cols))
    return table


def hardware_data() -> dict:
    """GPU profiles and cluster presets as JSON-ready dicts."""
    return {"gpus": [hp.load_gpu(n).model_dump() for n in hp.list_gpus()],
            "clusters": [hp.load_cluster(n).model_dump() for n in hp.list_clusters()]}


def hardware_tables() -> list[Table]:
    """A GPU table and a cluster table."""
    gt = Table(title="GPU profiles")
    for col in ("name", "HBM GiB", "HBM GB/s", "BF16 TFLOP/s", "FP8 TFLOP/s"):
        gt.add_column(col, justify="left" if col == "name" else "right")
    for g in (hp.load_gpu(n) for n in hp.list_gpus()):
        gt.add_row(g.name, f"{g.hbm_gib:g}", f"{g.hbm_gb_per_s:g}", f"{g.bf16_tflops:g}",
                   f"{g.fp8_tflops:g}" if g.fp8_tflops else "-")
    ct = Table(title="Cluster presets (--nodes sets the size; a node is one NVLink domain)")
    for col in ("name", "GPU", "GPUs/node", "scale-up GB/s", "scale-out GB/s", "reserve GiB"):
        ct.add_column(col, justify="left" if col in ("name", "GPU") else "right")
    for c in (hp.load_cluster(n) for n in hp.list_clusters()):
        ct.add_row(c.name, c.gpu_profile.name, str(c.gpus_per_node), f"{c.scale_up_gb_per_s:g}",
                   f"{c.scale_out_gb_per_s:g}", f"{c.memory_reserve_gib:g}")
    return [gt, ct]


def framework_rows() -> list[dict]:
    """One row per framework capability table (hardware_profiles/frameworks), as data."""
    return [hp.load_framework(name).model_dump(mode="json") for name in hp.list_frameworks()]


def frameworks_table(rows: list[dict]) -> Table:
    """What each --framework runs, one line each."""
    table = Table(title="Frameworks (--framework; default any)")
    for col in ("name", "stack", "export", "tp", "cp", "ep", "pp", "ZeRO (with pp)", "recompute"):
        table.add_column(col, overflow="fold")
    for r in rows:
        zero = f"{','.join(map(str, r['zero']))} ({','.join(map(str, r['zero_with_pp']))})" if r["pp"] else \
            ",".join(map(str, r["zero"]))
        table.add_row(r["name"], r["stack"], r["export_format"], _yes(r["tp"]), ",".join(r["cp_comm"]) or "-",
                      _yes(r["ep"]), "vpp" if r["vpp"] else _yes(r["pp"]), zero, ",".join(r["recompute"]))
    return table


def _yes(flag: bool) -> str:
    return "yes" if flag else "-"
