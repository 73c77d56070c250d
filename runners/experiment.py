"""The experiment file: TOML read with `tomllib` into a checked model, and its matrix expanded into runs.

Why a strict model: an experiment launches hours of training on real hosts, so a misspelt key or a bad
value must stop the run before anything starts, as one line naming the file and the key.

    [experiment]  out = "pcaps", timeout_s = 600, on_failure = "continue" | "stop", ingest, data
    [backend]     kind = "netns" | "ssh" | "slurm", hosts = [ssh_config aliases], subnet, first_host;
                  ssh: workdir, known_hosts, ssh_config, control_dir, ips, deadman_margin_s;
                  slurm: hosts = [node names], ips, partition, sbatch_args, allow_loss, queue_timeout_s
    [capture]     interface = "eth1", snaplen = 128, filter = "src host {ip}", buffer_kib = 32768,
                  method = "tcpdump" | "counters" (the NIC counter sampler instead of tcpdump, run
                  by launcher.python: counters_interval = "10ms", counters_rdma = "auto" | "none" |
                  "DEV[:PORT]") | "both" (the sampler beside tcpdump),
                  address_interface (the netdev with the host's address and the training sockets, when
                  it is not the capture interface: capturing RoCE at an RDMA NIC, interface = "mlx5_0")
    [loss]        method = "nftables" (default) | "auto" | "netem" | "none"
    [launcher]    kind = "ddp" | "torchrun" | "horovodrun" | "mpirun" | "kungfu" | "tf" | "command",
                  program = [argv template], python, port, nproc_per_node, env = {K = "V"}, epochs,
                  steps_per_epoch; the built-in workload (ddp): device = "cpu" | "cuda", gpus_per_host
                  (one rank per GPU, torchrun when > 1), torch_profiler; any launcher whose backend
                  uses NCCL: nccl_profiler_plugin (a profiler plugin library on the hosts)
    [matrix]      framework, model, optimizer, batch_size, backend, loss, topology, workers (lists),
                  repetitions (int); [[matrix.include]] adds one run (unnamed axes take the axis's first
                  value); [[matrix.exclude]] drops every run matching all of its keys.

Runs are named by `tracecore.ingest.runname.format_run_name`; the variant field carries the worker
count when the expanded runs use more than one, and the repetition when `repetitions > 1`.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from tracecore.errors import ExitCode, TracecoreError, UsageError
from tracecore.ingest.runname import format_run_name

BACKENDS = ("netns", "ssh", "slurm")
LAUNCHERS = ("ddp", "torchrun", "horovodrun", "mpirun", "kungfu", "tf", "command")
LOSS_METHODS = ("auto", "nftables", "netem", "none")
CAPTURE_METHODS = ("tcpdump", "counters", "both")
DEVICES = ("cpu", "cuda")
DDP_BACKENDS = ("gloo", "nccl")  # the torch.distributed backends the built-in workload runs
PROFILE_SCHEDULE = (3, 1, 3)  # torch_profiler: steps skipped, warmed up, recorded (ProfilerStep#4-#6)
AXES = ("framework", "model", "optimizer", "batch_size", "backend", "loss", "topology", "workers")
TEXT_AXES = ("framework", "model", "optimizer", "backend", "topology")


class ExperimentError(TracecoreError):
    """The experiment file cannot be read, or a key or value in it is not one tracecore accepts."""

    exit_code = ExitCode.BAD_INPUT


@dataclass(frozen=True)
class Settings:
    out: str = "pcaps"
    timeout_s: float = 600.0
    on_failure: str = "continue"
    ingest: bool = False
    data: str | None = None


@dataclass(frozen=True)
class BackendSettings:
    kind: str = "netns"
    hosts: tuple[str, ...] = ()
    subnet: str = "192.168.17.0/24"
    first_host: int = 50
    # ssh: remote scratch, the runner's known_hosts, an ssh_config (-F, tests), the ControlMaster
    # socket folder, the hosts' capture-network addresses (else read from the interface at prepare),
    # and how long past timeout_s the remote dead-man switch (`timeout`) lets anything run.
    workdir: str = "/tmp/tracecore-runs"
    known_hosts: str = ""
    ssh_config: str = ""
    control_dir: str = ""
    ips: tuple[str, ...] = ()
    deadman_margin_s: float = 120.0
    # slurm: the partition, further sbatch options (["--account=a", "--gres=gpu:1"]), whether the nodes
    # let jobs change their nftables rules (loss injection; otherwise a lossy run is refused), and how
    # long a job may wait in the queue. hosts are node names, ips their addresses (else their NodeAddr),
    # deadman_margin_s pads the job's time limit.
    partition: str = ""
    sbatch_args: tuple[str, ...] = ()
    allow_loss: bool = False
    queue_timeout_s: float = 3600.0


@dataclass(frozen=True)
class CaptureSettings:
    interface: str = "eth1"
    address_interface: str = ""  # default: interface
    snaplen: int = 128
    filter: str = "src host {ip}"
    buffer_kib: int = 32768
    method: str = "tcpdump"  # tcpdump | counters (the NIC counter sampler, runners/counters.py) | both
    counters_interval: str = "10ms"
    counters_rdma: str = "auto"  # the sampler's --rdma: auto, none, DEV or DEV:PORT

    @property
    def counters(self) -> bool:
        return self.method in ("counters", "both")

    @property
    def tcpdump(self) -> bool:
        return self.method in ("tcpdump", "both")


@dataclass(frozen=True)
class LauncherSettings:
    kind: str = "ddp"
    program: tuple[str, ...] = ()
    python: str | None = None  # None: the backend's interpreter
    port: int = 29500
    nproc_per_node: int = 1
    env: dict[str, str] = field(default_factory=dict)
    epochs: int = 2
    steps_per_epoch: int = 10
    device: str = "cpu"
    gpus_per_host: int = 1
    torch_profiler: bool = False
    nccl_profiler_plugin: str = ""

    @property
    def ranks_per_host(self) -> int:
        """Processes per host: one per GPU for the built-in workload on CUDA, else nproc_per_node."""
        return self.gpus_per_host if self.kind == "ddp" and self.device == "cuda" else self.nproc_per_node


@dataclass(frozen=True)
class RunSpec:
    """One run of the matrix: the name fields plus the worker count and repetition."""

    framework: str
    model: str
    optimizer: str
    batch_size: int
    backend: str
    loss_pct: float
    topology: str
    workers: int
    repetition: int = 1
    name: str = ""

    def fields(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Experiment:
    path: Path
    settings: Settings
    backend: BackendSettings
    capture: CaptureSettings
    loss_method: str
    launcher: LauncherSettings
    runs: tuple[RunSpec, ...]


_SECTIONS = {
    "experiment": Settings,
    "backend": BackendSettings,
    "capture": CaptureSettings,
    "launcher": LauncherSettings,
}
_CHOICES = {
    ("experiment", "on_failure"): ("continue", "stop"),
    ("backend", "kind"): BACKENDS,
    ("launcher", "kind"): LAUNCHERS,
    ("launcher", "device"): DEVICES,
    ("loss", "method"): LOSS_METHODS,
    ("capture", "method"): CAPTURE_METHODS,
}


MAX_RUNS = 1000  # runs a matrix may expand to unless `--max-runs` allows more


def load_experiment(
    path: str | Path, overrides: list[str] | None = None, only: str | None = None, max_runs: int = MAX_RUNS
) -> Experiment:
    """Read, check and expand an experiment file; `overrides` are `--set key=v1,v2`, `only` a name glob,
    `max_runs` the most runs its matrix may expand to (see `expand_matrix`)."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ExperimentError(f"{path}: cannot read the experiment file: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ExperimentError(f"{path}: not valid TOML: {err}") from None
    for item in overrides or []:
        _apply_override(path, doc, item)
    return parse_experiment(path, doc, only, max_runs)


