"""`parplan check` on native launch configs: a Megatron-LM script or argument file, a DeepSpeed JSON,
or a torchtitan 0.2.x TOML, read into a planner.files.loading.Problem.

Source: benchmarks/data/launch_formats.md, sections "Megatron-LM" (flags), "DeepSpeed" (keys and the
batch rule train_batch_size == micro * GAS * DP) and "torchtitan" (keys of the 0.2.x job file); the
reverse of the mappings in planner/exporters/. A config says nothing of the GPUs it runs on, so
--cluster is always needed; DeepSpeed and torchtitan configs carry no model shape, so they also need
--model. Every problem is a UserError naming the flag or key and its value.
A DeepSpeed JSON's Hugging Face "auto" values are filled by planner.frameworks.deepspeed.auto (check's flags, else
TrainingArguments' defaults, each named); its offload sections and fp32 (no bf16/fp16) are read into the
TrainSpec (costmodels.offload prices them). torchtitan's converters, compile, async TP and activation
checkpointing are read by planner.frameworks.torchtitan.config_toml, its 0.3 launch lines by planner.frameworks.torchtitan.config_cli.

Other tools' YAML and launch lines go to planner.files.finetune_yaml (Axolotl, LLaMA-Factory: read as the Trainer
run they start) and planner.files.other_tools (torchtune, NeMo, Nanotron, Levanter, MaxText, ColossalAI: refused).

The software stack (hardware_profiles/stacks) follows the config: a Megatron script runs
`megatron-core` (`nemo` with --tp-comm-overlap), a DeepSpeed JSON `deepspeed`, a torchtitan TOML
`torchtitan` (`torchtitan-eager` when torch.compile is off, its default); `check --stack` overrides it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from costmodels.model_spec import ModelSpec
from planner.files import loading
from planner.errors import UserError
from planner.frameworks.megatron import bridge_yaml
from planner.frameworks.megatron import deepspeed_dialect as mds
from planner.frameworks.torchtitan import flavors
from planner.frameworks.megatron import flags as mf
from planner.frameworks.megatron import train as megatron_train
from planner.frameworks.megatron import runnable
from planner.frameworks.deepspeed import auto as ds_auto
from planner.files import accelerate_yaml, finetune_yaml, other_tools, other_tools_launch, parplan_launch, shell_trainer
from planner.files import shell_trainer_load as trainer_load
from planner.frameworks.torchtitan import config_cli as titan_cli
from planner.frameworks.torchtitan import config_launch as titan_launch
from planner.frameworks.torchtitan import config_toml as tr
from planner.frameworks.torchtitan import config_old as titan_keys
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags
from planner.frameworks.deepspeed.partition import ds_stages
from planner.frameworks.deepspeed import config_json as dsc
from planner.frameworks.deepspeed import persistence
from planner.frameworks.torchtitan import config_values as ttc
from planner.frameworks.torchtitan.config_values import titan_split  # noqa: F401  (re-exported)
from planner.files.safe_read import parse_json, parse_toml
# the shared helpers, kept reachable here (planner.files.accelerate_yaml uses native._cluster, native._train, ...)
from planner.files.native_sizes import (_cluster, _layout, _load_cluster, _load_model, _named,  # noqa: F401
                                        _need_cluster, _need_model, _read_text, _sbatch_gpus, _sbatch_nodes,
                                        _sized_cluster, _train, note)

__all__ = ["KINDS", "describe", "detect", "is_native", "load_native", "load_native_text", "titan_split"]

KINDS = ("megatron", "deepspeed", "torchtitan")
DS_TOP_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
               "zero_optimization"}


def detect(path: Path, text: str) -> str:
    """Which native format `text` is: by suffix first, then by content."""
    suffix = path.suffix.lower()
    stripped = text.lstrip()
    if suffix == ".toml" or (not stripped.startswith("{") and "[parallelism]" in text):
        return "torchtitan"
    if suffix == ".json" or stripped.startswith("{"):
        return "deepspeed"
    if titan_cli.is_titan_cli(text) or titan_launch.is_job_launch(text):
        return "torchtitan"
    if "--num-layers" in text or "pretrain_gpt" in text or suffix in (".sh", ".bash", ".slurm", ".sbatch"):
        return "megatron"
    raise UserError(f"{path}: not a plan file, Megatron script/argument file (no --num-layers), DeepSpeed JSON "
                    "or torchtitan TOML")


LAUNCH_KINDS = {"deepspeed-launch": "deepspeed", "torchrun-plan": "torchrun", "torchtitan-cli": "torchtitan"}


def config_kind(path: Path) -> str:
    """The framework a native config file is for, parplan's own launch scripts included (detect alone
    does not know them)."""
    if Path(path).suffix.lower() in (".yaml", ".yml"):  # an Accelerate, Axolotl, LLaMA-Factory or Bridge config
        data = loading.read_mapping(Path(path))
        if bridge_yaml.is_bridge(data):
            return "megatron"
        return finetune_yaml.framework(data) if other_tools.yaml_tool(data) else accelerate_yaml.framework(data)
    text = _read_text(Path(path))
    launch = parplan_launch.kind(path, text)
    kind = LAUNCH_KINDS[launch] if launch else detect(Path(path), text)
    tool = other_tools.find_launch(text, Path(path)) if kind == "megatron" and not launch else None
    if tool:  # an axolotl / llamafactory-cli line: its YAML's framework
        return finetune_yaml.launch_framework(tool, path)
    if kind == "megatron" and not launch and shell_trainer.find(text, Path(path)):
        return "deepspeed"  # a Hugging Face Trainer launch: its DeepSpeed JSON is what runs
    return kind


def is_native(path: Path) -> bool:
    """The CLI's routing for check: YAML is a plan file unless it is an Accelerate config or another tool's
    (other_tools.yaml_tool); JSON is native when it has DeepSpeed's top-level keys and no plan-file keys; anything
    else (scripts, argument files, TOML) is native. A broken plan file gets the plan loader's precise error."""
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _yaml_file(path)
    if suffix == ".json":
        try:
            keys = set(loading.read_mapping(path))
        except UserError:
            return False
        return bool(keys & DS_TOP_KEYS) and not keys & loading.PLAN_KEYS
    return not (suffix == "" and _plan_json(path))  # `plan --save` output renamed without its .json: still a plan


