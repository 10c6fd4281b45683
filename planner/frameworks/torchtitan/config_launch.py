"""torchtitan 0.1/0.2 launches read as torchtitan runs them: the TOML job file the line names, then the line's
overrides. Three forms: a command running torchtitan's train (`torchrun ... -m torchtitan.train --job.config_file
X.toml --parallelism.tensor_parallel_degree 8`, `torchtitan/train.py`, `train.py --job.config_file`: torchtitan's
multinode_trainer.slurm and users' own lines), torchtitan's run_train.sh itself, and a line that runs it
(`CONFIG_FILE=./train_configs/llama3_70b.toml ./run_train.sh --parallelism.tensor_parallel_degree 8`).

Sources: torchtitan 0.2.2 config/manager.py ConfigManager.parse_args (0.1.0 config_manager.py has the same code):
_maybe_load_toml opens the first `--job.config_file` / `--job.config-file` value (a path from the working
directory), _dict_to_dataclass builds the config from it, then tyro.cli(args=..., default=...) applies the whole
command line over it (CLI > TOML > defaults): `--section.key value`, `--section.key=value`, hyphens or underscores,
booleans `--section.key` / `--section.no-key`, list[str] as one comma-separated word (register_tyro_rules).
run_train.sh sits at torchtitan's repository root (in neither the 0.2.x wheel nor the sdist); its 0.2 text, kept
below as RUN_TRAIN_02, starts `torchrun --nproc_per_node=${NGPU:-8}` on one node with
CONFIG_FILE=${CONFIG_FILE:-.../debug_model.toml}, PYTORCH_ALLOC_CONF=expandable_segments:True and "$@" after its
own --job.config_file. A run_train.sh beside the script (or in the working directory) is read as written instead.

The shell is read by planner.files.shellread (assignments, `${X:-default}`, "$@", here-documents), the overrides by
config_cli's flag reader; the TOML then goes through the readers of a TOML given to check (planner.files.native).
The GPUs: torchrun's --nproc_per_node (NGPU in run_train.sh) times --nnodes, where the line says them.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.safe_read import first_file, parse_toml, read_text
from planner.files.shell_builtins import written_file
from planner.files.shellread import read_script
from planner.frameworks.megatron.flags import launches
from planner.frameworks.torchtitan import config_cli
from planner.frameworks.torchtitan.config_keys import MISSING, get

JOB_FLAGS = ("--job.config_file", "--job.config-file")
TRAINER = "torchtitan.train"  # `-m torchtitan.train`; a script: train.py (torchtitan/train.py)
RUN_TRAIN = "run_train.sh"
ALLOC_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")  # torch reads the first one set
RUN_TRAIN_02 = '''NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/llama3/train_configs/debug_model.toml"}
TRAIN_FILE=${TRAIN_FILE:-"torchtitan.train"}
TORCHFT_LIGHTHOUSE=${TORCHFT_LIGHTHOUSE:-"http://localhost:29510"}
PYTORCH_ALLOC_CONF="expandable_segments:True" \\
TORCHFT_LIGHTHOUSE=${TORCHFT_LIGHTHOUSE} \\
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
--local-ranks-filter ${LOG_RANK} --role rank --tee 3 \\
-m ${TRAIN_FILE} --job.config_file ${CONFIG_FILE} "$@"
'''


def is_job_launch(text: str) -> bool:
    """A torchtitan 0.1/0.2 launch: torchtitan's train run (with --job.config_file where the script is a bare
    train.py), or run_train.sh with CONFIG_FILE or --job.config_file; never a 0.3 line (config_cli.is_titan_cli).
    Comment lines do not count (a TOML job file parplan writes names its torchrun line in one)."""
    if config_cli.is_titan_cli(text):
        return False
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    job = any(flag in text for flag in JOB_FLAGS)
    runs_train = TRAINER in text or "torchtitan/train.py" in text or (job and "train.py" in text)
    return runs_train or (RUN_TRAIN in text and (job or "CONFIG_FILE" in text))


def job_config(text: str, path: Path, notes: list[str]) -> tuple[dict, Optional[int], dict, Path]:
    """(the TOML-like mapping torchtitan runs, the GPUs the launch starts or None, the allocator settings of its
    environment, the name messages give from here on: the script and the TOML it reads)."""
    sh = read_script(text, path if path.is_file() else None, every_branch=False)
    found = _trainer(sh) or _through_run_train(sh, path, notes)
    if found is None:
        raise UserError(f"{path}: no command runs torchtitan's train (torchrun/python -m torchtitan.train, "
                        "torchtitan/train.py) or run_train.sh")
    run, opts, args, via = found
    given, rest = _job_file(args)
    if given is None:
        raise UserError(f"{path}: torchtitan's train runs without --job.config_file: torchtitan 0.1/0.2 would take "
                        "its built-in defaults (the debug model); name the TOML job file (0.3 lines need --module "
                        "and --config)")
    toml_path, toml_text = _find(given, run, sh, path, via)
    cfg = parse_toml(toml_text, str(toml_path))
    label = Path(f"{path}: {given[:120]}")
    _, flags = config_cli._flags(rest, lists=frozenset())
    later = [raw for key, raw in flags if key.replace("-", "_") == "job.config_file" and raw != given]
    if later:  # run_train.sh's own --job.config_file comes before "$@"
        notes.append(f"{path}: --job.config_file {_said(later[0])} later on the line is not read: torchtitan loads the "
                     f"first one ({given[:120]}){'; set CONFIG_FILE instead' if via else ''}")
    flags = [(key, raw) for key, raw in flags if key.replace("-", "_") != "job.config_file"]
    config_cli.apply_flags(cfg, flags, label, notes, read=None, value=_typed(cfg))
    world, said = _world(opts)
    shown = ", ".join(f"--{k}" + ("" if v is None else f" {_said(v)}") for k, v in flags[:8])
    shown += f" and {len(flags) - 8} more" if len(flags) > 8 else ""
    notes.append(f"{path}: torchtitan 0.1/0.2 launch{f' through {via}' if via else ''}: the TOML {given[:120]} "
                 f"(--job.config_file), then {f'the overrides {shown}' if flags else 'no override'} from the line "
                 f"(ConfigManager.parse_args: the command line over the TOML){said}")
    return cfg, world, _allocator(run.env), label


def _trainer(sh) -> Optional[tuple]:
    """(shell, launcher options, train arguments, None) of the first command running torchtitan's train; a "$@"
    the shell reader left as written is the script's own arguments (none for a script read on its own)."""
    for launcher, opts, script, args, *_ in launches(sh):  # (a fifth item: the words before the launcher)
        if script == TRAINER or posixpath.basename(script) == "train.py":
            args = [a for w in args for a in (sh.positional if w in ("$@", "${@}", "$*", "${*}") else [w])]
            return sh, opts if launcher == "torchrun" else None, args, None
    return None