def parse_experiment(path: Path, doc: dict, only: str | None = None, max_runs: int = MAX_RUNS) -> Experiment:
    """The checked model of an already-read document (errors name `path` and the key)."""
    known = {*_SECTIONS, "loss", "matrix"}
    for key in doc:
        if key not in known:
            raise ExperimentError(f"{path}: unknown key {key!r} (expected one of {', '.join(sorted(known))})")
    sections = {name: _section(path, doc, name, cls) for name, cls in _SECTIONS.items()}
    loss = _table(path, doc, "loss")
    _no_unknown(path, "loss", loss, ("method",))
    method = _choice(path, "loss", "method", loss.get("method", "nftables"))  # the tested one (loss.py)
    runs = expand_matrix(path, _table(path, doc, "matrix"), max_runs)
    if only is not None:
        runs = [r for r in runs if fnmatch.fnmatchcase(r.name, only)]
    if sections["backend"].kind != "netns" and not sections["backend"].hosts:
        raise ExperimentError(f"{path}: backend.hosts: the {sections['backend'].kind} backend needs hosts")
    _check_launcher(path, sections["launcher"], runs)
    _check_capture(path, sections["capture"], sections["backend"].kind)
    return Experiment(
        path,
        sections["experiment"],
        sections["backend"],
        sections["capture"],
        method,
        sections["launcher"],
        tuple(runs),
    )


