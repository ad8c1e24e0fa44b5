"""The baseline of the redis-py adapter's throughput (BENCHMARKS.md, scripts/bench-adapters.sh):
redis-py's `redis.lock.Lock` acquire + release in a plain Python loop, no adapter, no lockbench,
on the node given, with the settings the adapter uses (`SET NX PX` with the TTL, no blocking,
the node timeout as socket timeout).

    plain_loop_redis_py.py --url redis://127.0.0.1:PORT [--threads 1] [--processes 1]
                           [--seconds 5] [--ttl-ms 1000] [--timeout-ms 100]
                           [--key-prefix plain:]

`--threads` callers in all, spread over `--processes` processes (each its own interpreter and
GIL, each with one `redis.Redis` client shared by its threads, as the adapter does with
`lockbench run --adapter-processes`). Each thread takes and releases its own key (thread i:
`<prefix>lock:r<i>`), so there is no contention: every cycle is one acquire and one release.
Every thread counts from one common start to one common end on the machine's monotonic clock.
Prints one JSON object on stdout: {"threads", "processes", "seconds", "cycles", "busy", "errors",
"cycles_per_s", "cpu_us_per_cycle" (the processes' user + system CPU time over the measured
window, per cycle: what a cycle costs whatever the load), "switches_per_cycle" (the calling
threads' context switches, voluntary + involuntary, over the window, per cycle),
"run_queue_wait_us_per_cycle" (how long those threads waited for a CPU while runnable, from
/proc schedstat, per cycle),
"library_version"}.
"""

import argparse
import json
import os
import threading
import time

import redis
from redis.lock import Lock


def run_threads(a, first, count, begin, until):
    """Runs threads `first .. first+count-1` of this process from `begin` to `until`
    (monotonic seconds); returns [cycles, busy, errors, CPU seconds this process spent
    meanwhile]."""
    timeout = a.timeout_ms / 1000.0
    r = redis.Redis.from_url(a.url, socket_timeout=timeout, socket_connect_timeout=timeout)
    # Connecting is not measured: on a loaded machine a first answer may take longer than the
    # timeout, so try again until the common start.
    while True:
        try:
            r.ping()
            break
        except redis.exceptions.TimeoutError:
            if time.monotonic() >= begin:
                raise
    counts = [[0, 0, 0, 0, 0] for _ in range(count)]

    def work(j):
        key = f"{a.key_prefix}lock:r{first + j}"
        time.sleep(max(0.0, begin - time.monotonic()))
        switched, waited = context_switches(), run_queue_wait_ns()
        done = busy = errors = 0
        while time.monotonic() < until:
            lock = Lock(r, key, timeout=a.ttl_ms / 1000.0, blocking=False)
            try:
                if lock.acquire():
                    lock.release()
                    done += 1
                else:
                    busy += 1
            except redis.exceptions.RedisError:
                # A timeout on a loaded machine: counted, the loop goes on (as the adapter's
                # client does); the key expires after the TTL if the release was lost.
                errors += 1
        counts[j] = [done, busy, errors, context_switches() - switched,
                     run_queue_wait_ns() - waited]

    threads = [threading.Thread(target=work, args=(j,)) for j in range(count)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, begin - time.monotonic()))
    cpu = os.times()
    for t in threads:
        t.join()
    spent = os.times()
    cpu_s = spent.user + spent.system - cpu.user - cpu.system
    return [sum(c[0] for c in counts), sum(c[1] for c in counts), sum(c[2] for c in counts), cpu_s,
            sum(c[3] for c in counts), sum(c[4] for c in counts)]


def context_switches():
    """The calling thread's context switches so far (voluntary + involuntary), from /proc; 0
    where there is none."""
    total = 0
    try:
        with open("/proc/thread-self/status") as f:
            for line in f:
                if "ctxt_switches:" in line:  # voluntary_… and nonvoluntary_…
                    total += int(line.split()[1])
    except OSError:
        return 0
    return total


def run_queue_wait_ns():
    """How long the calling thread has waited for a CPU while runnable, ns (the second field
    of /proc/thread-self/schedstat); 0 where there is none."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--ttl-ms", type=float, default=1000.0)
    p.add_argument("--timeout-ms", type=float, default=100.0)
    p.add_argument("--key-prefix", default="plain:")
    a = p.parse_args()
    if a.threads < 1 or a.seconds <= 0 or not 1 <= a.processes <= a.threads:
        p.error("--threads must be at least 1, --processes 1 to --threads, --seconds above 0")
    # A common start far enough ahead for every process to connect and start its threads.
    begin = time.monotonic() + 1.0 + 0.05 * a.processes
    until = begin + a.seconds
    per = [a.threads // a.processes + (i < a.threads % a.processes) for i in range(a.processes)]
    firsts = [sum(per[:i]) for i in range(a.processes)]
    children = []
    for i in range(1, a.processes):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            result = run_threads(a, firsts[i], per[i], begin, until)
            os.write(wr, json.dumps(result).encode())
            os._exit(0)
        os.close(wr)
        children.append((pid, rd))
    cycles, busy, errors, cpu_s, switches, waited = run_threads(a, firsts[0], per[0], begin, until)
    for pid, rd in children:
        with os.fdopen(rd, "rb") as f:
            c, b, e, s, x, w = json.loads(f.read() or b"[0, 0, 0, 0, 0, 0]")
        os.waitpid(pid, 0)
        cycles, busy, errors, cpu_s = cycles + c, busy + b, errors + e, cpu_s + s
        switches, waited = switches + x, waited + w
    elapsed = a.seconds
    print(json.dumps({
        "threads": a.threads,
        "processes": a.processes,
        "seconds": round(elapsed, 3),
        "cycles": cycles,
        "busy": busy,
        "errors": errors,
        "cycles_per_s": round(cycles / elapsed, 1),
        "cpu_us_per_cycle": round(cpu_s / max(cycles, 1) * 1e6, 1),
        "switches_per_cycle": round(switches / max(cycles, 1), 2),
        "run_queue_wait_us_per_cycle": round(waited / 1e3 / max(cycles, 1), 1),
        "library_version": redis.__version__,
    }))


if __name__ == "__main__":
    main()