def _plan_json(path: Path) -> bool:
    """A file without a suffix that opens as a JSON mapping with a plan file's model, cluster and train."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as head:
            if not head.read(4096).lstrip().startswith(b"{"):  # not JSON: a script, read once by its reader
                return False
    except OSError:
        return False
    try:
        return {"model", "cluster", "train"} <= set(loading.read_mapping(path))
    except UserError:
        return False


def _yaml_file(path: Path) -> bool:
    """A YAML file is native when it is an Accelerate config (distributed_type, no plan-file keys) or another
    tool's config (read or refused by name)."""
    try:
        data = loading.read_mapping(path)
    except UserError:
        return False
    accelerate = accelerate_yaml.is_accelerate(data) and not set(data) & loading.PLAN_KEYS
    return accelerate or bridge_yaml.is_bridge(data) or other_tools.yaml_tool(data) is not None


def load_native(path: Path, model: Optional[str], cluster: Optional[str], nodes: Optional[int],
                flags: TrainerFlags = TrainerFlags(), notes: Optional[ReadNotes] = None,
                gpus: Optional[int] = None) -> loading.Problem:
    """Read a native launch config into specs and a layout (dp derived).

    flags: check's --micro-batch/--grad-accum/--global-batch/--precision, which fill a DeepSpeed JSON's
    "auto" values (planner.frameworks.deepspeed.auto); notes: receives one line per assumption made and per setting read but not priced.

    model: preset/spec file (needed for DeepSpeed and torchtitan; overrides a Megatron script's shape);
    cluster: preset or spec file (always needed); nodes: overrides the cluster's node count (a
    Megatron script's torchrun --nnodes, or #SBATCH --nodes, is used when given)."""
    path = Path(path)
    text = _read_text(path)
    launch = parplan_launch.kind(path, text)  # parplan's own DeepSpeed, torchrun and torchtitan 0.3 scripts
    if launch:
        return parplan_launch.load(launch, path, text, model, cluster, nodes, load_native_text)
    read = ReadNotes() if notes is None else notes
    if path.suffix.lower() in (".yaml", ".yml"):  # an Accelerate or another tool's config (is_native routes these)
        data = loading.read_mapping(path)
        if bridge_yaml.is_bridge(data):  # a Megatron-Bridge ConfigContainer: the Megatron arguments it sets
            stated = None if nodes or gpus else bridge_yaml.stated_gpus(data)
            sized = (f"the GPU count, {stated[0]}, from {stated[1]}" if stated else
                     "the GPU count is not in it (torchrun's): --nodes/--gpus give it, else the cluster's size")
            note(str(path), "read as a Megatron-Bridge ConfigContainer YAML (each field from the section that owns "
                 f"it, as the Megatron-LM argument of the same name); {sized}")
            return load_native_text(bridge_yaml.arguments(data, str(path)), "megatron", model, cluster, nodes, path,
                                    flags, notes, stated[0] if stated else gpus)
        return finetune_yaml.load_yaml(path, model, cluster, nodes, flags, read, load_native_text)
    if path.suffix.lower() == ".py":  # a NeMo 2 / Megatron-Bridge recipe is refused by name, with its estimate
        other_tools_launch.refuse_recipe(path, text, cluster)
    kind = detect(path, text)
    tool = other_tools.find_launch(text, path) if kind == "megatron" else None
    if tool:  # axolotl / llamafactory-cli: the YAML it names, read; other tools' launches refused by name
        return finetune_yaml.load_launch(tool, path, model, cluster, nodes, flags, read, load_native_text)
    trainer = shell_trainer.find(text, path if path.is_file() else None) if kind == "megatron" else None
    if trainer is not None:  # a Hugging Face Trainer under deepspeed/torchrun/accelerate: its DeepSpeed JSON
        return trainer_load.load(path, trainer, model, cluster, nodes, flags, notes, load_native_text, _cluster)
    prob = load_native_text(text, kind, model, cluster, nodes, path, flags, notes, gpus)
    seq = parplan_launch.seq_length_beside(path) if kind == "deepspeed" else None
    if kind == "deepspeed" and seq is None and flags.seq_len is None and notes is not None:
        notes.assumed.append(ds_auto.seq_note(prob.train.seq_length))
    return parplan_launch.with_seq(prob, seq)  # a DeepSpeed JSON has no sequence length: its launcher's


