"""sbatch's options as a launch script gives them: `#SBATCH` lines and `sbatch ...` command lines.

Source: sbatch(1) (Slurm 23.11), OPTIONS: every short option has a long name (`-N, --nodes=<minnodes>[-maxnodes]|
<size_string>`, `-n, --ntasks`, `-c, --cpus-per-task`, `-G, --gpus`, `-J, --job-name`, ...); a short option's value
follows it as the next word or attached (`-N4`, getopt's rule), a long option's after `=` or as the next word.
A node count may be a range `min-max` (the job gets at least min nodes), a comma-separated list of counts or a
stepped range `1-15:4` (= 1,5,9,13): sbatch allocates one of them, never fewer than the smallest.
Used by planner.files.shellread (the SLURM_* variables a script reads) and planner.files.native (the node count).
"""

from __future__ import annotations

import re
import shlex
from typing import Optional

from planner.errors import UserError

# sbatch(1): short option -> its long name (those a launch script's reading depends on, and the common rest)
SHORT = {"-N": "--nodes", "-n": "--ntasks", "-c": "--cpus-per-task", "-G": "--gpus", "-J": "--job-name",
         "-t": "--time", "-p": "--partition", "-A": "--account", "-o": "--output", "-e": "--error",
         "-q": "--qos", "-C": "--constraint", "-w": "--nodelist", "-x": "--exclude", "-D": "--chdir",
         "-d": "--dependency", "-a": "--array", "-b": "--begin", "-M": "--clusters", "-m": "--distribution"}
# short options that take no value (sbatch(1): -H --hold, -h --help, -k --no-kill, -O --overcommit, -Q --quiet,
# -s --oversubscribe, -V --version, -v --verbose, -W --wait)
SHORT_SWITCHES = {"-H": "--hold", "-h": "--help", "-k": "--no-kill", "-O": "--overcommit", "-Q": "--quiet",
                  "-s": "--oversubscribe", "-V": "--version", "-v": "--verbose", "-W": "--wait"}
COUNT = re.compile(r"([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?")


def option_pairs(words: list[str], stop_at_script: bool = False) -> list[tuple[str, str]]:
    """(long option, value) of sbatch words: `--nodes=4`, `--nodes 4`, `-N 4`, `-N4`, switches ('' value).
    stop_at_script: an `sbatch` command line, whose options end at the first word that is not one."""
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "-":
            if stop_at_script:
                break
            i += 1
            continue
        flag, value, used = _one(w, words[i + 1] if i + 1 < len(words) else None)
        out.append((flag, value))
        i += 1 + used
    return out


def _one(word: str, nxt: Optional[str]) -> tuple[str, str, int]:
    """(long name, value, how many following words it used) of one option word."""
    if word.startswith("--"):
        if "=" in word:
            flag, value = word.split("=", 1)
            return flag, value, 0
        takes = nxt is not None and not nxt.startswith("-")
        return word, nxt if takes else "", int(takes)
    short, attached = word[:2], word[2:]
    if short in SHORT_SWITCHES:
        return SHORT_SWITCHES[short], "", 0
    long = SHORT.get(short, short)
    if attached:
        return long, attached.removeprefix("="), 0
    takes = nxt is not None and not nxt.startswith("-")
    return long, nxt if takes else "", int(takes)


def sbatch_options(text: str) -> dict[str, str]:
    """`#SBATCH` options of a script (each line's words; a later line wins, as sbatch reads them), long names."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("#SBATCH"):
            continue
        try:
            words = shlex.split(line[len("#SBATCH"):], comments=True)
        except ValueError as err:  # shlex: "No closing quotation", "No escaped character"
            raise UserError(f"cannot read the script: line {number}: #SBATCH options: {str(err).lower()}") from None
        out.update(option_pairs(words))
    return out


def fewest_nodes(value: str) -> Optional[int]:
    """The fewest nodes sbatch allocates for a --nodes value: `4` -> 4, `2-4` -> 2, `1,4,8` -> 1,
    `1-15:4` -> 1; None for a placeholder or a variable (any other character). A value of digits and
    separators that is none of these forms (`-3`, `2-`, `0`) or a count past 7 digits is refused, as sbatch
    refuses it."""
    parts = value.split(",")
    found = [COUNT.fullmatch(p) for p in parts]
    if value and all(found) and min(int(m.group(1)) for m in found) > 0:
        return min(int(m.group(1)) for m in found)
    if re.fullmatch(r"[0-9]{8,}", value):
        raise UserError(f"#SBATCH --nodes={value[:20]!r}: a node count has at most 7 digits")
    if value and re.fullmatch(r"[0-9,:-]+", value):
        raise UserError(f"#SBATCH --nodes={value[:20]!r}: not a node count sbatch accepts (N, MIN-MAX, a list "
                        "N,M,..., or MIN-MAX:STEP, counts of at least 1)")
    return None


def nodes_note(value: str) -> Optional[str]:
    """One line when --nodes is not one count (a range or a list): which count is priced and why."""
    count = fewest_nodes(value)
    if count is None or value.isdigit():
        return None
    return (f"#SBATCH --nodes={value}: sbatch allocates one of these node counts, at least {count}; priced on "
            f"{count} (give --nodes to price another)")