def _check_capture(path: Path, capture: CaptureSettings, backend: str) -> None:
    """The counter sampler's settings, checked as the sampler will check them; the Slurm batch script
    is built around its capture steps, so it samples counters beside tcpdump only."""
    from tracecore.runners.counters import SamplerError, parse_interval

    try:
        parse_interval(capture.counters_interval)
    except SamplerError as err:
        raise ExperimentError(f"{path}: capture.counters_interval: {err}") from None
    if capture.method == "counters" and backend == "slurm":
        raise ExperimentError(
            f'{path}: capture.method: "counters" alone is not run on Slurm (its batch script is built'
            ' around the capture steps); "both" samples the counters beside tcpdump there'
        )


def _check_launcher(path: Path, launcher: LauncherSettings, runs: list[RunSpec]) -> None:
    """The launcher's settings that only make sense together, checked before anything starts."""
    if launcher.kind == "ddp":
        for spec in runs:
            if spec.backend not in DDP_BACKENDS:
                raise ExperimentError(
                    f"{path}: matrix.backend: {spec.backend!r}: the ddp launcher runs torch.distributed's"
                    f" {' or '.join(DDP_BACKENDS)}"
                )
            if spec.backend == "nccl" and launcher.device != "cuda":
                raise ExperimentError(
                    f'{path}: launcher.device: NCCL runs on GPUs only: set device = "cuda" for backend nccl'
                )
        if launcher.device == "cuda" and launcher.nproc_per_node != 1:
            raise ExperimentError(
                f"{path}: launcher.nproc_per_node: on CUDA the ddp launcher starts one rank per GPU:"
                " set gpus_per_host instead"
            )
        wait, warmup, active = PROFILE_SCHEDULE
        if launcher.torch_profiler and launcher.epochs * launcher.steps_per_epoch < wait + warmup + active:
            raise ExperimentError(
                f"{path}: launcher.torch_profiler: the profiler skips {wait + warmup} steps and records"
                f" the next {active}, so a run needs at least {wait + warmup + active} steps"
                " (epochs x steps_per_epoch)"
            )
    else:
        for key, default in (("device", "cpu"), ("gpus_per_host", 1), ("torch_profiler", False)):
            if getattr(launcher, key) != default:
                raise ExperimentError(
                    f'{path}: launcher.{key}: only the built-in workload (kind = "ddp") takes it; a'
                    f" {launcher.kind} program chooses its own device and profiler"
                )


