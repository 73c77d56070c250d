"""Which Arrow memory pool ingest allocates from: the system allocator unless the user chose one.

Why: pyarrow's default pool (mimalloc) takes fresh 2 MB huge pages for the Parquet encoders' buffers
of every batch and hands them back, so each batch pays the kernel to zero them again; with the system
allocator ingest's peak RSS is 7-8 % lower and its kernel time ~10 % lower on the same captures
(bench/results/arrow-pool.md). A user who set ARROW_DEFAULT_MEMORY_POOL keeps that pool.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

CHOSEN_BY_USER = "ARROW_DEFAULT_MEMORY_POOL"  # Arrow's own variable: the user's choice wins
_lock = threading.Lock()
_inside = 0  # ingests inside `system_pool` now (several may run at once on threads of one process)
_previous: Any = None  # the pool the first of them found, restored when the last leaves


@contextlib.contextmanager
def system_pool() -> Iterator[None]:
    """Arrow's default pool is the system allocator inside the block, and the pool found before it
    once every block open at the same time (ingests on several threads) has left (buffers remember
    the pool they came from, so freeing them later is safe)."""
    global _inside, _previous
    if os.environ.get(CHOSEN_BY_USER):
        yield
        return
    import pyarrow as pa

    with _lock:
        if _inside == 0:
            _previous = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                pa.set_memory_pool(_previous)
                _previous = None


def use_system_pool() -> None:
    """The same for the rest of a worker process's life (process-pool initializer)."""
    if not os.environ.get(CHOSEN_BY_USER):
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
