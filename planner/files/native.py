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

The software stack (hardware_profiles/stacks) follows the config: a Megatron script runs
`megatron-core` (`nemo` with --tp-comm-overlap), a DeepSpeed JSON `deepspeed`, a torchtitan TOML
`torchtitan` (`torchtitan-eager` when torch.compile is off, its default); `check --stack` overrides it.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.files import loading
from planner.errors import UserError
from planner.frameworks.megatron import deepspeed_dialect as mds
from planner.frameworks.torchtitan import flavors
from planner.frameworks.megatron import flags as mf
from planner.frameworks.megatron import train as megatron_train
from planner.frameworks.megatron import runnable
from planner.frameworks.deepspeed import auto as ds_auto
from planner.files import accelerate_yaml, parplan_launch, shell_trainer
from planner.files import shell_trainer_load as trainer_load
from planner.frameworks.torchtitan import config_cli as titan_cli
from planner.frameworks.torchtitan import config_toml as tr
from planner.frameworks.torchtitan import config_old as titan_keys
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags
from planner.frameworks.deepspeed.partition import ds_stages
from planner.frameworks.deepspeed import config_json as dsc
from planner.frameworks.torchtitan import config_values as ttc
from planner.frameworks.torchtitan.config_values import titan_split  # noqa: F401  (re-exported)
from planner.files.shell_sbatch import fewest_nodes, nodes_note, sbatch_options
from planner.files.safe_read import parse_json, parse_toml, read_text

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
    if titan_cli.is_titan_cli(text):
        return "torchtitan"
    if "--num-layers" in text or "pretrain_gpt" in text or suffix in (".sh", ".bash", ".slurm", ".sbatch"):
        return "megatron"
    raise UserError(f"{path}: not a plan file, Megatron script/argument file (no --num-layers), DeepSpeed JSON "
                    "or torchtitan TOML")


LAUNCH_KINDS = {"deepspeed-launch": "deepspeed", "torchrun-plan": "torchrun", "torchtitan-cli": "torchtitan"}


def config_kind(path: Path) -> str:
    """The framework a native config file is for, parplan's own launch scripts included (detect alone
    does not know them)."""
    if Path(path).suffix.lower() in (".yaml", ".yml"):  # an Accelerate config: the framework it launches
        return accelerate_yaml.framework(loading.read_mapping(Path(path)))
    text = _read_text(Path(path))
    launch = parplan_launch.kind(path, text)
    if not launch and detect(Path(path), text) == "megatron" and shell_trainer.find(text, Path(path)):
        return "deepspeed"  # a Hugging Face Trainer launch: its DeepSpeed JSON is what runs
    return LAUNCH_KINDS[launch] if launch else detect(Path(path), text)


def is_native(path: Path) -> bool:
    """The CLI's routing for check: YAML is a plan file unless it is an Accelerate config; JSON is native when it has DeepSpeed's
    top-level keys and no plan-file keys; anything else (scripts, argument files, TOML) is native.
    A broken plan file therefore gets the plan loader's precise error."""
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _accelerate_file(path)
    if suffix == ".json":
        try:
            keys = set(loading.read_mapping(path))
        except UserError:
            return False
        return bool(keys & DS_TOP_KEYS) and not keys & loading.PLAN_KEYS
    return True


def _accelerate_file(path: Path) -> bool:
    """A YAML file is native when it is an Accelerate config (distributed_type, no plan-file keys)."""
    try:
        data = loading.read_mapping(path)
    except UserError:
        return False
    return accelerate_yaml.is_accelerate(data) and not set(data) & loading.PLAN_KEYS


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
    if path.suffix.lower() in (".yaml", ".yml"):  # an Accelerate config (is_native routes no other YAML here)
        data = loading.read_mapping(path)
        if not accelerate_yaml.is_accelerate(data):
            raise UserError(f"{path}: not an Accelerate config (no distributed_type) nor a plan file")
        return accelerate_yaml.load(path, data, model, cluster, nodes, flags, ReadNotes() if notes is None else notes)
    kind = detect(path, text)
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


def _read_text(path: Path) -> str:
    """The config's text through planner.files.safe_read (a regular file, size-capped while reading, UTF-8)."""
    return read_text(path)


@contextmanager
def _named(path: Path):
    """Errors of the flag readers (which see text, not files) prefixed with the file's name."""
    try:
        yield
    except UserError as err:
        raise UserError(f"{path}: {err}") from None