def _through_run_train(sh, path: Path, notes: list[str]) -> Optional[tuple]:
    """The train command of the run_train.sh a command of `sh` runs, read with that command's environment (the
    script's exports and the command's own VAR=value prefixes) and arguments ("$@")."""
    for words in sh.commands:
        at = next((i for i, w in enumerate(words) if posixpath.basename(w) == RUN_TRAIN), None)
        if at is None:
            continue
        name = words[at]
        places = [Path(name)] if posixpath.isabs(name) else [Path(d) / name for d in _folders(sh)]
        script = first_file(places, f"{path}: {name}")
        if script is None:
            notes.append(f"{path}: {name} is not beside the script or in the working directory: torchtitan 0.2's "
                         "run_train.sh assumed (NGPU 8 on one node, CONFIG_FILE its debug_model.toml)")
        env = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sh.env.items()
                      if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k))
        inner = read_script(env + (read_text(script) if script else RUN_TRAIN_02), script, words[at + 1:],
                            every_branch=False)
        found = _trainer(inner)
        if found is None:
            raise UserError(f"{path}: {name} runs no torchtitan train command (torchrun ... -m torchtitan.train)")
        return found[:3] + (name,)
    return None


def _job_file(args: list[str]) -> tuple[Optional[str], list[str]]:
    """(the first --job.config_file value, as _maybe_load_toml takes it, or None; the other arguments)."""
    for i, word in enumerate(args):
        flag, eq, value = word.partition("=")
        if flag in JOB_FLAGS and eq:
            return value, args[:i] + args[i + 1:]
        if word in JOB_FLAGS and i + 1 < len(args):
            return args[i + 1], args[:i] + args[i + 2:]
    return None, args


