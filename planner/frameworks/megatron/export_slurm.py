"""SLURM exporter: `launch_slurm.sbatch` running Megatron-LM's pretrain_gpt.py through srun + torchrun.

Source: benchmarks/data/launch_formats.md, section "SLURM" (#SBATCH --nodes/--ntasks-per-node=1/
--gpus-per-node, the first node's hostname as c10d rendezvous endpoint, `srun torchrun --nnodes
$SLURM_NNODES ... --rdzv-id $SLURM_JOB_ID`) and section "Megatron-LM" for the training arguments,
which come from planner.frameworks.megatron.export's argument builder.
"""

from __future__ import annotations

import shlex

from planner.frameworks.megatron import export as megatron
from planner.exporters.common import ExportPlan, Raw, command, comment_block, header_lines, printable

TARGET = "SLURM (sbatch; srun + torchrun + Megatron-LM pretrain_gpt.py)"
SCRIPT = "launch_slurm.sbatch"
PORT = 29500


def sbatch_lines(plan: ExportPlan) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in printable(plan.model.name))[:64] or "parplan"
    return (f"#SBATCH --job-name=parplan-{name}\n#SBATCH --nodes={plan.nodes}\n#SBATCH --ntasks-per-node=1\n"
            f"#SBATCH --gpus-per-node={plan.gpus_per_node}\n#SBATCH --exclusive\n"
            "# EDIT: add --partition/--account/--time for your site.\n")


def ansi_c_word(text: str) -> str:
    """`text` as one bash word on one line: $'...' with backslash, quote, newline and carriage return
    escaped (bash reads it back to the same string)."""
    body = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return f"$'{body}'"


def one_line_names(text: str, plan: ExportPlan) -> str:
    """The script with every quoted name that spans lines rewritten as a one-line $'...' word. sbatch
    reads a line starting '#SBATCH' as a directive, so a model name 'm\\n#SBATCH --x=1' inside the quoted
    --wandb-exp-name must not put one in the file."""
    for name in {plan.model.name, plan.cluster.name, plan.cluster.gpu_profile.name}:
        if "\n" in name or "\r" in name:
            text = text.replace(shlex.quote(name), ansi_c_word(name))
    return text


def render(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{file name: (text, mode)}."""
    arrays, words = megatron.arrays_and_env(plan)
    body = (
        '# EDIT: MEGATRON_DIR is the Megatron-LM checkout holding pretrain_gpt.py (shared by all nodes)\n'
        'MEGATRON_DIR="${MEGATRON_DIR:-.}"\n'
        f"GPUS_PER_NODE={plan.gpus_per_node}\n"
        "# Rendezvous on the first node of the allocation (sed reads all of scontrol's output: with\n"
        "# pipefail, head would let scontrol die of SIGPIPE on a long node list)\n"
        'HEAD_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"\n'
        f"RDZV_PORT={PORT}\n\n{arrays}\n"
    )
    launch = ["srun", "torchrun", "--nnodes", Raw('"$SLURM_NNODES"'), "--nproc-per-node", Raw('"$GPUS_PER_NODE"'),
              "--rdzv-backend", "c10d", "--rdzv-endpoint", Raw('"$HEAD_NODE:$RDZV_PORT"'),
              "--rdzv-id", Raw('"$SLURM_JOB_ID"'), Raw('"$MEGATRON_DIR/pretrain_gpt.py"')] + words
    head = comment_block(header_lines(plan, TARGET))
    text = f"#!/usr/bin/env bash\n{sbatch_lines(plan)}{head}set -euo pipefail\n\n{one_line_names(body, plan)}"
    text += command(launch)
    return {SCRIPT: (text, 0o777)}
