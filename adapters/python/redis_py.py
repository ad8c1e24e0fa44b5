"""lockbench adapter for redis-py's `redis.lock.Lock` on one Redis node (`-s adapter:redis-py`).

What the library does, and so what is tested: `SET key token NX PX ttl` to acquire (retrying every
`sleep` seconds up to `blocking_timeout` when blocking), a Lua compare-and-delete to release, a
Lua compare-and-PEXPIRE to extend, `GET` + compare for `owned()`. No fencing token, no renewal of
its own. Options (init `options`): `socket_timeout_ms` (default: lockbench's node timeout).
"""

import redis
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

from lockbench_adapter import Busy, Definite, Library, NotOwner, serve


class RedisPyLock(Library):
    name = "redis-py"
    library = "redis"
    library_version = redis.__version__
    capabilities = ["acquire", "release", "extend", "check", "hold"]
    topologies = ["single"]

    OPTIONS = {"socket_timeout_ms"}

    def init(self, msg):
        node = msg["nodes"][0]
        options = msg.get("options") or {}
        unknown = sorted(set(options) - self.OPTIONS)
        if unknown:
            raise Definite(f"unknown options {unknown} (known: {sorted(self.OPTIONS)})")
        timeout = options.get("socket_timeout_ms", msg["node_timeout_ms"]) / 1000.0
        self.redis = redis.Redis.from_url(
            node["url"], socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self.redis.ping()
        self.prefix = msg["key_prefix"]
        self.ttl_s = msg["ttl_ms"] / 1000.0
        # lockbench's retry policy onto the library's own loop: `blocking` when more than one
        # attempt, `sleep` = delay + half the jitter (redis-py sleeps a fixed time), and
        # `blocking_timeout` = the policy's overall timeout, else the time its retries take.
        retry = msg.get("retry") or {}
        attempts = max(1, retry.get("attempts", 1))
        delay_s = retry.get("delay_ms", 0) / 1000.0
        jitter_s = retry.get("jitter_ms", 0) / 1000.0
        self.blocking = attempts > 1
        self.sleep_s = max(delay_s + jitter_s / 2, 0.001)
        timeout_ms = retry.get("timeout_ms")
        if timeout_ms is not None:
            self.blocking_timeout = timeout_ms / 1000.0
        else:
            self.blocking_timeout = (attempts - 1) * (delay_s + jitter_s)

    def acquire(self, state, resource):
        lock = Lock(
            self.redis,
            f"{self.prefix}lock:{resource}",
            timeout=self.ttl_s,
            sleep=self.sleep_s,
            blocking=self.blocking,
            blocking_timeout=self.blocking_timeout,
        )
        if not lock.acquire():
            raise Busy(f"lock on {resource!r} is held by another owner")
        state["lock"] = lock
        token = lock.local.token
        return {"owner": token.decode() if isinstance(token, bytes) else str(token)}

    def extend(self, state):
        try:
            self.held(state).extend(self.ttl_s, replace_ttl=True)
        except LockNotOwnedError as e:
            raise NotOwner(str(e)) from e
        return {}

    def release(self, state):
        lock = self.held(state)
        del state["lock"]
        try:
            lock.release()
        except LockNotOwnedError as e:
            raise NotOwner(str(e)) from e
        return {"released": True}

    def check(self, state):
        return {"owns": bool(self.held(state).owned())}


if __name__ == "__main__":
    serve(RedisPyLock())