def load_native_text(text: str, kind: str, model, cluster, nodes: Optional[int],
                     path: Path = Path("config"), flags: TrainerFlags = TrainerFlags(),
                     notes: Optional[ReadNotes] = None, gpus: Optional[int] = None) -> loading.Problem:
    """load_native on text already read; `model`/`cluster` may also be loaded specs. Without `notes` a
    config that does not fix its GPU count needs --nodes (with them, the cluster's size is assumed and said).
    `gpus` (--gpus) is honoured for Megatron scripts."""
    if kind == "megatron":
        return _megatron(path, text, model, cluster, nodes, gpus, flags.precision)
    if kind == "deepspeed":
        return _deepspeed(path, text, model, cluster, nodes, flags, notes)
    return _torchtitan(path, text, model, cluster, nodes, notes, flags.precision)


# ---- Megatron -----------------------------------------------------------------------------------

def _megatron(path: Path, text: str, model: Optional[str], cluster: Optional[str], nodes,
              gpus: Optional[int] = None, precision: Optional[str] = None) -> loading.Problem:
    """A Megatron-LM (or Megatron-DeepSpeed) launch script. With --model its shape flags are not read;
    `precision`: check's --precision, which replaces the script's (so its --fp8-format needs no FP8 GPU)."""
    with _named(path):
        args = mf.read_megatron(text, path if path.is_file() else None)
    warnings = args.shell.warnings if args.shell else []
    for warning in warnings:  # before any error: a file not found beside the script explains a missing flag
        note(str(path), warning)
    shown = len(warnings)
    if args.launcher is None and not args.has("--num-layers") and not model:
        raise UserError(f"{path}: no Megatron launch found: no command runs a training script and no --num-layers "
                        "is given" + (" (see the warnings above)" if warnings else ""))
    with _named(path):
        shape = None if model else mf.model_data(args)
    if model and args.has("--num-layers"):
        note(str(path), f"--model {str(model)[:60]} overrides the script's model flags (--num-layers "
             f"{args.str('--num-layers')}, --hidden-size {args.str('--hidden-size')}, ...)")
    for warning in warnings[shown:]:
        note(str(path), warning)
    spec = _load_model(model) if model else loading.validate(
        ModelSpec, {"name": path.stem, **shape}, f"{path}: model from flags")
    if shape is None:
        shape = {"num_layers": spec.num_layers, "num_experts": spec.num_experts}
    with _named(path):
        script_nodes, per_node = mf.torchrun_size(args.torchrun)
        if args.launcher == "deepspeed":
            script_nodes, per_node = mds.launcher_size(args.launcher_opts)
    options = args.shell.sbatch if args.shell else text
    sbatch = _sbatch_nodes(options, path)
    if script_nodes is None and sbatch is not None:
        script_nodes = sbatch  # srun torchrun --nnodes $SLURM_NNODES: the allocation's size
    elif script_nodes is not None and sbatch is not None and script_nodes != sbatch and nodes is None:
        note(str(path), f"#SBATCH allocates {sbatch} node(s) but the launch starts {script_nodes}: the launch's "
             f"{script_nodes} are priced (--nodes overrides)")
    if per_node is None and sbatch is not None:
        per_node = _sbatch_gpus(options, path)  # srun python: one task per GPU of the allocation
    clus = _cluster(_need_cluster(cluster, path, "Megatron"), nodes, per_node, script_nodes, str(path), gpus)
    with _named(path):
        lay_data, train = mf.layout_data(args, shape), megatron_train.train_data(args)
        mds.legacy(args, lay_data, train)
        if mds.is_megatron_deepspeed(args):
            mds.apply(args, lay_data, train, lambda m: note(str(path), m), shape["num_layers"], clus.num_gpus)
    lay = _layout(lay_data, str(path))
    sized = any(n is not None for n in (nodes, gpus, script_nodes))
    runnable.require(args, spec, lay, clus, str(path), not model, sized, precision)
    train.setdefault("stack", "nemo" if train.get("tp_comm_overlap") else "megatron-core")
    why = tr.mx_refusal(train, clus.gpu_profile, precision)  # the cost model's refusal, naming the file and flag
    if why:
        raise UserError(f"{path}: --fp8-recipe mxfp8: {why}; use --fp8-recipe tensorwise or blockwise")
    if train.get("fp8_recipe") == "nvfp4" and (precision or train.get("precision")) == "fp8" \
            and clus.gpu_profile.fp4_tflops is None:  # costmodels.timing refuses it too, without the flag
        raise UserError(f"{path}: --fp4-format: NVFP4 needs FP4 tensor cores (Blackwell): gpu "
                        f"{clus.gpu_profile.name!r} has none; use --fp8-format")
    if "global_batch_size" not in train:  # a DeepSpeed JSON's gradient_accumulation_steps sets num_microbatches
        dp = clus.num_gpus // (lay.tp * lay.cp * lay.pp)
        train["global_batch_size"] = lay.mbs * dp * (lay.num_microbatches or 1)
    return loading.Problem(spec, clus, _train(train, str(path)), lay, mf.unpriced_warnings(args))


