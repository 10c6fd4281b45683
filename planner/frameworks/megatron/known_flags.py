"""Which flags a Megatron launch may give, and what `check` does with one Megatron would refuse.

Megatron-LM's parse_args() builds an argparse parser with allow_abbrev=False and calls parser.parse_args()
(megatron-core 0.19.2 megatron/training/arguments.py, parse_args), so a flag it does not define (a typo, a
flag of another version or of NeMo's config) stops the launch with "unrecognized arguments". Accepted here:
- every option string of that parser (planner.frameworks.megatron.mcore_flags, vendored from the 0.19.2 wheel);
- every flag parplan's reader reads today (flag_table's tables, names.SWITCHES), some of them from older
  Megatron-LM releases (--use-custom-fsdp, --cpu-offloading, the 2021 --checkpoint-activations family);
- DeepSpeed's own launch flags (deepspeed 0.19.8 deepspeed/__init__.py _add_core_arguments: --deepspeed,
  --deepspeed_config, --deepscale, --deepscale_config) and Megatron-DeepSpeed's (MEGATRON_DEEPSPEED below).

What happens to a flag in none of them (`check`'s rule, one rule for every flag):
- its nearest accepted flag (a small edit distance, or a known other name in OTHER_NAMES) is one whose value
  parplan prices (READ: the layout, batch, precision, recompute and model-shape flags): exit 2 (bad input)
  naming the flag, its value and the flag meant. Megatron itself refuses to start, and reading on would price
  the default in its place (`--tensor-model-paralel-size 8` priced tp=1 and said "does not fit" at 490 GiB a
  GPU): a verdict about a run that cannot happen, which exit 2 does not pretend to give;
- otherwise one warning line naming it (and the flag meant, when one is near): ignoring it changes nothing
  parplan prices, so the memory verdict still holds for the run the user meant.
"""

from __future__ import annotations

from typing import Optional

from planner.errors import UserError
from planner.frameworks.megatron import flag_table, mcore_flags
from planner.frameworks.megatron.names import PARALLEL, SWITCHES

DEEPSPEED_CORE = {"--deepspeed", "--deepspeed_config", "--deepscale", "--deepscale_config"}
# Megatron-DeepSpeed (microsoft/ and bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py; not on PyPI):
# the flags planner.frameworks.megatron.deepspeed_dialect reads, and those the BigScience scripts vendored in
# tests/data/configs (bs_tr11_176B.slurm, bs_tr11f_6B3.slurm, bs_tr1_13B.slurm; SOURCES.tsv) pass.
MEGATRON_DEEPSPEED = {
    "--deepspeed-config", "--zero-stage", "--deepspeed-activation-checkpointing", "--partition-activations",
    "--cpu-optimizer", "--no-pipeline-parallel", "--pp-partition-method", "--num-key-value-heads",
    "--use-rotary-position-embeddings", "--use-flash-attn-v1", "--use-flash-attn-v2", "--use-flash-attn-triton",
    "--use-flash-attn-builder", "--ds-sequence-parallel-size", "--expert-interval", "--topk",
    "--moe-expert-parallel-size", "--mlp-type", "--moe-train-capacity-factor", "--disable-moe-token-dropping",
    "--moe-loss-coeff", "--tokenizer-name-or-path", "--embed-layernorm", "--sync-tp-duplicated-parameters",
    "--abort-on-unmet-fused-kernel-constraints", "--kill-switch-path", "--pad-vocab-size-to",
    "--log-batch-size-to-tensorboard", "--train-weighted-split-paths-path", "--valid-weighted-split-paths-path",
    "--valid-num-workers", "--data-impl", "--codecarbon-dir",
    # Microsoft's examples_deepspeed scripts (MoE, activation checkpointing, curriculum and random-LTD options)
    "--no-query-key-layer-scaling", "--log-optimizer-states-to-tensorboard", "--create-moe-param-group",
    "--moe-min-capacity", "--moe-eval-capacity-factor", "--contigious-checkpointing", "--checkpoint-in-cpu",
    "--synchronize-each-layer", "--profile-backward", "--random-ltd",
}
# Megatron-DeepSpeed's own flags that change neither memory nor step time (Microsoft Megatron-DeepSpeed
# megatron/arguments.py: token-based schedules, data-efficiency indexes and options, universal checkpoints, and
# --no-async-tensor-model-parallel-allreduce, gone from megatron-core 0.19.2's parser): accepted without a warning in a
# Megatron-DeepSpeed launch (deepspeed_dialect.is_megatron_deepspeed) only; Megatron-LM would refuse them.
MEGATRON_DEEPSPEED_ONLY = frozenset({
    "--lr-decay-tokens", "--lr-warmup-tokens", "--train-tokens", "--train-data-exact-num-epochs",
    "--return-data-index", "--data-efficiency-curriculum-learning", "--train-idx-path", "--train-desc-path",
    "--train-doc-idx-path", "--train-sample-idx-path", "--train-shuffle-idx-path", "--universal-checkpoint",
    "--no-async-tensor-model-parallel-allreduce", "--aml-data-download-path", "--repeated-dataloader",
})
# Megatron-LM of 2021 (Narayanan et al. SC'21 scripts, tests/data/configs/mlm_sc21_*.sh)
MEGATRON_2021 = {"--DDP-impl", "--checkpoint-activations", "--activations-checkpoint-method",
                 "--activations-checkpoint-num-layers"}
