"""Pure-Python validators of exported launch files, mirroring each framework's own checks.

Source: benchmarks/data/launch_formats.md: "Rules Megatron enforces" (and the two it does not check),
the DeepSpeed batch rule, strict sections and hostfile rules, the torchrun flag rules, the torchtitan
rules and the SLURM batch-script shape. Each validator reads the written files back (flags parsed
with planner.files.shellread, never executed) and returns a list of problems; an empty list
means the files pass. validate_export also checks that the files say what the plan says.
"""

from __future__ import annotations

import json
from pathlib import Path

from planner.errors import UserError
from planner.frameworks.megatron import flags as mf
from planner.exporters.common import ExportPlan, plan_from_doc
from planner.files.shellread import (
    find_launch, flag_dict, parse_flags, read_script, sbatch_options, split_at_script,
)
from planner.exporters.config_rules import (
    deepspeed_problems, hostfile_problems, launcher_problems, torchtitan_problems,
)
from planner.exporters.launch_rules import megatron_rule_problems, torchrun_problems

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None


def megatron_script_problems(text: str, world: int, env_extra: dict = None) -> list[str]:
    """Every torchrun launch of pretrain_gpt.py in `text` against Megatron's rules."""
    sh = read_script(text)
    launches = find_launch(sh, "torchrun")
    if not launches:
        return ["no torchrun command found"]
    out: list[str] = []
    env = {**sh.env, **(env_extra or {})}
    for argv in launches:
        opts, script, args = split_at_script(argv)
        if script is None or not script.endswith("pretrain_gpt.py"):
            out.append(f"torchrun does not run pretrain_gpt.py (script: {script!r})")
        out += torchrun_problems(opts, world)
        out += megatron_rule_problems(mf.MegatronArgs(parse_flags(args, mf.SWITCHES), opts, env), world)
    return out


def check_megatron(files: dict[str, Path], plan: ExportPlan) -> list[str]:
    text = files["launch_megatron.sh"].read_text()
    return megatron_script_problems(text, plan.world) + _same_plan(text, plan, nodes=None)


def check_slurm(files: dict[str, Path], plan: ExportPlan) -> list[str]:
    text = files["launch_slurm.sbatch"].read_text()
    opts = sbatch_options(text)
    out = []
    want = {"--nodes": str(plan.nodes), "--ntasks-per-node": "1", "--gpus-per-node": str(plan.gpus_per_node)}
    for key, value in want.items():
        if opts.get(key) != value:
            out.append(f"#SBATCH {key}={opts.get(key)!r}, expected {value}")
    sh = read_script(text)
    if not any(cmd and cmd[0] == "srun" and "torchrun" in cmd for cmd in sh.commands):
        out.append("no `srun torchrun` command")
    argv = find_launch(sh, "torchrun")
    flags = flag_dict(parse_flags(split_at_script(argv[0])[0])) if argv else {}
    for key, value in {"--nnodes": "$SLURM_NNODES", "--rdzv-backend": "c10d", "--rdzv-id": "$SLURM_JOB_ID"}.items():
        if flags.get(key) != value:
            out.append(f"srun torchrun {key} {flags.get(key)!r}, expected {value}")
    if not str(flags.get("--rdzv-endpoint", "")).startswith("$(scontrol show hostnames"):
        out.append(f"--rdzv-endpoint {flags.get('--rdzv-endpoint')!r} is not the first node from scontrol")
    resolved = f"SLURM_NNODES={plan.nodes}\nSLURM_JOB_ID=1\n" + text.replace(
        '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)', "node0")
    return out + megatron_script_problems(resolved, plan.world) + _same_plan(resolved, plan, plan.nodes)


def _same_plan(text: str, plan: ExportPlan, nodes) -> list[str]:
    """Read the script back as `parplan check` would and compare with the plan."""
    from planner.files.native import load_native_text  # local: planner.files.native imports this package
    try:
        prob = load_native_text(text, "megatron", None, plan.cluster, nodes)
    except UserError as err:
        return [f"cannot read the script back: {err}"]
    return _compare(prob, plan)


def _compare(prob, plan: ExportPlan) -> list[str]:
    from costmodels.layout import resolve_layout
    try:
        lay = resolve_layout(prob.model if prob.model else plan.model, prob.cluster, prob.train, prob.layout)
    except Exception as err:  # LayoutError or SpecError: report, don't raise
        return [f"the exported layout does not resolve: {err}"]
    keys = ("tp", "sp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs", "recompute", "recompute_modules", "stage_layers",
            "chunk_layers", "num_microbatches")
    out = [f"{k}={getattr(lay, k)} but the plan has {getattr(plan.layout, k)}"
           for k in keys if getattr(lay, k) != getattr(plan.layout, k)]
    if prob.train.global_batch_size != plan.train.global_batch_size:
        out.append(f"global batch {prob.train.global_batch_size} but the plan has {plan.train.global_batch_size}")
    return out


