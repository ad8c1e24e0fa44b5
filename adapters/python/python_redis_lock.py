"""lockbench adapter for python-redis-lock's `redis_lock.Lock` on one Redis node
(`-s adapter:python-redis-lock`; with `--watchdog`, the library's own auto-renewal).

What the library does, and so what is tested: `SET lock:<name> <id> NX EX expire` to acquire,
waiting on a `BLPOP` of a signal list while the lock is held (blocking); a Lua compare-and-delete
that also pushes the signal to release; a Lua compare-and-EXPIRE to extend. With
`auto_renewal=True` a thread of the library extends the lock every 2/3 of the expiry; when an
extend finds the lock gone it raises inside that thread, which then ends. No fencing token.
The expiry is whole seconds (the library rounds it down), so the TTL must be whole seconds.
The key is the library's: `lock:<key_prefix>lock:<resource>`.

Events: `renewed` after each renewal by the library's thread, `lock_lost` when such a renewal
finds the lock gone, `renew_failed` when it fails otherwise.
"""

import threading

import redis
import redis_lock
from redis_lock import NotAcquired

from lockbench_adapter import Busy, Definite, Library, NotOwner, serve


class _Lock(redis_lock.Lock):
    """The library's Lock, reporting what its renewal thread does (nothing else changed)."""

    def __init__(self, *args, adapter=None, client=None, resource=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._lb_adapter, self._lb_client, self._lb_resource = adapter, client, resource

    def extend(self, expire=None):
        renewer = getattr(self, "_lock_renewal_thread", None)
        from_renewer = renewer is not None and threading.current_thread() is renewer
        if not from_renewer:
            return super().extend(expire)
        try:
            result = super().extend(expire)
        except NotAcquired as e:
            self._lb_adapter.emit(self._lb_client, "lock_lost", self._lb_resource, str(e))
            raise
        except Exception as e:
            self._lb_adapter.emit(self._lb_client, "renew_failed", self._lb_resource, repr(e))
            raise
        self._lb_adapter.emit(self._lb_client, "renewed", self._lb_resource)
        return result


class PythonRedisLock(Library):
    name = "python-redis-lock"
    library = "python-redis-lock"
    library_version = getattr(redis_lock, "__version__", "unknown")
    capabilities = ["acquire", "release", "extend", "check", "hold", "auto-renew", "events"]
    topologies = ["single"]
    OPTIONS = {"socket_timeout_ms"}

    def init(self, msg):
        options = msg.get("options") or {}
        unknown = sorted(set(options) - self.OPTIONS)
        if unknown:
            raise Definite(f"unknown options {unknown} (known: {sorted(self.OPTIONS)})")
        if msg["ttl_ms"] % 1000 or msg["ttl_ms"] < 1000:
            raise Definite(f"TTL {msg['ttl_ms']} ms: python-redis-lock expires in whole seconds")
        self.prefix = msg["key_prefix"]
        self.expire = msg["ttl_ms"] // 1000
        self.auto_renewal = bool((msg.get("renewal") or {}).get("auto"))
        # The library waits on a BLPOP in whole seconds, at most the expiry: a blocking acquire
        # when lockbench's policy retries, for its overall timeout (else the time its retries
        # take), rounded up to a second and capped at the expiry.
        retry = msg.get("retry") or {}
        attempts = max(1, retry.get("attempts", 1))
        self.blocking = attempts > 1
        budget_ms = retry.get("timeout_ms")
        if budget_ms is None:
            budget_ms = (attempts - 1) * (retry.get("delay_ms", 0) + retry.get("jitter_ms", 0))
        self.timeout = min(self.expire, max(1, -(-int(budget_ms) // 1000)))
        # That BLPOP runs on the client's own connection: as an application must, give the
        # socket more time than the wait (else every blocking acquire ends in a socket timeout).
        node_s = options.get("socket_timeout_ms", msg["node_timeout_ms"]) / 1000.0
        socket_s = node_s + self.timeout if self.blocking else node_s
        self.redis = redis.Redis.from_url(
            msg["nodes"][0]["url"], socket_timeout=socket_s, socket_connect_timeout=node_s
        )
        self.redis.ping()

    def acquire(self, state, resource):
        lock = _Lock(
            self.redis,
            f"{self.prefix}lock:{resource}",
            expire=self.expire,
            auto_renewal=self.auto_renewal,
            adapter=self,
            client=state["client"],
            resource=resource,
        )
        ok = lock.acquire(blocking=self.blocking, timeout=self.timeout if self.blocking else None)
        if not ok:
            raise Busy(f"lock on {resource!r} is held by another owner")
        state["lock"] = lock
        return {"owner": lock.id if isinstance(lock.id, str) else lock.id.decode()}

    def extend(self, state):
        try:
            self.held(state).extend()
        except NotAcquired as e:
            raise NotOwner(str(e)) from e
        return {}

    def release(self, state):
        lock = self.held(state)
        del state["lock"]
        try:
            lock.release()
        except NotAcquired as e:
            raise NotOwner(str(e)) from e
        return {"released": True}

    def check(self, state):
        lock = self.held(state)
        return {"owns": lock.get_owner_id() == lock.id}


if __name__ == "__main__":
    serve(PythonRedisLock())