# Flags people write for a setting Megatron-LM names otherwise -> the flag that sets it. megatron-core 0.19.2
# arguments.py lists virtual_pipeline_model_parallel_size among the config fields for which "no CLI argument
# exists" (_add_network_size_args); validate_args derives it from --num-virtual-stages-per-pipeline-rank or
# --num-layers-per-virtual-pipeline-stage (NeMo's config calls it model.virtual_pipeline_model_parallel_size).
OTHER_NAMES = {"--virtual-pipeline-model-parallel-size": "--num-virtual-stages-per-pipeline-rank"}

# Flags whose value parplan prices: a misspelling of one of them is exit 2 (see the module docstring).
SHAPE_AND_LAYOUT = {
    "--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size", "--kv-channels",
    "--group-query-attention", "--num-query-groups", "--seq-length", "--max-position-embeddings", "--vocab-size",
    "--tokenizer-type", "--make-vocab-size-divisible-by", "--normalization", "--position-embedding-type",
    "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--qk-head-dim", "--qk-pos-emb-head-dim",
    "--v-head-dim", "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--num-key-value-heads", "--use-rotary-position-embeddings", "--moe-expert-parallel-size",
    "--ds-sequence-parallel-size", "--pad-vocab-size-to", *PARALLEL.values(),
}
READ = frozenset(flag_table.PRICED) | flag_table.MODEL | SHAPE_AND_LAYOUT
ACCEPTED = (mcore_flags.FLAGS | READ | set(flag_table.HARMLESS) | set(flag_table.WARNED) | flag_table.LEGACY
            | SWITCHES | DEEPSPEED_CORE | MEGATRON_DEEPSPEED | MEGATRON_2021)
MAX_DISTANCE = 2


def distance(a: str, b: str, limit: int = MAX_DISTANCE) -> int:
    """Edit distance (insertions, deletions, substitutions, swaps of neighbours), `limit + 1` once past it."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before, row = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(row[j] + 1, cur[j - 1] + 1, row[j - 1] + (ca != cb))
            if before is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], before[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        before, row = row, cur
    return row[-1]


def meant(flag: str) -> Optional[str]:
    """The accepted flag `flag` most likely stands for: its other name, its spelling with '-' for '_', else the
    nearest within MAX_DISTANCE edits (one for a flag under 12 characters; a flag parplan prices first among
    equals); None when none is near."""
    if flag in OTHER_NAMES:
        return OTHER_NAMES[flag]
    dashed = "--" + flag.lstrip("-").replace("_", "-")
    if dashed in ACCEPTED:
        return dashed
    limit = MAX_DISTANCE if len(flag) >= 12 else 1  # two edits turn --lr into --fp8: short flags get one
    scored = [(distance(flag, known, limit), known not in READ, known) for known in ACCEPTED]
    best = min(scored)
    return best[2] if best[0] <= limit else None


def unknown(pairs: list, deepspeed: bool = False) -> list[tuple[str, Optional[str]]]:
    """(flag, value) of each flag given that Megatron would refuse, in the order given, each once (deepspeed: a
    Megatron-DeepSpeed launch, which also accepts MEGATRON_DEEPSPEED_ONLY)."""
    seen, out = set(), []
    for flag, value in pairs:
        if flag not in ACCEPTED and flag not in seen and not (deepspeed and flag in MEGATRON_DEEPSPEED_ONLY):
            seen.add(flag)
            out.append((flag, value))
    return out


def message(flag: str, near: Optional[str]) -> str:
    """'not a Megatron-LM flag (did you mean X?); ...' (what follows the flag). The flag set is megatron-core
    0.19.2's, so the message names that release: a flag an older Megatron-LM had (--fp8-hybrid, 2023) is not
    called a typo."""
    hint = f" (did you mean {near}?)" if near else ""
    return (f"not a Megatron-LM flag{hint}; Megatron-LM as of megatron-core {mcore_flags.VERSION.split()[-1]} "
            "would refuse it at launch (an older release may have had it)")


def vet(pairs: list, warn, deepspeed: bool = False) -> None:
    """Warn (`warn(line)`) of each flag Megatron would refuse; raise UserError for the first whose meant flag is
    one parplan prices (the module docstring says why). deepspeed: a Megatron-DeepSpeed launch, whose fork may
    define flags MEGATRON_DEEPSPEED does not list (its warning says so)."""
    if not deepspeed:
        refuse_switch_values(pairs)
    for flag, value in unknown(pairs, deepspeed):
        near = meant(flag)
        if near in READ:
            shown = "" if value is None else f" {value[:40]}"
            raise UserError(f"{flag}{shown}: {message(flag, near)}, and reading on would price {near}'s default "
                            "instead; correct the flag")
        fork = " (unless this Megatron-DeepSpeed defines it)" if deepspeed else ""
        warn(f"{flag} is {message(flag, near)}{fork}; ignored")


def refuse_switch_values(pairs: list) -> None:
    """Raise UserError for a switch given a value (`--bf16=yes`): Megatron's argparse exits with "ignored explicit
    argument" (store_true actions take none), so the script never trains. planner.files.shellread.parse_flags gives
    a switch a value only in the `--flag=value` form."""
    for flag, value in pairs:
        if flag in SWITCHES and value is not None:
            raise UserError(f"{flag}={value[:40]}: {flag} is a switch and takes no value (Megatron's argparse "
                            f"exits: ignored explicit argument {value[:40]!r}); write {flag} alone")

