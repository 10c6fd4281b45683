"""Generated sections of a markdown document, between a BEGIN and an END marker line.

Several benchmark scripts write their tables into docs/accuracy.md; each owns one marked section and
replaces only that, appending it under `heading` the first time.
"""

from __future__ import annotations

from pathlib import Path


def replace_section(doc_path: Path, begin: str, end: str, text: str, heading: str) -> None:
    """Put `text` between the `begin` and `end` markers of the document, or append the block under
    `heading` when the markers are not there yet."""
    doc = doc_path.read_text()
    block = f"{begin}\n{text}\n{end}"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + block + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip("\n") + f"\n\n{heading}\n\n" + block + "\n"
    doc_path.write_text(doc)