# ---- DeepSpeed ----------------------------------------------------------------------------------

def _deepspeed(path: Path, text: str, model: Optional[str], cluster: Optional[str], nodes,
               flags: TrainerFlags = TrainerFlags(), notes: Optional[ReadNotes] = None) -> loading.Problem:
    cfg = parse_json(text, str(path))
    if not isinstance(cfg, dict) or not DS_TOP_KEYS & set(cfg):
        raise UserError(f"{path}: not a DeepSpeed config (none of {sorted(DS_TOP_KEYS)})")
    read = ReadNotes() if notes is None else notes
    cfg = ds_auto.resolve(cfg, flags, path, read)
    read.notes.extend(dsc.ds_unpriced(cfg))
    spec = _need_model(model, path, "DeepSpeed")
    read.notes.extend(persistence.apply(cfg, path, spec))  # the share of weights kept whole, from the model
    pp, cp = dsc.ds_pipeline(cfg, path), dsc.ds_sequence_parallel(cfg, path)
    world, given = dsc.ds_world(cfg, path, pp * cp), _load_cluster(_need_cluster(cluster, path, "DeepSpeed"))
    clus = _sized_cluster(given, nodes, world, path,
                          "train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps", notes)
    if nodes is None and world is not None:  # the batch keys sized the cluster: said
        read.assumed.append(dsc.ds_world_note(cfg, path, pp * cp, clus, given))
    zero = dsc.ds_zero(cfg, path, pp)
    if clus.num_gpus % (pp * cp):
        raise UserError(f"{path}: pipeline.stages*sequence_parallel_size={pp}*{cp} does not divide the "
                        f"{clus.num_gpus} GPUs")
    dp = clus.num_gpus // (pp * cp)
    micro, gas, total = dsc.ds_batch(cfg, path, dp)
    recompute, precision = dsc.ds_recompute(cfg, path), dsc.ds_precision(cfg, path)
    if dsc.autocast_precision(cfg, path):
        read.notes.append(f"torch_autocast: {precision} autocast over fp32 weights, priced as {precision} mixed "
                          "precision (its activations and GEMMs; about the same 16 B of state per parameter)")
    if precision == "fp32" and flags.precision is None and not {"bf16", "bfloat16", "fp16"} & set(cfg):
        read.assumed.append("precision fp32: no bf16 or fp16 section, so DeepSpeed trains in the model's dtype (fp32 "
                            "unless the script loads it in bf16: then --precision bf16)")
    train = {"global_batch_size": total, "seq_length": spec.seq_length, "precision": precision,
             "optimizer": dsc.ds_optimizer(cfg, path), "stack": "deepspeed", **dsc.ds_offload(cfg, path, zero),
             **dsc.ds_sub_group(cfg, path, _largest_weight_elements(spec) / dp),
             "overlap_grad_reduce": dsc.ds_overlap(cfg, path, zero, pp)}
    lay = _layout({"pp": pp, "cp": cp, "cp_comm": "a2a", "zero": zero, "mbs": micro, **recompute,
                   "num_microbatches": gas, "stage_layers": ds_stages(cfg, path, spec.num_layers, pp)}, str(path))
    return loading.Problem(spec, clus, _train(train, str(path)), lay)