def _folders(sh) -> list[str]:
    """Where a relative path is looked for: the script's folder, then the working directory."""
    return list(dict.fromkeys(os.path.abspath(d) for d in [*([sh.script_dir] if sh.script_dir else []), "."]))


def _find(given: str, run, sh, path: Path, via: Optional[str]) -> tuple[Path, str]:
    """(path, text) of the TOML: written by the script (a here-document), else beside it, else in the working
    directory; a UserError naming it (and where CONFIG_FILE came from) when it is nowhere."""
    said = f"{path}: --job.config_file {given[:120]}"
    if run.scalars.get("CONFIG_FILE") == given and "CONFIG_FILE" not in sh.env:
        said += (f" ({via or path.name}'s default CONFIG_FILE; name your job file: CONFIG_FILE=./train_configs/"
                 f"X.toml {via or './' + path.name})")
    if "$" in given or "`" in given:
        raise UserError(f"{said}: the script leaves this variable unset")
    body = written_file(run, given)
    body = body if body is not None else written_file(sh, given)
    if body is not None:
        return Path(given), body
    outer = _folders(sh)
    folders = outer + [d for d in _folders(run) if d not in outer]
    places = [Path(given)] if posixpath.isabs(given) else [Path(d) / given for d in folders]
    found = first_file(places, said)
    if found is None:
        where = "" if posixpath.isabs(given) else " beside the script or in the working directory"
        raise UserError(f"{said}: no such file{where} ({', '.join(map(str, places))[:300]})")
    return Path(given), read_text(found)


def _typed(cfg: dict):
    """tyro's reading of a flag's word, by the type of the TOML's value where it has one (a str stays a str,
    a list is comma-separated, a float a float); else config_cli's guess (ints, true/false)."""
    def value(section: str, key: str, raw, path: Path):
        old = get(cfg, f"{section}.{key}")
        if raw is None or old is MISSING or isinstance(old, bool) or old is None:
            return config_cli._value(section, key, raw, path)
        if isinstance(old, list) or key in config_cli.LIST_KEYS:
            return [part for part in str(raw).split(",") if part]
        if isinstance(old, str):
            return raw
        try:
            return type(old)(raw)
        except ValueError:
            return raw  # left for the readers, which name the key and the value
    return value


def _world(opts: Optional[list[str]]) -> tuple[Optional[int], str]:
    """(GPUs torchrun starts: --nproc_per_node x --nnodes (1 when unsaid), or None when either is not a number
    the line fixes; the words for the note)."""
    if opts is None:
        return None, ""
    per = _option(opts, ("--nproc_per_node", "--nproc-per-node"))
    nodes = _option(opts, ("--nnodes",))
    if not isinstance(per, int) or nodes == "":
        return None, ""
    count = per * (nodes or 1)
    return count, f"; torchrun starts {count} GPUs ({per} per node on {nodes or 1} node(s); --nodes overrides)"


def _option(opts: list[str], names: tuple[str, ...]):
    """A torchrun count option as a number; None when absent, '' when not a number (a variable, `gpu`, 1:4)."""
    for i, word in enumerate(opts):
        for flag in names:
            raw = word.split("=", 1)[1] if word.startswith(flag + "=") else (
                opts[i + 1] if word == flag and i + 1 < len(opts) else None)
            if raw is not None:
                return int(raw) if raw.isdigit() and 1 <= int(raw) <= 1024 else ""
    return None


def _said(value) -> str:
    """A flag's words as the line gave them, cut for a note."""
    text = " ".join(value) if isinstance(value, list) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _allocator(env: dict) -> dict:
    """expandable_segments from the train command's environment (config_cli.expandable)."""
    conf = next((env[name] for name in ALLOC_VARS if name in env), "")
    return config_cli.expandable(conf)


__all__ = ["RUN_TRAIN_02", "is_job_launch", "job_config"]
