"""Read launch flags back out of a shell script or argument file, without running anything.

Used by the validators (planner.exporters.check_written) and by `parplan check` on native configs
(planner.files.native). The script is split into words (planner.files.shell_tokens), evaluated on what
it assigns (planner.files.shell_eval: assignments, arrays, `if` on known values, `source`, `bash -c`,
here-documents) with bash's expansion and word splitting (planner.files.shell_expand). SLURM's
variables (`$SLURM_NNODES`, `$SLURM_JOB_NUM_NODES`, `$SLURM_GPUS_ON_NODE`, ...) come from the script's
`#SBATCH` lines. What cannot be known (an unassigned variable, `$(scontrol ...)`) stays as written
(`$SLURM_JOB_ID`); what is skipped is listed in `ShellScript.warnings`, one line each.

Expansion is bounded (a 300-byte script doubling `A=$A$A` forty times would need a terabyte): a value
or an array may hold at most MAX_VALUE_CHARS characters, the whole script's expansions at most
MAX_TOTAL_CHARS, a script at most MAX_WORDS words (nested files included); past that, and on an
unclosed quote, a UserError names the line.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files import shell_eval
from planner.files.shell_sbatch import fewest_nodes, sbatch_options  # noqa: F401  (sbatch_options re-exported)
from planner.files.shell_expand import MAX_VALUE_CHARS, expand_fields  # noqa: F401  (re-exported)
from planner.files.shell_tokens import MAX_WORDS, Word, line_at  # noqa: F401  (Word re-exported)

MAX_TOTAL_CHARS = 16 * 2**20
MAX_WARNINGS = 20


@dataclass
class ShellScript:
    """What a script assigns, which simple commands it runs (words expanded), and what was not read."""

    scalars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # exported or command-prefix assignments
    expanded: int = 0  # characters produced by expansion so far (bounded by MAX_TOTAL_CHARS)
    text: str = ""  # the text being read, for line numbers in messages
    warnings: list[str] = field(default_factory=list)  # one line per thing skipped
    files: dict[str, str] = field(default_factory=dict)  # `cat <<EOT > NAME`: NAME -> the body, expanded
    heredocs: list[str] = field(default_factory=list)  # every here-document body, expanded, in order
    sbatch: dict[str, str] = field(default_factory=dict)  # #SBATCH lines and `sbatch --opt` of the script
    script_dir: Optional[str] = None  # the folder sourced files are looked for in (None: none are read)
    script_name: str = "script"  # $0
    positional: list[str] = field(default_factory=list)  # $1 ...
    unknown: int = 0  # expansions that stayed as written (decides whether a test can be evaluated)
    opaque: dict = field(default_factory=dict)  # name -> the unknown spans of its value (shell_unknown.Opaque)
    testing: bool = False  # expanding a `[ ]` / `test` command: a missing argument is the empty string
    args_used: int = 0  # missing arguments read as empty strings so far (a test that depended on them)
    arg_guard: int = 0  # inside a branch taken because arguments are missing: `exit` does not stop reading
    depth: int = 0
    nesting: int = 0  # ${X:-${Y:-...}} levels being expanded
    where: str = ""
    exited: bool = False
    every_branch: bool = False  # read every branch of an `if` (validators of written files) instead of evaluating
    budget: list = field(default_factory=lambda: [MAX_WORDS])  # words left to read, nested files included

    def line_of(self, word) -> str:
        """'line N' of a word (its offset in the text being read), '' when unknown."""
        pos = getattr(word, "pos", None)
        return self.line(pos) if pos is not None else ""

    def line(self, pos) -> str:
        if pos is None:
            return "a line"
        place = f"line {line_at(self.text, pos)}"
        return f"{self.where} {place}" if self.depth > 1 and self.where else place

    def warn(self, message: str) -> None:
        if message not in self.warnings and len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)

    def charge(self, name: str, value_len: int, word) -> None:
        """Count `value_len` expanded characters for `name`; refuse a value or a total past the bounds."""
        self.expanded += value_len
        if value_len > MAX_VALUE_CHARS or self.expanded > MAX_TOTAL_CHARS:
            limit = MAX_VALUE_CHARS if value_len > MAX_VALUE_CHARS else MAX_TOTAL_CHARS
            shown = "".join(c if c.isprintable() else "?" for c in name[:40])
            raise UserError(f"cannot read the script: {self.line_of(word) or 'a line'}: {shown} expands past {limit} "
                            "characters (variable expansion is bounded)")


SLURM_FROM_SBATCH = {"--nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"),
                     "--ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
                     "--gpus-per-node": ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"),
                     "--cpus-per-task": ("SLURM_CPUS_PER_TASK",), "--ntasks": ("SLURM_NTASKS",),
                     "--job-name": ("SLURM_JOB_NAME",)}


def slurm_env(options: dict[str, str]) -> dict[str, str]:
    """SLURM's output environment variables implied by #SBATCH options (sbatch(1), OUTPUT ENVIRONMENT
    VARIABLES): a node count `--nodes=24` gives SLURM_NNODES=SLURM_JOB_NUM_NODES=24, `--gres=gpu:8` or
    `--gpus-per-node=8` gives SLURM_GPUS_ON_NODE=8. A node range (`2-4`) or list gives the fewest nodes sbatch
    allocates (planner.files.shell_sbatch.fewest_nodes); a placeholder sets nothing."""
    env = {}
    for flag, names in SLURM_FROM_SBATCH.items():
        value = options.get(flag, "")
        if flag == "--nodes" and fewest_nodes(value) is not None:
            value = str(fewest_nodes(value))
        if value and (flag == "--job-name" or value.isdigit()):
            env.update({name: value for name in names})
    gres = options.get("--gres", "")
    gpus = gres.rsplit(":", 1)[-1] if gres.startswith("gpu:") else ""
    if gpus.isdigit():
        env.setdefault("SLURM_GPUS_ON_NODE", gpus)
        env.setdefault("SLURM_GPUS_PER_NODE", gpus)
    return env


def read_script(text: str, path: Optional[Path] = None, args: Optional[list[str]] = None,
                every_branch: bool = True) -> ShellScript:
    """Evaluate `text` into assignments and expanded simple commands. `path`: the script's file (its
    folder is where `source`d files are read from, and $0); `args`: its positional arguments.
    every_branch: read the commands of every `if` branch (what the validators of written files check:
    a script offering a static and a c10d launch has both); False evaluates the conditions, as bash
    would (what `check` does on a user's script)."""
    sh = ShellScript(text=text, positional=list(args or []), every_branch=every_branch)
    if path is not None:
        sh.script_dir, sh.script_name = str(Path(path).parent), str(path)
    sh.sbatch.update(sbatch_options(text))
    if not every_branch:  # the validators check the script as written (`--nnodes "$SLURM_NNODES"`)
        sh.scalars.update(slurm_env(sh.sbatch))
    shell_eval.run(sh, text, posixpath.basename(sh.script_name))
    return sh


def expand(sh: ShellScript, word) -> str:
    """A word expanded without word splitting; single-quoted and escaped text stays literal."""
    from planner.files.shell_expand import expand as _expand
    return _expand(sh, word)


def expand_words(sh: ShellScript, words: list) -> list[str]:
    """Every word expanded and split into fields as bash does (`${ARR[@]}` becomes the array's items)."""
    out: list[str] = []
    for w in words:
        produced = expand_fields(sh, w)
        sh.charge(w.text[:40], sum(len(x) + 1 for x in produced), w)
        out.extend(produced)
    return out


# ---- launch commands and flags ------------------------------------------------------------------

def find_launch(sh: ShellScript, launcher: str) -> list[list[str]]:
    """Argument lists following `launcher` (e.g. torchrun, deepspeed) in every command using it."""
    found = []
    for words in sh.commands:
        for i, w in enumerate(words):
            if w.rsplit("/", 1)[-1] == launcher:
                found.append(words[i + 1:])
                break
    return found


def split_at_script(argv: list[str]) -> tuple[list[str], Optional[str], list[str]]:
    """(launcher options, training script, script arguments): the script is the first .py word
    or the module after `-m`."""
    for i, w in enumerate(argv):
        if w.endswith(".py") and not w.startswith("-"):
            return argv[:i], w, argv[i + 1:]
        if w in ("-m", "--module") and i + 1 < len(argv):
            return argv[:i], argv[i + 1], argv[i + 2:]
    return argv, None, []


def parse_flags(words: list[str], switches: set[str] = frozenset(),
                lists: set[str] = frozenset()) -> list[tuple[str, Optional[str]]]:
    """`--flag value`, `--flag=value` and bare switches, in order. A word not starting with '-'
    after a flag is its value unless the flag is a known switch; a flag in `lists` (argparse nargs='+')
    takes every such word up to the next flag, joined by spaces."""
    out: list[tuple[str, Optional[str]]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            flag, value = w.split("=", 1)
            out.append((flag, value))
        elif w in lists:
            j = i + 1
            while j < len(words) and not words[j].startswith("-"):
                j += 1
            out.append((w, " ".join(words[i + 1:j]) if j > i + 1 else None))
            i = j - 1
        elif w.startswith("-") and not _number(w):
            nxt = words[i + 1] if i + 1 < len(words) else None
            takes = nxt is not None and (not nxt.startswith("-") or _number(nxt)) and w not in switches
            out.append((w, nxt if takes else None))
            i += 1 if takes else 0
        i += 1
    return out


def _number(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


def flag_dict(pairs: list[tuple[str, Optional[str]]]) -> dict[str, Optional[str]]:
    """Last value wins (argparse's rule)."""
    return {flag: value for flag, value in pairs}