def check_deepspeed(files: dict[str, Path], plan: ExportPlan) -> list[str]:
    try:
        cfg = json.loads(files["ds_config.json"].read_text())
    except json.JSONDecodeError as err:
        return [f"ds_config.json: invalid JSON: {err}"]
    dp = plan.world // plan.layout.pp
    out = deepspeed_problems(cfg, dp)
    out += hostfile_problems(files["hostfile"].read_text(), plan.nodes, plan.gpus_per_node)
    sh = read_script(files["launch_deepspeed.sh"].read_text())
    launches = find_launch(sh, "deepspeed")
    out += launcher_problems(launches[0], plan.nodes, plan.gpus_per_node) if launches else ["no deepspeed command"]
    if cfg.get("zero_optimization", {}).get("stage") != plan.layout.zero:
        out.append(f"zero_optimization.stage differs from the plan's zero={plan.layout.zero}")
    return out


def check_torchrun(files: dict[str, Path], plan: ExportPlan) -> list[str]:
    sh = read_script(files["launch_torchrun.sh"].read_text())
    launches = find_launch(sh, "torchrun")
    backends = {flag_dict(parse_flags(split_at_script(a)[0])).get("--rdzv-backend", "static") for a in launches}
    out = [] if backends == {"static", "c10d"} else [f"expected a static and a c10d launch, found {sorted(backends)}"]
    for argv in launches:
        opts, script, args = split_at_script(argv)
        out += torchrun_problems(opts, plan.world)
        if script is None:
            out.append("torchrun has no training script")
        elif flag_dict(parse_flags(args)).get("--model-name") != plan.model.name:
            out.append("train.py does not receive --model-name as one argument")
    return out


def check_torchtitan(files: dict[str, Path], plan: ExportPlan) -> list[str]:
    out = []
    if tomllib is not None and "torchtitan_0.2.toml" in files:  # not written for a plan 0.2.x cannot run
        try:
            cfg = tomllib.loads(files["torchtitan_0.2.toml"].read_text())
            out += torchtitan_problems(cfg, plan.world, "0.2.x TOML")
        except tomllib.TOMLDecodeError as err:
            out.append(f"torchtitan_0.2.toml: invalid TOML: {err}")
    sh = read_script(files["launch_torchtitan.sh"].read_text())
    launches = find_launch(sh, "torchrun")
    if not launches:
        return out + ["launch_torchtitan.sh: no torchrun command"]
    opts, module, args = split_at_script(launches[0])
    out += torchrun_problems(opts, plan.world)
    if module != "torchtitan.train":
        out.append(f"launch_torchtitan.sh runs {module!r}, not -m torchtitan.train")
    out += torchtitan_problems(_cli_config(args), plan.world, "0.3.0 command line", cli_args=args)
    return out


def _cli_config(args: list[str]) -> dict:
    """`--section.key value` overrides as nested sections (values kept as strings, then typed); tyro's
    bool flags `--section.key` / `--section.no-key` as True / False; 0.3.0's compile.enable_async_tensor_parallel
    checked as the 0.2.x parallelism key it replaced."""
    cfg: dict = {}
    for flag, value in parse_flags(args, {"--training.disable_cuda_graphs"}):
        if flag.startswith("--") and "." in flag:
            section, key = flag[2:].split(".", 1)
            negated = value is None and key.startswith(("no-", "no_"))
            key = (key[3:] if negated else key).replace("-", "_")
            if (section, key) == ("compile", "enable_async_tensor_parallel"):
                section = "parallelism"
            cfg.setdefault(section, {})[key] = (not negated) if value is None else _typed(value)
    for word in args:
        if word.startswith("activation-checkpoint:"):
            cfg.setdefault("activation_checkpoint", {})["mode"] = word.split(":", 1)[1]
    return cfg


def _typed(value: str):
    try:
        return int(value)
    except ValueError:
        return value


CHECKS = {"megatron": (check_megatron, ["launch_megatron.sh"]),
          "deepspeed": (check_deepspeed, ["ds_config.json", "hostfile", "launch_deepspeed.sh"]),
          "torchrun": (check_torchrun, ["launch_torchrun.sh"]),
          "torchtitan": (check_torchtitan, ["launch_torchtitan.sh"]),  # and torchtitan_0.2.toml when written
          "slurm": (check_slurm, ["launch_slurm.sbatch"])}


def validate_export(fmt: str, paths: list[Path], doc: dict) -> list[str]:
    """Problems found in the files of `fmt` ("all": every format whose files are among `paths`)."""
    plan = plan_from_doc(doc)
    files = {Path(p).name: Path(p) for p in paths}
    names = list(CHECKS) if fmt == "all" else [fmt]
    out: list[str] = []
    for name in names:
        check, needed = CHECKS[name]
        missing = [n for n in needed if n not in files]
        if missing:
            if fmt != "all":
                out.append(f"{name}: missing {', '.join(missing)}")
            continue
        out += [f"{name}: {p}" for p in check(files, plan)]
    return out
