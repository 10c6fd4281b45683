"""The one way parplan writes files: every target checked before any is written, nothing that
exists (file, symlink, dangling symlink) replaced without force, each file written atomically.

Checks, each a UserError (exit 2) naming the option and the path:
- the parent folder exists (or is one the command creates), is a folder, not a symbolic link to one
  (`export --out link` would write through it), and is writable;
- the target is not a folder or a special file (a device, a pipe), even with force;
- without force, nothing exists at the path (os.path.lexists: a dangling link counts).
`write_all` checks all targets first, then writes every file to a temporary file beside it and
renames them in place only when all were written: a refused command writes nothing. Without force the
rename is a hard link, which fails instead of clobbering a file that appeared after the check.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from planner.errors import OutputNotWritten, UserError
from planner.safetext import visible


@dataclass(frozen=True)
class Target:
    """One file to write: where, what, its mode before the umask, and the option that named it."""

    path: Path
    text: str
    mode: int = 0o666
    option: str = "output"


def _q(path: Path) -> str:
    return repr(visible(path))


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of `path` that exists (a file or a folder), or '.'."""
    for parent in path.parents:
        if os.path.lexists(parent):
            return parent
    return Path(".")


def check_folder(folder: Path, option: str, create: bool = False) -> None:
    """`folder` is a writable folder, or (with `create`) can be made inside one."""
    folder = folder if str(folder) else Path(".")
    if os.path.islink(folder):  # writing through it would put files where the path does not say
        raise UserError(f"{option}: folder {_q(folder)} is a symbolic link; name the folder it points to "
                        "(nothing was written)")
    if os.path.isdir(folder):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(f"{option}: folder {_q(folder)} is not writable")
        return
    if os.path.lexists(folder):
        raise UserError(f"{option}: {_q(folder)} is not a folder")
    if not create:
        raise UserError(f"{option}: folder {_q(folder)} does not exist")
    base = _existing_ancestor(folder)
    if not os.path.isdir(base):
        raise UserError(f"{option}: cannot create folder {_q(folder)}: {_q(base)} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(f"{option}: cannot create folder {_q(folder)}: {_q(base)} is not writable")


NAME_MAX_BYTES = 255  # NAME_MAX of ext4, XFS, btrfs, APFS and NTFS (in UTF-16 units there)


def check_target(target: Target, force: bool, creates: Iterable[Path] = ()) -> None:
    """Refuse `target` (UserError) unless it may be written; `creates`: folders the command makes."""
    path, option = target.path, target.option
    if not path.name or path.name in (".", ".."):
        raise UserError(f"{option}: {_q(path)} names a folder, not a file")
    if len(os.fsencode(path.name)) > NAME_MAX_BYTES:
        raise UserError(f"{option}: a file name of {len(os.fsencode(path.name))} bytes: file systems take at most "
                        f"{NAME_MAX_BYTES} (nothing was written)")
    check_folder(path.parent, option, create=path.parent in set(creates))
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UserError(f"{option}: {_q(path)} is a folder, not a file (name a file inside it)")
    mode = os.lstat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserError(f"{option}: {_q(path)} exists and is not a regular file; parplan never writes to it")
    if not force:
        kind = "a dangling symlink" if not os.path.exists(path) else "a symlink" if stat.S_ISLNK(mode) else "a file"
        raise UserError(f"{option}: {_q(path)} exists ({kind}); pass --force to overwrite it (nothing was written)")


def check_all(targets: Sequence[Target], force: bool, creates: Sequence[Path] = ()) -> None:
    """Every target checked, and no path named twice."""
    seen: dict[Path, str] = {}
    for t in targets:
        key = Path(os.path.abspath(t.path))
        if key in seen:
            raise UserError(f"{t.option}: {_q(t.path)} is also the target of {seen[key]}")
        seen[key] = t.option
        check_target(t, force, creates)


def _make_folders(folders: Sequence[Path]) -> None:
    for folder in folders:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create folder {_q(folder)}: {err.strerror or err}") from None


def _stage(target: Target) -> str:
    """Write the text to a temporary file beside the target; its path."""
    fd, tmp = tempfile.mkstemp(dir=target.path.parent, prefix=f".{target.path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(target.text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, target.mode & ~umask)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _publish(tmp: str, path: Path, force: bool) -> None:
    """Move the temporary file into place; without force never over something that exists."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise UserError(f"{_q(path)} appeared while parplan was writing; pass --force to overwrite it") from None
    except OSError:  # a file system without hard links: the check above is all there is
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_all(targets: Sequence[Target], force: bool, creates: Sequence[Path] = ()) -> list[Path]:
    """Check every target, create `creates`, write all to temporary files, then move them in place."""
    check_all(targets, force, creates)
    _make_folders(creates)
    staged: list[str] = []
    current = None
    try:
        for current in targets:
            staged.append(_stage(current))
        for tmp, current in zip(staged, targets):
            _publish(tmp, current.path, force)
    except OSError as err:
        raise OutputNotWritten(f"{current.option}: cannot write {_q(current.path)}: {err.strerror or err} (nothing was "
                               "written)") from None
    finally:
        for tmp in staged:
            Path(tmp).unlink(missing_ok=True)
    return [t.path for t in targets]
