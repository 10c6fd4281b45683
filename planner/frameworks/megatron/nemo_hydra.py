"""NeMo's hydra launchers, recognised so that `check` says it does not read them (instead of asking for flags).

NeMo 1.x examples/nlp/language_modeling/megatron_gpt_pretraining.py (and the other megatron_*.py examples) is a
hydra app: its settings are `--config-path`/`--config-name` and dotted overrides of its YAML config
(`model.tensor_model_parallel_size=4`, `trainer.devices=8`, `+model.x=1`, `~model.y`; hydra's override grammar),
not Megatron-LM's argparse flags. parplan reads none of NeMo's config; what it reads is named in the error.
"""

from __future__ import annotations

import posixpath
import re

from planner.errors import UserError

OVERRIDE = re.compile(r"[+~]{0,2}[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+=")
HYDRA_FLAGS = ("--config-path", "--config-name", "--config-dir")
# NeMo 1.x megatron_gpt_config.yaml keys -> parplan's layout names (for the suggested `estimate --layout`)
LAYOUT_KEYS = {"model.tensor_model_parallel_size": "tp", "model.pipeline_model_parallel_size": "pp",
               "model.virtual_pipeline_model_parallel_size": "vpp", "model.context_parallel_size": "cp",
               "model.expert_model_parallel_size": "ep", "model.micro_batch_size": "mbs",
               "model.sequence_parallel": "sp"}


def overrides(args: list[str]) -> list[str]:
    """The hydra overrides among a launch's arguments."""
    return [w for w in args if OVERRIDE.match(w)]


def is_hydra(script: str, args: list[str]) -> bool:
    """A NeMo/hydra launch: overrides or hydra's config flags, and no Megatron --num-layers."""
    hydra = overrides(args) or any(w.split("=", 1)[0] in HYDRA_FLAGS for w in args)
    return bool(hydra) and "--num-layers" not in args


def suggested_layout(args: list[str]) -> str:
    """`tp=4,pp=2,...` from the overrides that set the layout, in LAYOUT_KEYS' order ('' when none does)."""
    given = dict(word.lstrip("+~").split("=", 1) for word in overrides(args))
    out = []
    for key, name in LAYOUT_KEYS.items():
        value = given.get(key, "")
        if value:
            out.append(f"{name}={ {'true': '1', 'false': '0'}.get(value.lower(), value)[:12]}")
    return ",".join(out)


def refuse(script: str, args: list[str]) -> None:
    """UserError for a NeMo hydra launch, naming what parplan reads instead; nothing otherwise."""
    if not is_hydra(script, args):
        return
    shown = ", ".join(w[:60] for w in overrides(args)[:2]) or "--config-name"
    layout = suggested_layout(args) or "tp=...,pp=...,mbs=..."
    raise UserError(f"{posixpath.basename(script)[:80]} is a NeMo hydra launcher ({shown}, ...): parplan does not "
                    "read NeMo's hydra overrides. check reads Megatron-LM launches (pretrain_gpt.py with --flags), "
                    "Megatron-DeepSpeed, DeepSpeed JSON, torchtitan TOML, Accelerate YAML and parplan plan files; "
                    f"for this run use `parplan estimate MODEL --cluster CLUSTER --layout {layout}`")
