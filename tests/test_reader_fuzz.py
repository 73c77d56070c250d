"""Fuzzing: mutated and cut corpus files never crash or hang the reader, and it agrees with
the dpkt oracle on every packet and on where it stops.

Deterministic (seeded) and bounded: all MUTATIONS run (about 3 s on the 2-core dev machine)
and the test counts them; a watchdog (faulthandler) turns a hang into a loud failure with
tracebacks instead of a stuck run.
"""

from __future__ import annotations

import faulthandler
import gzip
import random
from pathlib import Path

import pyarrow as pa
import pytest

from tests import oracle
from tests.conftest import REPO
from tracecore.errors import CaptureError, NotACaptureError
from tracecore.reader import CaptureReader
from tracecore.schema import PACKET_SCHEMA

MUTATIONS = 2000
RDMA_MUTATIONS = 1000
RDMA_OUTCOMES = {"not a capture": 5, "error": 242, "clean": 753}  # one mutation zeroes an original length
RDMA_CORPUS = REPO.parent / "shared" / "corpus-rdma"
WATCHDOG_S = 120


def mutate(rng: random.Random, data: bytes) -> bytes:
    d = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            d[rng.randrange(len(d))] = rng.randrange(256)
    elif kind == 1:  # plant a suspicious 32-bit value (lengths, magic-ish)
        value = rng.choice([0, 1, 12, 0xFFFFFFFF, 0x7FFFFFFF, 262144, 262145, rng.randrange(2**32)])
        pos = rng.randrange(max(1, len(d) - 4))
        d[pos : pos + 4] = value.to_bytes(4, rng.choice(["little", "big"]))
    elif kind == 2:  # cut anywhere
        d = d[: rng.randrange(len(d) + 1)]
    else:  # insert junk
        pos = rng.randrange(len(d) + 1)
        d[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(d)


def read(path: Path, batch_rows: int) -> tuple[list[dict], CaptureError | None]:
    reader = CaptureReader(path, batch_rows=batch_rows)
    batches = []
    try:
        for batch in reader.batches():
            assert 0 < batch.num_rows <= batch_rows
            batches.append(batch)
    except CaptureError as exc:
        return pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist(), exc
    return pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist(), None


@pytest.fixture
def watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.mark.usefixtures("watchdog")
def test_mutated_corpus_matches_oracle(corpus_dir: Path, tmp_path: Path) -> None:
    files = sorted(p for p in corpus_dir.iterdir() if p.suffix in (".pcap", ".pcapng"))
    outcomes = _fuzz(files, tmp_path, random.Random(20261122), MUTATIONS)
    assert min(outcomes.values()) >= 25, outcomes  # each way a mutated file can end is exercised


@pytest.mark.usefixtures("watchdog")
def test_mutated_rdma_corpus_matches_oracle(tmp_path: Path) -> None:
    """The RoCE, IPoIB and tunnel captures: mutations land in BTHs, extension headers, GRHs, VXLAN and
    Geneve headers and inner packets, and every field still agrees with the oracle."""
    files = sorted(RDMA_CORPUS.glob("*.pcap"))
    assert len(files) == 17, RDMA_CORPUS
    outcomes = _fuzz(files, tmp_path, random.Random(14), RDMA_MUTATIONS)
    assert outcomes == RDMA_OUTCOMES  # seeded: the same mutations every run, each way of ending exercised


def _fuzz(files: list[Path], tmp_path: Path, rng: random.Random, count: int) -> dict[str, int]:
    """Read `count` mutations of `files` and compare each with the oracle; returns how they ended."""
    originals = {p: p.read_bytes() for p in files}
    outcomes = {"not a capture": 0, "error": 0, "clean": 0}
    for i in range(count):
        source = rng.choice(files)
        data = mutate(rng, originals[source])
        path = tmp_path / f"m{i}.pcap"
        path.write_bytes(data)
        rows, error = read(path, rng.randint(1, 50))  # anything but CaptureError fails the test
        where = f"mutation {i} of {source.name}"
        if isinstance(error, NotACaptureError):  # magic destroyed (or nothing left)
            assert (rows, error.offset) == ([], 0), where
            with pytest.raises(NotACaptureError):
                oracle.read_records(path)
            outcomes["not a capture"] += 1
            continue
        want = oracle.read_records(path)
        assert (error.offset if error else None) == (want.error.offset if want.error else None), where
        assert rows == list(oracle.iter_rows(path)), where
        if error is not None:
            assert error.packets_read == len(rows), where
            assert str(error).startswith(str(path)), where
        path.unlink()
        outcomes["error" if error else "clean"] += 1
    assert sum(outcomes.values()) == count, outcomes  # every mutation ran and was checked
    return outcomes


@pytest.mark.usefixtures("watchdog")
def test_mutated_gzip_stream_only_capture_errors(corpus_dir: Path, tmp_path: Path) -> None:
    blob = gzip.compress((corpus_dir / "dpkt__http.pcap").read_bytes())
    rng = random.Random(7)
    for i in range(60):
        path = tmp_path / f"m{i}.pcap.gz"
        path.write_bytes(mutate(rng, blob))
        try:
            reader = CaptureReader(path, batch_rows=8)
            rows = sum(b.num_rows for b in reader.batches())
        except CaptureError:
            continue
        assert rows <= 43
