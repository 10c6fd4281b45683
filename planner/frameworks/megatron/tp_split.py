"""What megatron-core refuses about splitting attention over the tensor-parallel ranks, said in Megatron's flags.

Source: megatron-core 0.19.2 megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__:
lines 1323-1327 raise unless num_attention_heads % tensor_model_parallel_size == 0; lines 1338-1345 raise
"num_query_groups (G) must be a multiple or divisor of tensor_model_parallel_size (T)". A divisor is run:
megatron/core/transformer/attention.py lines 353-358 give each rank one query group (its KV head replicated over
tp/G ranks, the QKV output all-gathered and sliced, lines 1839-1858), so --tensor-model-parallel-size 16 with
--num-query-groups 8 runs (older Megatron-LM asserted num_query_groups % tp == 0; 0.19.2 does not).
costmodels.params prices the replicated KV heads (head_dim per rank when num_kv_heads < tp). The MLP's width
is split too: megatron/core/tensor_parallel/layers.py line 1328 (RowParallelLinear, fc2's input) divides it by
tp, asserting divisibility (megatron/core/utils.py ensure_divisibility, line 558).
Used by planner.files.native for `check` of a Megatron script (the layout check after it would name
parplan's field names instead of the flags).
"""

from __future__ import annotations

from planner.errors import UserError

SOURCE = "megatron-core 0.19.2 transformer_config.py"


def problems(heads: int, groups: int, tp: int, names: tuple[str, str]) -> list[str]:
    """What TransformerConfig raises for these values, one line each; names: (heads' name, groups' name)."""
    out = []
    if heads % tp:
        out.append(f"{names[0]} {heads} is not a multiple of --tensor-model-parallel-size {tp} ({SOURCE} line 1323)")
    if groups != heads and groups % tp and tp % groups:
        out.append(f"{names[1]} {groups} is neither a multiple nor a divisor of --tensor-model-parallel-size {tp} "
                   f"({SOURCE} line 1338)")
    return out


def mlp_problems(ffn: int, tp: int, name: str) -> list[str]:
    if ffn % tp:
        return [f"{name} {ffn} is not divisible by --tensor-model-parallel-size {tp} (megatron-core 0.19.2 "
                "tensor_parallel/layers.py line 1328)"]
    return []


def require(a, model, tp: int, from_flags: bool, where: str) -> None:
    """UserError naming both values when Megatron would refuse this tensor-parallel split. model: the ModelSpec,
    read from the flags (from_flags) or given by check --model (then named by its fields)."""
    groups = "--num-key-value-heads" if a.has("--num-key-value-heads") else "--num-query-groups"
    names = ("--num-attention-heads", groups) if from_flags else ("--model's num_attention_heads", "num_kv_heads")
    default = "int(8/3 x --hidden-size / 64) x 64 with --swiglu" if a.has("--swiglu") else "4 x --hidden-size"
    ffn = ("--ffn-hidden-size" if a.has("--ffn-hidden-size") else f"the MLP width ({default})") \
        if from_flags else "--model's ffn_hidden_size"
    found = problems(model.num_attention_heads, model.num_kv_heads, tp, names)
    found += mlp_problems(model.ffn_hidden_size, tp, ffn) if not model.num_experts else []  # MoE: experts' own split
    if found:
        raise UserError(f"{where}: {'; '.join(found)}: Megatron refuses this at start-up")
