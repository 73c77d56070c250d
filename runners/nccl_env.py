"""NCCL's environment as tracecore sets it for every run whose backend uses NCCL: the one owner of the policy.

Why a policy: NCCL says which rings, trees, sockets and QPs it built only in its INFO log, and only for
the subsystems asked for; without these settings the `nccl_*` tables and views stay empty. Each rank
logs into the run folder (`worker-<node rank>-nccl.<host>.<pid>.log`, collected like the captures and
paired with that worker's capture by its `worker-<i>` stem; under horovodrun and mpirun, which start
every host's ranks from the first, `nccl.<host>.<pid>.log`, paired by the addresses it logs). The
experiment's own `[launcher] env` settings win over the policy (they are the user's), and run.toml's
`[nccl]` table records both.
"""

from __future__ import annotations

# The subsystems tracecore.logs.nccl reads: communicators (INIT), bootstrap addresses (BOOTSTRAP),
# settings echoed (ENV), rings/trees/channels (GRAPH), transports, sockets and QPs (NET).
DEBUG_SUBSYSTEMS = "INIT,BOOTSTRAP,ENV,GRAPH,NET"
# The example profiler plugin's events: group, collective, proxy op and step, kernel channel, network
# plugin, group/collective API and kernel launch (NVIDIA's ext-profiler/example: its event mask bits).
PROFILE_EVENT_MASK = "3035"


def uses_nccl(backend: str) -> bool:
    """A run's backend name that involves NCCL: `nccl`, or the paper's `gloo_nccl`, `mpi_nccl`…"""
    return "nccl" in backend.lower().split("_")


def debug_file(out: str, node_rank: int | None) -> str:
    """Where a host's ranks write their NCCL log (NCCL fills in %h, the host, and %p, the pid); None:
    the launcher starts every host's ranks from one place (horovodrun, mpirun), so the environment
    cannot say which host a rank is on, and the log is paired with its worker by the addresses it logs."""
    if node_rank is None:
        return f"{out}/nccl.%h.%p.log"
    return f"{out}/worker-{node_rank}-nccl.%h.%p.log"


def policy(out: str, node_rank: int | None, profiler_plugin: str = "") -> dict[str, str]:
    """What tracecore sets for a host's ranks: INFO logs of the subsystems the parser reads, per rank
    into the run folder; with a profiler plugin, the outputs of NVIDIA's two reference plugins (the
    example plugin's Chrome traces, the Inspector's JSON lines) into the run folder too."""
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": DEBUG_SUBSYSTEMS,
        "NCCL_DEBUG_FILE": debug_file(out, node_rank),
    }
    if profiler_plugin:
        env.update(
            NCCL_DEBUG_SUBSYS=f"{DEBUG_SUBSYSTEMS},PROFILE",
            NCCL_PROFILER_PLUGIN=profiler_plugin,
            NCCL_PROFILE_EVENT_MASK=PROFILE_EVENT_MASK,
            NCCL_PROFILE_DUMP_FILE=f"{out}/nccl-profiler-example",
            NCCL_INSPECTOR_ENABLE="1",
            NCCL_INSPECTOR_DUMP_DIR=f"{out}/nccl-inspector",
            NCCL_INSPECTOR_DUMP_VERBOSE="1",
        )
    return env


def record(commands_env: list[dict[str, str]], user_env: dict[str, str]) -> dict:
    """run.toml's `[nccl]`: the settings of the first host (others differ only in the log's name),
    which of them tracecore set and which the experiment did."""
    first = commands_env[0] if commands_env else {}
    return {
        "env": {k: v for k, v in sorted(first.items()) if k.startswith("NCCL_")},
        "set_by_tracecore": sorted(k for k in first if k.startswith("NCCL_") and k not in user_env),
        "set_by_experiment": sorted(k for k in user_env if k.startswith("NCCL_")),
    }
