"""The baseline of the redis-py adapter's throughput (BENCHMARKS.md, scripts/bench-adapters.sh):
redis-py's `redis.lock.Lock` acquire + release in a plain Python loop, no adapter, no lockbench,
on the node given, with the settings the adapter uses (`SET NX PX` with the TTL, no blocking,
the node timeout as socket timeout).

    plain_loop_redis_py.py --url redis://127.0.0.1:PORT [--threads 1] [--seconds 5]
                           [--ttl-ms 1000] [--timeout-ms 100] [--key-prefix plain:]

Each thread takes and releases its own key (thread i: `<prefix>lock:r<i>`), so there is no
contention: every cycle is one acquire and one release. Prints one JSON object on stdout:
{"threads", "seconds", "cycles", "busy", "cycles_per_s", "library_version"}.
"""

import argparse
import json
import threading
import time

import redis
from redis.lock import Lock


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--ttl-ms", type=float, default=1000.0)
    p.add_argument("--timeout-ms", type=float, default=100.0)
    p.add_argument("--key-prefix", default="plain:")
    a = p.parse_args()
    if a.threads < 1 or a.seconds <= 0:
        p.error("--threads must be at least 1 and --seconds above 0")
    timeout = a.timeout_ms / 1000.0
    r = redis.Redis.from_url(a.url, socket_timeout=timeout, socket_connect_timeout=timeout)
    r.ping()
    counts = [[0, 0] for _ in range(a.threads)]
    start = threading.Barrier(a.threads + 1)
    until = [0.0]

    def work(i):
        key = f"{a.key_prefix}lock:r{i}"
        start.wait()
        done = busy = 0
        while time.monotonic() < until[0]:
            lock = Lock(r, key, timeout=a.ttl_ms / 1000.0, blocking=False)
            if lock.acquire():
                lock.release()
                done += 1
            else:
                busy += 1
        counts[i] = [done, busy]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(a.threads)]
    for t in threads:
        t.start()
    began = time.monotonic()
    until[0] = began + a.seconds
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    cycles = sum(c[0] for c in counts)
    print(json.dumps({
        "threads": a.threads,
        "seconds": round(elapsed, 3),
        "cycles": cycles,
        "busy": sum(c[1] for c in counts),
        "cycles_per_s": round(cycles / elapsed, 1),
        "library_version": redis.__version__,
    }))


if __name__ == "__main__":
    main()
