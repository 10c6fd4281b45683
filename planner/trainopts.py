"""Training-run options of plan, estimate, check and export (report: the stack only): the software
stack (`--stack NAME` or `--stack-file PROFILE.yaml`) and the TrainSpec switches (`--[no-]tp-comm-overlap`,
`--[no-]overlap-grad-reduce`, `--[no-]flash-attention`, `--optimizer`, `--grad-dtype`, `--fp8-recipe`,
`--moe-router-load-balancing-type`, `--[no-]moe-router-enable-expert-bias`).

An option not given keeps the base's value (the plan file's, the native config's, or TrainSpec's
default). Every TrainSpec that leaves `apply` is resolved (hardware_profiles.resolve_train): its
stack is a profile, by default the fitted `megatron-core`, never the built-in fallback.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from planner.errors import UserError

# The cost model, the presets and the framework tables are imported inside the functions below: this
# module's options and TrainOptions are read by `parplan --help` and `models`, which need none of them.
if TYPE_CHECKING:
    from rich.table import Table

    from costmodels.stack import Stack
    from costmodels.train_spec import TrainSpec

STACK_OPT = typer.Option(None, "--stack", help="Software stack whose mechanisms and fitted efficiencies the time "
                         "model uses (parplan hardware lists them); default: the plan's, else megatron-core.")
STACK_FILE_OPT = typer.Option(None, "--stack-file", help="A stack profile (YAML/JSON with the fields of "
                              "`parplan schema Stack`) instead of a named one.")
TP_OVERLAP_OPT = typer.Option(None, "--tp-comm-overlap/--no-tp-comm-overlap",
                              help="TP communication hidden behind GEMMs; default: the stack's.", show_default=False)
GRAD_OVERLAP_OPT = typer.Option(None, "--overlap-grad-reduce/--no-overlap-grad-reduce",
                                help="Gradient reduction overlaps backward; default: the stack's.", show_default=False)
EP_OVERLAP_OPT = typer.Option(None, "--overlap-moe-expert-parallel-comm/--no-overlap-moe-expert-parallel-comm",
                              help="MoE all-to-all hidden behind another micro-batch's compute (Megatron-Core's flag "
                              "of that name, DualPipe); default off.", show_default=False)
BALANCE_OPT = typer.Option(None, "--moe-router-load-balancing-type",
                           help="MoE router balancing, which sets the busiest expert-parallel rank's load: aux_loss, "
                           "seq_aux_loss, global_aux_loss, sinkhorn, none or forced (Megatron's flag; forced = "
                           "--moe-router-force-load-balancing); default aux_loss.")
EXPERT_BIAS_OPT = typer.Option(None, "--moe-router-enable-expert-bias/--no-moe-router-enable-expert-bias",
                               help="Aux-loss-free balancing by a per-expert routing bias (DeepSeek-V3); default off.",
                               show_default=False)
FLASH_OPT = typer.Option(None, "--flash-attention/--no-flash-attention",
                         help="Fused attention (no s x s scores kept); default on.", show_default=False)
OPTIMIZER_OPT = typer.Option(None, "--optimizer", help="adam or sgd (default adam).")
GRAD_DTYPE_OPT = typer.Option(None, "--grad-dtype", help="fp32, bf16 or fp16 (default: the weights' dtype).")
FRAMEWORK_OPT = typer.Option("any", "--framework", help="megatron, deepspeed, torchtitan, fsdp or any: search "
                              "(or check) only what that framework runs, priced with its stack; its launch files "
                              "are the export default.")
FP8_RECIPE_OPT = typer.Option(None, "--fp8-recipe", help="With --precision fp8: tensorwise, rowwise, mxfp8, "
                              "blockwise or nvfp4 (FP4 GEMMs, Blackwell; default tensorwise).")


@dataclass(frozen=True)
class TrainOptions:
    """What the user set on the command line (None = not given)."""

    stack: Optional[str] = None
    stack_file: Optional[Path] = None
    tp_comm_overlap: Optional[bool] = None
    overlap_grad_reduce: Optional[bool] = None
    ep_comm_overlap: Optional[bool] = None
    moe_load_balancing: Optional[str] = None
    moe_expert_bias: Optional[bool] = None
    flash_attention: Optional[bool] = None
    optimizer: Optional[str] = None
    grad_dtype: Optional[str] = None
    fp8_recipe: Optional[str] = None
    framework: Optional[str] = None  # --framework (planner.search.frameworks); None or "any": no restriction

    def train_fields(self) -> dict[str, Any]:
        """The TrainSpec fields given (stack and framework excluded)."""
        names = [f.name for f in fields(self) if f.name not in ("stack", "stack_file", "framework")]
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


# (parameter name, option, annotation) of every training option, in TrainOptions' order
TRAIN_PARAMS = [("stack", STACK_OPT, Optional[str]), ("stack_file", STACK_FILE_OPT, Optional[Path]),
                ("tp_comm_overlap", TP_OVERLAP_OPT, Optional[bool]),
                ("overlap_grad_reduce", GRAD_OVERLAP_OPT, Optional[bool]),
                ("ep_comm_overlap", EP_OVERLAP_OPT, Optional[bool]),
                ("moe_load_balancing", BALANCE_OPT, Optional[str]),
                ("moe_expert_bias", EXPERT_BIAS_OPT, Optional[bool]),
                ("flash_attention", FLASH_OPT, Optional[bool]), ("optimizer", OPTIMIZER_OPT, Optional[str]),
                ("grad_dtype", GRAD_DTYPE_OPT, Optional[str]), ("fp8_recipe", FP8_RECIPE_OPT, Optional[str]),
                ("framework", FRAMEWORK_OPT, str)]


def with_train_options(fn):
    """A Typer command taking every training option above: the command's own signature gains them
    (Typer reads `__signature__`) and `fn` receives them together as `opts: TrainOptions`."""
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.name != "opts"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
             for name, option, kind in TRAIN_PARAMS]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        values = {name: kwargs.pop(name) for name, _, _ in TRAIN_PARAMS if name in kwargs}
        return fn(*args, opts=TrainOptions(**values), **kwargs)

    command.__signature__ = sig.replace(parameters=own + added)
    return command


def load_stack_name(name: str) -> Stack:
    """`--stack NAME`: a shipped profile; unknown names list the known ones with a close match."""
    import hardware_profiles as hp

    try:
        return hp.load_stack(name)
    except hp.UnknownPresetError:
        names = hp.list_stacks()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UserError(f"--stack: unknown stack {name!r}{hint} (known: {', '.join(names)})") from None


def load_stack_file(path: Path) -> Stack:
    """`--stack-file PROFILE`: a Stack mapping, validated strictly (errors name the field)."""
    from costmodels.stack import Stack
    from planner.files import loading

    return loading.validate(Stack, loading.read_mapping(Path(path)), f"--stack-file {path}: stack")


def chosen_stack(opts: TrainOptions) -> Optional[Stack]:
    """The stack the options ask for, or None when neither --stack nor --stack-file is given."""
    if opts.stack is not None and opts.stack_file is not None:
        raise UserError(f"give --stack or --stack-file, not both (--stack {opts.stack}, --stack-file {opts.stack_file})")
    if opts.stack_file is not None:
        return load_stack_file(opts.stack_file)
    return load_stack_name(opts.stack) if opts.stack is not None else None


OPTION_OF = {"optimizer": "--optimizer", "grad_dtype": "--grad-dtype", "fp8_recipe": "--fp8-recipe",
             "precision": "--precision", "moe_load_balancing": "--moe-router-load-balancing-type"}


def choices(field: str) -> tuple[str, ...]:
    """The words a TrainSpec field of Literal type accepts (empty for other types)."""
    from costmodels.train_spec import TrainSpec

    found: list[str] = []
    stack = [TrainSpec.model_fields[field].annotation]
    while stack:
        kind = stack.pop()
        args = typing.get_args(kind)
        if typing.get_origin(kind) is typing.Literal:
            found += [a for a in args if isinstance(a, str)]
        else:
            stack += list(args)
    return tuple(found)


def check_choice(field: str, value: Optional[str]) -> None:
    """A word option (`--fp8-recipe`, `--optimizer`, `--grad-dtype`, `--precision`) names one of its
    choices; else one line naming the option, the value, the choices and the closest ones."""
    words = choices(field)
    if value is None or not words or value in words:
        return
    close = [w for w in words if w == str(value).lower()] or difflib.get_close_matches(str(value), words, n=2,
                                                                                        cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UserError(f"{OPTION_OF[field]} {str(value)[:40]!r}: expected {', '.join(words)}{hint}")


def note_fp8_recipe(train: TrainSpec, opts: TrainOptions) -> None:
    """--fp8-recipe given with a precision other than fp8 changes nothing: say so (a thing parplan reads
    but does not price gets a warning, as `check` warns of what a config sets and is not priced). Warned,
    not refused: a script may pass one recipe to runs of several precisions, and nothing it asks for is
    impossible, only unused."""
    warn_unused_recipe(opts.fp8_recipe, train.precision)


def warn_unused_recipe(recipe: Optional[str], precision: Any) -> None:
    """The one stderr line of note_fp8_recipe, for `recipe` (None: not given) at `precision`."""
    if recipe is not None and isinstance(precision, str) and precision != "fp8":
        sys.stderr.write(f"warning: --fp8-recipe {recipe} is ignored: precision is {precision} "
                         "(give --precision fp8 to price FP8 GEMMs)\n")


def apply(train: TrainSpec, opts: TrainOptions = TrainOptions()) -> TrainSpec:
    """`train` with the options over it, validated, and its stack resolved: with --framework X, a stack
    of X (the one given, the base's when it is X's, else X's default)."""
    from costmodels.train_spec import TrainSpec
    from planner.files import loading
    from planner.search import frameworks

    for name in OPTION_OF:
        check_choice(name, getattr(opts, name, None))
    stack = chosen_stack(opts)
    given = opts.train_fields()
    if given:
        train = loading.validate(TrainSpec, {**train.model_dump(), **given, "stack": train.stack}, "train")
    resolved = loading.resolve_train(train, stack)
    note_fp8_recipe(resolved, opts)
    fw = frameworks.load(opts.framework)
    if fw is None or resolved.stack_spec.framework == fw.name:
        return resolved
    given_name = None if stack is None else stack.name
    name = frameworks.stack_name(fw, given_name, None if stack is None else stack.framework)
    return loading.resolve_train(train, load_stack_name(name))


def apply_to_document(doc: dict, opts: TrainOptions) -> dict:
    """A plan document with the options written into its `train` (export, report). Its saved
    `estimate` is dropped when anything changed, so that numbers are computed again; an --fp8-recipe
    the document's precision does not use is warned of, as `apply` does (note_fp8_recipe)."""
    from planner.search import frameworks

    stack, given = chosen_stack(opts), opts.train_fields()
    fw = frameworks.load(opts.framework)
    if stack is None and fw is not None and _document_framework(doc) != fw.name:
        stack = load_stack_name(fw.stack)
    if stack is None and not given:
        return doc
    train = doc.get("train")
    if not isinstance(train, dict):
        return doc  # the plan loader names the problem
    train = {**train, **given}
    warn_unused_recipe(opts.fp8_recipe, train.get("precision", "bf16"))  # TrainSpec's default precision
    if stack is not None:
        train["stack"] = opts.stack if opts.stack is not None else stack.model_dump(mode="json")
    return {k: v for k, v in {**doc, "train": train}.items() if k != "estimate"}


def _document_framework(doc: dict) -> Optional[str]:
    """The framework of a plan document's stack (None when it names none or an unknown one)."""
    import hardware_profiles as hp

    train = doc.get("train")
    ref = train.get("stack") if isinstance(train, dict) else None
    if isinstance(ref, str) and ref in hp.list_stacks():
        return hp.load_stack(ref).framework
    return ref.get("framework") if isinstance(ref, dict) else None


def stack_rows() -> list[dict]:
    """One row per stack profile: name, framework, description, how it was fitted, validated regimes."""
    import hardware_profiles as hp
    from costmodels.uncertainty import validated_regimes

    rows = []
    for name in hp.list_stacks():
        s = hp.load_stack(name)
        rows.append({"name": name, "framework": s.framework, "description": s.description,
                     "fitted_on": s.fitted_on, "validated_regimes": validated_regimes(s)})
    return rows


def stacks_table(rows: list[dict]) -> Table:
    """The stacks, one line each."""
    from rich.table import Table

    table = Table(title="Software stacks (--stack; default megatron-core)")
    for col in ("name", "framework", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["framework"], r["description"])
    return table