def _largest_weight_elements(spec) -> float:
    """Elements of the model's largest parameter tensor: the embedding (or head) matrix, a dense MLP's matrix
    (Hugging Face models keep gate, up and down projections apart), or an MoE layer's fused gate_up_proj of every
    expert (transformers 5 keeps the experts in 3-D tensors, E x 2 f_e x h)."""
    experts = spec.num_experts * 2 * spec.moe_ffn_hidden_size * spec.hidden_size if spec.is_moe else 0
    return float(max(spec.vocab_size * spec.hidden_size, spec.hidden_size * spec.ffn_hidden_size, experts))


# ---- torchtitan 0.2.x TOML ----------------------------------------------------------------------

def _torchtitan(path: Path, text: str, model: Optional[str], cluster: Optional[str], nodes,
                notes: Optional[ReadNotes] = None, precision: Optional[str] = None) -> loading.Problem:
    given, notes = notes, ReadNotes() if notes is None else notes
    launched, alloc = None, titan_cli.allocator(text, path)
    if titan_cli.is_titan_cli(text):  # torchtitan 0.3: a launch line, its preset's defaults under the flags
        cfg, _ = titan_cli.cli_config(text, path, notes.notes)
        launched = titan_cli.launch_world(text, path)
    elif titan_launch.is_job_launch(text):  # 0.1/0.2: the TOML its --job.config_file names, the line's overrides
        cfg, launched, alloc, path = titan_launch.job_config(text, path, notes.notes)
    else:
        cfg = parse_toml(text, str(path))
    spec = _load_model(flavors.model_for(cfg, model, path, notes.notes))  # --model, else torchtitan's preset
    warnings = []
    if not titan_cli.is_titan_cli(text):  # pre-0.1.0 keys moved, unknown keys named (frameworks/torchtitan)
        cfg, warnings = titan_keys.read(cfg, path, spec.num_layers, notes.notes)
    par, training = ttc.section(cfg, "parallelism", path), ttc.section(cfg, "training", path)
    world = ttc.tt_world(par, path) or launched
    clus = _sized_cluster(_need_cluster(cluster, path, "torchtitan"), nodes, world, path,
                          "data_parallel_shard_degree, or torchrun --nproc_per_node", given)
    lay, dp = ttc.tt_layout(par, path, clus.num_gpus, spec.num_layers, notes.notes, training)
    if spec.is_moe:  # routed experts split over tp when ep = 1 (0.3: models/common/moe_sharding.py, dense {TP})
        lay["etp"] = (lay["tp"] if lay["ep"] == 1 else 1) if titan_cli.is_titan_cli(text) else \
            ttc.tt_expert_tp(par, path, lay["tp"], lay["ep"])
    local = ttc.tt_int(training, "local_batch_size", path, 8, "training")
    gbs = ttc.tt_int(training, "global_batch_size", path, -1, "training", minimum=-1)
    gbs = local * dp if gbs == -1 else gbs
    lay["mbs"] = ttc.tt_int(par, "pipeline_parallel_microbatch_size", path, 1) if lay["pp"] > 1 else local
    lay.update(tr.recompute_fields(cfg, path, lay, spec.num_layers, notes.notes))  # a layer period: block recompute
    compile_on, loss_compiled = tr.compiled(cfg, path, notes.notes)
    train = {"global_batch_size": gbs, "seq_length": ttc.tt_int(training, "seq_len", path, 2048, "training"),
             **tr.precision(cfg, path, notes.notes), **tr.cpu_offload(cfg, path),
             **alloc, "stack": "torchtitan" if compile_on else "torchtitan-eager"}
    if not titan_cli.is_titan_cli(text):  # 0.1-0.2 without FSDP: autocast, or fp32 under TP/PP
        train.update(tr.amp_precision(cfg, path, train, lay, notes.notes))
    tr.require_mx_gpu(cfg, train, clus.gpu_profile, path, precision)  # named here, not by the cost model
    if loss_compiled:
        train["fused_loss"] = True
    if titan_cli.is_titan_cli(text):  # 0.3's ChunkedLossWrapper and CUDA graphs; 0.1-0.2 have neither
        train.update(tr.loss_chunks(cfg, path, train["seq_length"] // lay["cp"]))
        titan_cli.cuda_graphs(cfg, path, notes.notes)
    if tr.async_tp(cfg, path, compile_on, notes.notes):
        train["tp_comm_overlap"] = True
    return loading.Problem(spec, clus, _train(train, str(path)), _layout(lay, str(path)), warnings)


def describe(kind: str) -> str:
    """One line on what each native kind needs (for --help texts)."""
    return {"megatron": "Megatron script/args: --cluster (nodes from torchrun or --nodes)",
            "deepspeed": "DeepSpeed JSON: --model and --cluster [--nodes]",
            "torchtitan": "torchtitan 0.2.x TOML: --model and --cluster [--nodes]"}[kind]
