-- Per collective: which rank started it last, and how long the others waited for that rank.
-- Kind: answer
-- Key: run, step, seq, op
-- Headline: last_rank, last_worker, spread_ns, wait_ns
-- Needs: collectives
-- Partition: run
--
-- A collective completes only when every rank has joined, so the rank that starts last holds all
-- others: each waits from its own start to the last one's. Starts are each rank's own (the GPU
-- kernel where the source has it, else the call), put on one clock with the hosts' offsets from
-- run.toml (collective_calls; the hosts' own clocks without them). The host-side calls are compared
-- too: a rank late to call is late in its own compute or data loading, one late only on the GPU
-- waited on its stream. Instances recorded by fewer than two ranks are left out.
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run, source, comm, seq, op, bytes, step   the collective instance
--   ranks                   ranks that recorded it
--   first_start_ns          the earliest rank's start, UTC ns (runner's clock)
--   last_start_ns           the last rank's start, UTC ns
--   last_rank, last_worker  the rank that started last and its worker
--   spread_ns               last_start_ns − first_start_ns: how long the earliest rank waited, ns
--   wait_ns                 Σ over ranks of (last_start_ns − its start): all ranks' waiting, ns
--   call_spread_ns          the same spread of the host-side calls, ns; NULL without calls
--   last_caller_rank        the rank that called last; NULL without calls
--   end_spread_ns           latest − earliest end over the ranks, ns
CREATE OR REPLACE MACRO collective_stragglers(runs := NULL) AS TABLE
WITH
calls AS (
    SELECT *, start_ns - coalesce(clock_offset_ns, 0) AS t_start, end_ns - coalesce(clock_offset_ns, 0) AS t_end,
           call_start_ns - coalesce(clock_offset_ns, 0) AS t_call,
           max(start_ns - coalesce(clock_offset_ns, 0)) OVER (PARTITION BY run, source, comm, seq) AS t_last
    FROM collective_calls
    WHERE (runs IS NULL OR list_contains(runs, run)) AND start_ns IS NOT NULL
)
SELECT run, source, comm, seq, any_value(op) AS op, any_value(bytes) AS bytes, any_value(step) AS step,
       count(*) AS ranks, min(t_start) AS first_start_ns, max(t_start) AS last_start_ns,
       arg_max(rank, t_start) AS last_rank, arg_max(worker, t_start) AS last_worker,
       max(t_start) - min(t_start) AS spread_ns,
       sum(t_last - t_start)::BIGINT AS wait_ns,
       max(t_call) - min(t_call) AS call_spread_ns, arg_max(rank, t_call) AS last_caller_rank,
       max(t_end) - min(t_end) AS end_spread_ns
FROM calls
GROUP BY run, source, comm, seq
HAVING count(*) >= 2
ORDER BY run, source, comm, seq;

CREATE OR REPLACE VIEW collective_stragglers AS SELECT * FROM collective_stragglers();