def _sbatch_nodes(text, path: Path) -> Optional[int]:
    """`#SBATCH --nodes N` / `-N N` (or `sbatch --nodes=N` in the script) as a count: the fewest sbatch allocates
    for a range or list (`2-4`: 2, said on stderr); None when absent or a variable. `text`: the script, or its
    sbatch options already read."""
    with _named(path):
        options = text if isinstance(text, dict) else sbatch_options(text)
        value = options.get("--nodes", "")
        if "--nodes" in options and not value:  # `-N` then another option or nothing: sbatch "requires an argument"
            raise UserError("#SBATCH --nodes/-N is given without a node count")
        count = fewest_nodes(value)
    if nodes_note(value):
        note(str(path), nodes_note(value))
    return count


def _need_cluster(cluster, path: Path, kind: str):
    if not cluster:
        raise UserError(f"{path}: --cluster is required for a {kind} config: it does not say which GPUs it "
                        "runs on (e.g. --cluster dgx-h100 [--nodes N])")
    return cluster


def _need_model(model, path: Path, kind: str) -> ModelSpec:
    if not model:
        raise UserError(f"{path}: --model is required for a {kind} config: it does not describe the model "
                        "(a preset such as llama3-8b, a spec file or a Hugging Face config.json)")
    return _load_model(model)


def _load_model(model) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else loading.load_model(model)


def _load_cluster(cluster, nodes: Optional[int] = None, gpus: Optional[int] = None) -> ClusterSpec:
    """A preset name or spec file (str), or an already loaded ClusterSpec, resized."""
    if isinstance(cluster, ClusterSpec):
        return loading.resize_cluster(cluster, nodes, gpus)
    return loading.load_cluster(cluster, nodes, gpus)


def _cluster(cluster, nodes: Optional[int], per_node: Optional[int] = None,
             script_nodes: Optional[int] = None, where: str = "", gpus: Optional[int] = None) -> ClusterSpec:
    """The cluster for a script: the command line's --nodes/--gpus win over what the script's
    environment defaults to (`NNODES=${SLURM_NNODES:-1}`), with a note saying so; else the script's
    torchrun --nnodes/--nproc-per-node (or #SBATCH --nodes)."""
    if nodes is not None and script_nodes is not None and nodes != script_nodes:
        note(where, f"--nodes {nodes} overrides the script's {script_nodes}")
    if gpus is not None:
        script_gpus = (script_nodes or 1) * per_node if per_node is not None else None
        if script_gpus is not None and script_gpus != gpus:
            note(where, f"--gpus {gpus} overrides the script's {script_gpus}")
        return _load_cluster(cluster, nodes, gpus)
    spec = _load_cluster(cluster, nodes if nodes is not None else script_nodes)
    if per_node is not None and per_node != spec.gpus_per_node:
        data = spec.model_dump()
        data["gpus_per_node"] = per_node
        spec = loading.validate(ClusterSpec, data, f"{where}: cluster with torchrun --nproc-per-node {per_node}")
    return spec


def note(where: str, message: str) -> None:
    """One warning line on stderr: something read and not priced, or a command-line override."""
    print(f"parplan: warning: {where}: {message}", file=sys.stderr)


