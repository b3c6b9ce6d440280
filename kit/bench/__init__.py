"""Benchmarks (``nox -s bench``): ratios measured side by side in one run; nothing here is a test.

1. **overhead**: wall time of the kit evaluating one candidate (``run_job`` in a warm worker) vs the raw steps
   it wraps, run directly (copy files in, ninja, MNNConvert, runner verify trials, runner timing rounds on both
   sides, copy files back, ninja).  Interleaved A B A B; prints the ratio of medians (target <= 1.2).
2. **resume setup**: wall time of a second ``mkb eval`` of a config whose jobs are all recorded (target <= 10 s,
   no MNN rebuild).
3. **scaling** (``--scaling``): the sample set, repeated under ``--copies`` method names, evaluated serially (no
   Ray, the loop of ``mkb eval`` with ``dispatch.mode = "serial"``), over Ray with 1 worker and over Ray with 2
   workers, each into a fresh run directory after a warm-up run (native baseline, both workspaces, ccache).
   The three modes run in ``--rounds`` interleaved rounds, the order rotated each round (S 1 2, 1 2 S, 2 S 1) so
   a drift of the host's speed hits every mode alike; each ratio is computed within a round (adjacent runs)
   and the median over rounds is quoted with its range, the table shows each figure's median over rounds.
   Each mode is timed in parts: the fixed start (serial: ``setup_worker``; Ray: ``ray.init`` + the first worker
   ready), the steady work (serial: the job loop; Ray: ``work_s`` of the Ray executor, first
   worker ready to last record) and the stop.  Prints, side by side: the fixed starts, steady throughput,
   scaling efficiency = throughput(2) / (2 * throughput(1)), Ray's overhead per job = (Ray 1 worker work_s -
   serial work_s) / jobs (also in % of the serial time per job), the bound the node-exclusive timing lock puts
   on the efficiency, the time per job spent waiting for that lock (every worker's gate is a :class:`TimedGate`),
   the seconds builds were paused for the other worker's timing, the host's CPU load, and the end-to-end
   figures.  Every worker builds with ``ninja -j1`` (``--one-worker-jobs J`` gives the serial and 1-worker runs
   J jobs instead, e.g. all CPUs: the best one worker does alone, a stricter baseline than per-worker scaling).
   Run it on a quiet host (it warns when the host is busy before it starts).

4. **timing cost** (``--timing-cost``): the timing and verification defaults' cost per candidate, the former
   (3 rounds x 100 iterations; no extra thread counts) beside the current ones, interleaved
   (:mod:`kit.bench.timingcost`).

5. **sandbox cost** (``--sandbox-cost``): a candidate through the whole pipeline with rlimits only and in the
   sandbox, alternately (:mod:`kit.bench.sandboxcost`; target <= 1.10).

6. **client cost** (``--client-cost``): the generation client's layer over raw ``openai`` calls, requests/s
   against a loopback server at concurrency 1, 8, 32 (:mod:`kit.bench.clientcost`; target <= 1.05).

6. **cold cache** (``--cold-cache``): candidates per hour and per-candidate time with cache-warm and cache-cold
   candidates (copies made unique per run, so ccache misses as for an LLM's new file), for x86_64 and the
   aarch64 target (cross build, verification under qemu) side by side (:mod:`kit.bench.coldcache`).
7. **adb cost** (``--adb-cost``): one candidate's timing on the fake adb device through the kit's executor vs
   its raw adb steps (push, run, pull) run directly, interleaved (:mod:`kit.bench.adbcost`).

8. **input check cost** (``--input-check-cost``): per checked timed forward, the kit's check that its inputs are
   drawn from the timed sets beside the comparison with ONNX Runtime it already made, on the sample set's tasks
   (:mod:`kit.bench.inputcheck`; no engine needed).

9. **serve** (``--serve``): verdicts per hour through ``mkb serve`` beside ``mkb eval`` on the same candidates and
   one worker, rounds alternating the order, and the POST-to-verdict p50/p95 of a warm small task
   (:mod:`kit.bench.servecost`; target >= 0.95).

10. **throughput** (``--throughput``): candidates per hour of the sample set at the default protocol
    (``configs/default.toml``), cache-cold, with 1 and 2 workers, the job time split by stage and phase, beside
    the same at the fewest timing rounds, 2 (:mod:`kit.bench.throughput`).  With ``--before COMMIT`` (``default``:
    main before adaptive rounds) instead: the sample set with this kit and with that commit's, each at its own
    default protocol, cache-cold, with the largest of ``--workers`` Ray workers, interleaved
    (:mod:`kit.bench.checkscost`).

11. **checks cost** (``--checks-cost``): the sample set by ``mkb eval`` with this kit and with the kit before
    issue 26's checks (``--before``), interleaved, at the default protocol's 10 rounds: wall and stage seconds
    and their ratios (:mod:`kit.bench.checkscost`).

Engine: the real MNN tree when ``MKB_MNN__SOURCE_DIR`` is set (task ``--task``, sample from
``candidates/sample``), else the fixture engine shipped with the tests.

    python -m kit.bench [--task ID] [--sample correct] [--repeats 3]
    python -m kit.bench --scaling [--rounds R] [--copies N] [--one-worker-jobs J]   (Ray needs loopback networking)
    python -m kit.bench --timing-cost [--task ID] [--repeats 3]
    python -m kit.bench --checks-cost [--repeats 1] [--before COMMIT]
    python -m kit.bench --sandbox-cost [--task ID] [--repeats 3]
    python -m kit.bench --cold-cache [--arch x86_64 --arch aarch64] [--tasks ID,ID] [--rounds 1]
    python -m kit.bench --adb-cost [--task ID] [--repeats 3]   (the cross toolchain and qemu-user-static)
    python -m kit.bench --input-check-cost [--tasks ID,ID] [--repeats 3]
    python -m kit.bench --serve [--tasks ID,ID] [--rounds 2] [--repeats 3] [--ray-address HOST:PORT]
    python -m kit.bench --throughput [--workers 1,2]   (Ray needs loopback networking)
    python -m kit.bench --throughput --before default --workers 2 [--repeats 2]
"""