def _table(path: Path, doc: dict, name: str) -> dict:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise ExperimentError(f"{path}: {name} must be a table")
    return value


def _no_unknown(path: Path, section: str, table: dict, known: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            raise ExperimentError(
                f"{path}: {section}.{key}: unknown key (expected one of {', '.join(known)})"
            )


def _choice(path: Path, section: str, key: str, value: object) -> str:
    allowed = _CHOICES[(section, key)]
    if value not in allowed:
        raise ExperimentError(f"{path}: {section}.{key}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _section(path: Path, doc: dict, name: str, cls: type) -> object:
    """One flat table checked against the dataclass's fields and their types."""
    table = _table(path, doc, name)
    defaults = cls()
    fields = cls.__dataclass_fields__
    _no_unknown(path, name, table, tuple(fields))
    values = {}
    for key, raw in table.items():
        where = f"{path}: {name}.{key}"
        default = getattr(defaults, key)
        if (name, key) in _CHOICES:
            values[key] = _choice(path, name, key, raw)
        elif isinstance(default, bool):
            if not isinstance(raw, bool):
                raise ExperimentError(f"{where}: {raw!r} is not true or false")
            values[key] = raw
        elif isinstance(default, int):
            values[key] = _whole(where, raw, minimum=1)
        elif isinstance(default, float):
            if (
                isinstance(raw, bool)
                or not isinstance(raw, int | float)
                or not math.isfinite(raw)
                or raw <= 0
            ):
                raise ExperimentError(f"{where}: {raw!r} is not a positive number")
            values[key] = float(raw)
        elif isinstance(default, tuple):
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise ExperimentError(f"{where}: must be a list of strings")
            values[key] = tuple(raw)
        elif isinstance(default, dict):
            if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
                raise ExperimentError(f"{where}: must be a table of strings")
            values[key] = dict(raw)
        elif not isinstance(raw, str) or not raw:
            raise ExperimentError(f"{where}: {raw!r} is not a non-empty string")
        else:
            values[key] = raw
    return replace(defaults, **values)


def _whole(where: str, raw: object, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
        raise ExperimentError(f"{where}: {raw!r} is not a whole number ≥ {minimum}")
    return raw


def _axis_value(where: str, axis: str, raw: object) -> object:
    if axis in TEXT_AXES:
        if not isinstance(raw, str) or not raw or "-" in raw or "/" in raw or raw.split() != [raw]:
            raise ExperimentError(f"{where}: {raw!r} must be a non-empty name without '-', '/' or blanks")
        return raw
    if axis == "loss":
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw < 100:
            raise ExperimentError(f"{where}: {raw!r} is not a loss in percent in [0, 100)")
        return float(raw)
    return _whole(where, raw, minimum=1)


def expand_matrix(path: Path, matrix: dict, max_runs: int = MAX_RUNS) -> list[RunSpec]:
    """The Cartesian product of the axes, plus includes, minus excludes, times repetitions, named.

    More than `max_runs` runs before the excludes is refused before any is made: why: the product
    grows with each axis (100 × 100 × 100 values made 14.9 M dry-run lines in 72 s at 5 GB), and a
    real experiment of that size is a typo or needs saying so (`--max-runs`).
    """
    _no_unknown(path, "matrix", matrix, (*AXES, "repetitions", "include", "exclude"))
    axes: dict[str, list] = {}
    for axis in AXES:
        raw = matrix.get(axis, [1] if axis == "workers" else None)
        if raw is None:
            raise ExperimentError(f"{path}: matrix.{axis}: missing (a list of values)")
        raw = raw if isinstance(raw, list) else [raw]
        if not raw:
            raise ExperimentError(f"{path}: matrix.{axis}: empty list")
        axes[axis] = [_axis_value(f"{path}: matrix.{axis}", axis, v) for v in raw]
    repetitions = _whole(f"{path}: matrix.repetitions", matrix.get("repetitions", 1), minimum=1)
    _check_size(path, axes, len(_entries(path, matrix, "include")), repetitions, max_runs)
    combos = list(itertools.product(*axes.values()))  # tuples in AXES' order
    for i, entry in enumerate(_entries(path, matrix, "include")):
        _check_entry(path, f"matrix.include[{i}]", entry)
        combos.append(tuple(entry.get(axis, axes[axis][0]) for axis in AXES))
    for i, entry in enumerate(_entries(path, matrix, "exclude")):
        _check_entry(path, f"matrix.exclude[{i}]", entry)
        where = [(AXES.index(k), v) for k, v in entry.items()]
        combos = [c for c in combos if any(c[k] != v for k, v in where)]
    unique = list(dict.fromkeys(combos))
    vary_workers = len({c[AXES.index("workers")] for c in unique}) > 1
    runs = []
    for framework, model, optimizer, batch_size, backend, loss, topology, workers in unique:  # AXES' order
        for rep in range(1, repetitions + 1):
            name = format_run_name(
                framework, model, optimizer, batch_size, backend, loss, topology,
                workers=workers if vary_workers else None, repetition=rep if repetitions > 1 else None,
            )  # fmt: skip
            runs.append(RunSpec(framework, model, optimizer, batch_size, backend, loss, topology, workers,
                                rep, name))  # fmt: skip
    if not runs:
        raise ExperimentError(f"{path}: matrix: the excludes leave no run")
    return runs


def _check_size(path: Path, axes: dict[str, list], includes: int, repetitions: int, max_runs: int) -> None:
    """An ExperimentError when the matrix (with its includes, before excludes) passes `max_runs`."""
    runs = (math.prod(len(values) for values in axes.values()) + includes) * repetitions
    if runs <= max_runs:
        return
    sizes = " × ".join(f"{len(values)} {axis}" for axis, values in axes.items() if len(values) > 1)
    more = (f" + {includes} included" if includes else "") + (
        f", × {repetitions} repetitions" if repetitions > 1 else ""
    )
    raise ExperimentError(
        f"{path}: matrix: {runs:,} runs ({sizes or '1'}{more}), more than the {max_runs:,} allowed: "
        f"trim the axes, or pass --max-runs {runs} if you mean it"
    )


def _entries(path: Path, matrix: dict, key: str) -> list[dict]:
    raw = matrix.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise ExperimentError(f"{path}: matrix.{key}: must be an array of tables ([[matrix.{key}]])")
    return raw


def _check_entry(path: Path, where: str, entry: dict) -> None:
    _no_unknown(path, where, entry, AXES)
    for axis, value in entry.items():
        entry[axis] = _axis_value(f"{path}: {where}.{axis}", axis, value)


def _apply_override(path: Path, doc: dict, item: str) -> None:
    """`--set batch_size=16,32` replaces a matrix axis; `--set section.key=value` one setting."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise UsageError(f"--set {item!r}: expected KEY=VALUE[,VALUE…]")
    values = [_literal(v) for v in text.split(",")]
    if "." not in key:
        if key not in (*AXES, "repetitions"):
            raise UsageError(f"--set {key}: not a matrix axis ({', '.join((*AXES, 'repetitions'))})")
        doc.setdefault("matrix", {})[key] = values[0] if key == "repetitions" else values
        return
    section, _, name = key.partition(".")
    if section not in (*_SECTIONS, "loss") or not name:
        raise UsageError(
            f"--set {key}: expected SECTION.KEY with SECTION one of {', '.join((*_SECTIONS, 'loss'))}"
        )
    table = doc.setdefault(section, {})
    if not isinstance(table, dict):
        raise ExperimentError(f"{path}: {section} must be a table")
    table[name] = values if isinstance(table.get(name), list) else values[0]


def _literal(text: str) -> object:
    """A TOML scalar when the text is one (16, 0.5, true), else the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
