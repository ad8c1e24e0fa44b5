"""lockbench adapter for pottery's `Redlock` on independent Redis nodes
(`-s adapter:pottery-redlock`, topology `five`).

What the library does, and so what is tested: the Redlock algorithm over every node of `init`
(one `redis.Redis` per node): `SET redlock:<key> <uuid> NX PX` on all of them from a thread pool,
held when a quorum answered in time (`auto_release_time` minus elapsed minus drift), released on
every node otherwise; release and extend are Lua scripts run on every node and need a quorum. No
fencing token, no renewal of its own; pottery allows only `num_extensions` (3) extends per lock.
The key is the library's: `redlock:<key_prefix>lock:<resource>`.

Errors: with `raise_on_redis_errors=True`, node errors that leave no quorum raise (`info`);
`acquire()` returning False is `busy` (the library released what it had set).
"""

import importlib.metadata

import redis
from pottery import Redlock
from pottery.exceptions import ExtendUnlockedLock, ReleaseUnlockedLock, TooManyExtensions

from lockbench_adapter import Busy, Definite, Library, NotOwner, serve


class PotteryRedlock(Library):
    name = "pottery-redlock"
    library = "pottery"
    library_version = importlib.metadata.version("pottery")
    capabilities = ["acquire", "release", "extend", "check", "hold"]
    topologies = ["five"]
    OPTIONS = {"socket_timeout_ms"}

    def init(self, msg):
        options = msg.get("options") or {}
        unknown = sorted(set(options) - self.OPTIONS)
        if unknown:
            raise Definite(f"unknown options {unknown} (known: {sorted(self.OPTIONS)})")
        timeout = options.get("socket_timeout_ms", msg["node_timeout_ms"]) / 1000.0
        self.masters = frozenset(
            redis.Redis.from_url(n["url"], socket_timeout=timeout, socket_connect_timeout=timeout)
            for n in msg["nodes"]
        )
        self.prefix = msg["key_prefix"]
        self.ttl_s = msg["ttl_ms"] / 1000.0
        # lockbench's retry policy onto the library's loop: blocking (pottery retries after a
        # random delay of its own) for the policy's overall timeout, else the time its retries
        # take; one attempt when the policy makes one.
        retry = msg.get("retry") or {}
        attempts = max(1, retry.get("attempts", 1))
        self.blocking = attempts > 1
        timeout_ms = retry.get("timeout_ms")
        if timeout_ms is None:
            timeout_ms = (attempts - 1) * (retry.get("delay_ms", 0) + retry.get("jitter_ms", 0))
        self.timeout = max(timeout_ms / 1000.0, 0.001)

    def acquire(self, state, resource):
        lock = Redlock(
            key=f"{self.prefix}lock:{resource}",
            masters=self.masters,
            auto_release_time=self.ttl_s,
            raise_on_redis_errors=True,
        )
        ok = lock.acquire(blocking=self.blocking, timeout=self.timeout if self.blocking else -1)
        if not ok:
            raise Busy(f"no quorum for {resource!r}: held by another owner")
        state["lock"] = lock
        return {"owner": str(lock._uuid)}

    def extend(self, state):
        try:
            self.held(state).extend()
        except TooManyExtensions as e:
            raise Definite(f"pottery allows {e!r}: no more extends of this lock") from e
        except ExtendUnlockedLock as e:
            if getattr(e, "redis_errors", None):
                raise  # some nodes failed: it may be ours still (indefinite)
            raise NotOwner(str(e)) from e
        return {}

    def release(self, state):
        lock = self.held(state)
        del state["lock"]
        try:
            lock.release()
        except ReleaseUnlockedLock as e:
            if getattr(e, "redis_errors", None):
                raise  # some nodes failed: our key may remain on them (indefinite)
            raise NotOwner(str(e)) from e
        return {"released": True}

    def check(self, state):
        return {"owns": self.held(state).locked() > 0}


if __name__ == "__main__":
    serve(PotteryRedlock())
