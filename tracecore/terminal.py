"""Text read from outside (file and folder names, log lines, remote output) made safe to print.

Why one owner: a run folder or a log line may hold terminal control sequences (`\\x1b]0;…\\x07` retitles
the terminal, `\\x1b[31m` recolours what follows, a carriage return or a newline forges a line); every
place such text reaches a terminal (error lines, the ingest table, problems and warnings, result
tables, a failed run's log tail) passes it through `safe`. Data written as CSV, JSON or Parquet
stays as it is.
"""

from __future__ import annotations


def safe(text: str) -> str:
    """`text` with every character Python does not call printable (C0 and C1 controls, DEL, line and
    paragraph separators, bidirectional overrides) written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