def _sized_cluster(cluster, nodes: Optional[int], world: Optional[int], path: Path, keys: str,
                   notes: Optional[ReadNotes] = None) -> ClusterSpec:
    """The cluster sized by --nodes, else by the GPU count the config implies, else (with `notes`, which
    records the assumption) the cluster as given, else an error."""
    if nodes is not None:
        return _load_cluster(cluster, nodes)
    base = _load_cluster(cluster)
    if world is None and notes is not None:
        notes.assumed.append(f"the config does not fix the GPU count (it would with {keys}): {base.num_nodes} "
                             f"node(s) of {base.name}, {base.num_gpus} GPUs, assumed; set --nodes")
        return base
    if world is None:
        raise UserError(f"{path}: give --nodes: the config does not fix the GPU count (it would with {keys})")
    if world % base.gpus_per_node and world > base.gpus_per_node:
        raise UserError(f"{path}: the config implies {world} GPUs, not whole {base.gpus_per_node}-GPU nodes of "
                        f"{base.name!r}; give --nodes")
    if world < base.gpus_per_node:
        return _load_cluster(cluster, gpus=world)
    return _load_cluster(cluster, world // base.gpus_per_node)


def _train(data: dict, where: str) -> TrainSpec:
    """Validated, its stack (set by each reader from what the config runs) resolved to the profile."""
    return loading.train_from_data(data, f"{where}: training settings")


def _layout(data: dict, where: str) -> Layout:
    return loading.validate(Layout, data, f"{where}: layout")


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
    sbatch = _sbatch_nodes(args.shell.sbatch if args.shell else text, path)
    if script_nodes is None and sbatch is not None:
        script_nodes = sbatch  # srun torchrun --nnodes $SLURM_NNODES: the allocation's size
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
    cfg = ds_auto.resolve(cfg, flags, path, ReadNotes() if notes is None else notes)
    if notes is not None:
        notes.notes.extend(dsc.ds_unpriced(cfg))
    spec = _need_model(model, path, "DeepSpeed")
    pp, cp = dsc.ds_pipeline(cfg, path), dsc.ds_sequence_parallel(cfg, path)
    clus = _sized_cluster(_need_cluster(cluster, path, "DeepSpeed"), nodes, dsc.ds_world(cfg, path, pp * cp), path,
                          "train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps", notes)
    zero = dsc.ds_zero(cfg, path, pp)
    if clus.num_gpus % (pp * cp):
        raise UserError(f"{path}: pipeline.stages*sequence_parallel_size={pp}*{cp} does not divide the "
                        f"{clus.num_gpus} GPUs")
    dp = clus.num_gpus // (pp * cp)
    micro, gas, total = dsc.ds_batch(cfg, path, dp)
    recompute = dsc.ds_recompute(cfg, path)
    train = {"global_batch_size": total, "seq_length": spec.seq_length, "precision": dsc.ds_precision(cfg, path),
             "optimizer": dsc.ds_optimizer(cfg, path), "stack": "deepspeed", **dsc.ds_offload(cfg, path, zero)}
    overlap = dsc.ds_overlap(cfg, path)
    if overlap is not None:
        train["overlap_grad_reduce"] = overlap
    lay = _layout({"pp": pp, "cp": cp, "cp_comm": "a2a", "zero": zero, "mbs": micro, **recompute,
                   "num_microbatches": gas, "stage_layers": ds_stages(cfg, path, spec.num_layers, pp)}, str(path))
    return loading.Problem(spec, clus, _train(train, str(path)), lay)


# ---- torchtitan 0.2.x TOML ----------------------------------------------------------------------

def _torchtitan(path: Path, text: str, model: Optional[str], cluster: Optional[str], nodes,
                notes: Optional[ReadNotes] = None, precision: Optional[str] = None) -> loading.Problem:
    given, notes = notes, ReadNotes() if notes is None else notes
    launched = None
    if titan_cli.is_titan_cli(text):  # torchtitan 0.3: a launch line, its preset's defaults under the flags
        cfg, _ = titan_cli.cli_config(text, path, notes.notes)
        launched = titan_cli.launch_world(text, path)
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
    lay, dp = ttc.tt_layout(par, path, clus.num_gpus, spec.num_layers, notes.notes)
    local = ttc.tt_int(training, "local_batch_size", path, 8, "training")
    gbs = ttc.tt_int(training, "global_batch_size", path, -1, "training", minimum=-1)
    gbs = local * dp if gbs == -1 else gbs
    lay["mbs"] = ttc.tt_int(par, "pipeline_parallel_microbatch_size", path, 1) if lay["pp"] > 1 else local
    lay["recompute"] = tr.recompute(cfg, path, notes.notes)
    compile_on, loss_compiled = tr.compiled(cfg, path, notes.notes)
    train = {"global_batch_size": gbs, "seq_length": ttc.tt_int(training, "seq_len", path, 2048, "training"),
             **tr.precision(cfg, path, notes.notes), **tr.cpu_offload(cfg, path),
             **titan_cli.allocator(text, path), "stack": "torchtitan" if compile_on else "torchtitan-eager"}
    tr.require_mx_gpu(cfg, train, clus.gpu_profile, path, precision)  # named here, not by the cost model
    if loss_compiled:
        train["fused_loss"] = True
    if tr.async_tp(cfg, path, compile_on, notes.notes):
        train["tp_comm_overlap"] = True
    return loading.Problem(spec, clus, _train(train, str(path)), _layout(lay, str(path)), warnings)


def describe(kind: str) -> str:
    """One line on what each native kind needs (for --help texts)."""
    return {"megatron": "Megatron script/args: --cluster (nodes from torchrun or --nodes)",
            "deepspeed": "DeepSpeed JSON: --model and --cluster [--nodes]",
            "torchtitan": "torchtitan 0.2.x TOML: --model and --cluster [--nodes]"}[kind]
