"""The lockbench adapter protocol (docs/adapter-protocol.md), version 1, for Python lock libraries.

An adapter is a process that lockbench starts: it reads one JSON request per line on stdin and
writes one JSON message per line on stdout; stderr is its log. This module is the part every
Python adapter shares (handshake, init, dispatch, replies, events, exit on EOF); a library's
adapter subclasses `Library` and calls `serve(MyLibrary())`.

Threads, not asyncio: the libraries under test (redis-py's `Lock`, python-redis-lock, pottery)
are blocking, and python-redis-lock renews from a thread of its own. When the process serves
one logical client at a time (`init` `concurrency` 1: each lockbench client has its own
process), the main thread reads a request and runs it itself, as a one-worker application
would: no hand-over between threads, which cost ~30 µs and two thread wake-ups per request.
Otherwise (`lockbench run --adapter-processes N` or `--shared-connection`: several lockbench
clients per process) each logical client gets one worker thread that runs its requests in
order (the protocol allows one request in flight per logical client), so a library call blocks
only its own client, exactly as in an application with one thread per worker, and the main
thread only reads stdin and hands requests over. The library releases the GIL while it waits
on its socket, so the clients' calls overlap.
"""

import json
import os
import sys
import threading
import time
import traceback

PROTOCOL = 1


class Busy(Exception):
    """Definite: another owner holds the lock; nothing was taken (`fail`, error `busy`)."""


class NotOwner(Exception):
    """Definite: the lock is not ours any more; nothing was changed (`fail`, error `not_owner`)."""


class Definite(Exception):
    """Definite failure of another kind: the operation surely did not happen (`fail`)."""


def now_ns():
    """The adapter's monotonic clock, in nanoseconds (only differences mean anything)."""
    return time.monotonic_ns()


class Library:
    """One lock library behind the protocol. Subclasses set the class attributes and implement
    the operations; each operation runs on the calling logical client's own thread and gets
    that client's `state` dict (empty at first, kept between requests).

    Raise `Busy`, `NotOwner` or `Definite` when the operation surely did not happen; any other
    exception is reported as `info` (indefinite): "indefinite when unsure".
    """

    name = "unnamed"
    library = "unknown"
    library_version = "unknown"
    capabilities = ["acquire", "release", "extend", "check", "hold"]
    topologies = ["single"]

    def __init__(self):
        self.emit = None  # set by serve(): emit(client, event, resource, detail)

    def init(self, msg):
        """Connect with the settings of the `init` request (nodes, key_prefix, ttl_ms, …)."""
        raise NotImplementedError

    def acquire(self, state, resource):
        """Returns {"owner": str, "fencing_token": int|None, "validity_ms": float|None}."""
        raise NotImplementedError

    @staticmethod
    def held(state):
        """The library lock this client holds (`state["lock"]`); `Definite` when none."""
        lock = state.get("lock")
        if lock is None:
            raise Definite("this client holds no lock")
        return lock

    def hold(self, state, ms):
        """Sleeps `ms` (the critical section's work), then returns {"owns": bool|None}."""
        self.held(state)
        time.sleep(ms / 1000.0)
        try:
            return {"owns": self.check(state)["owns"]}
        except Exception as e:  # the library could not tell: say so, do not guess
            return {"owns": None, "owns_error": str(e)}

    def extend(self, state):
        """Renews the held lock to a full TTL; returns {"validity_ms": float|None}."""
        raise NotImplementedError

    def release(self, state):
        """Releases the held lock; returns {"released": True} or raises NotOwner."""
        raise NotImplementedError

    def check(self, state):
        """Returns {"owns": bool}: whether the library believes it holds the lock."""
        raise NotImplementedError


class _Out:
    """stdout, one JSON object per line, from any thread: each line goes straight to file
    descriptor 1 in one `write` (no text layer, no buffer to flush), under a lock so lines of
    different threads never interleave."""

    def __init__(self):
        self._lock = threading.Lock()
        self._fd = sys.stdout.fileno()
        self._encode = json.JSONEncoder(separators=(",", ":")).encode

    def send(self, obj):
        data = (self._encode(obj) + "\n").encode()
        with self._lock:
            while data:
                data = data[os.write(self._fd, data):]


def log(message):
    """One line on stderr, the adapter's log (lockbench keeps it in the run directory)."""
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


OPERATIONS = ("acquire", "hold", "extend", "release", "check")


class _Client(threading.Thread):
    """One logical client: its requests run here, one at a time, in arrival order."""

    def __init__(self, client_id, library, out):
        super().__init__(name=f"client-{client_id}", daemon=True)
        self.client_id = client_id
        self.library = library
        self.out = out
        self.state = {"client": client_id}
        # The hand-over from the reading thread: one slot and a lock used as a binary
        # semaphore (held while there is nothing to run). The protocol allows one request in
        # flight per logical client, and `in_flight` (set by the reader, cleared here) keeps
        # it so; a plain lock wakes this thread with less work than a queue or an event.
        self.in_flight = False
        self._next = None
        self._ready = threading.Lock()
        self._ready.acquire()

    def submit(self, msg, received):
        """Hands one request over (reading thread only, never while `in_flight`)."""
        self.in_flight = True
        self._next = (msg, received)
        self._ready.release()

    def run(self):
        while True:
            self._ready.acquire()
            msg, received = self._next
            reply = answer(self.library, self.state, self.client_id, msg, received)
            # Free before answering: lockbench may send this client's next request as soon
            # as it reads the reply.
            self.in_flight = False
            self.out.send(reply)


def answer(library, state, client_id, msg, received):
    """Runs one operation request of logical client `client_id` (its `state`) and returns the
    reply: `ok`, or `fail`/`info` by the exception raised, with the timestamps."""
    op = msg["type"]
    base = {"in_reply_to": msg["id"], "client": client_id, "received_ns": received}
    started = now_ns()
    try:
        if op == "acquire":
            body = library.acquire(state, str(msg["resource"]))
        elif op == "hold":
            body = library.hold(state, float(msg["ms"]))
        else:
            body = getattr(library, op)(state)
        return {**base, "type": "ok", **body, "started_ns": started, "finished_ns": now_ns()}
    except Busy as e:
        return {**base, "type": "fail", "error": "busy", "message": str(e) or "lock is held",
                "started_ns": started, "finished_ns": now_ns()}
    except NotOwner as e:
        return {**base, "type": "fail", "error": "not_owner",
                "message": str(e) or "not the owner", "started_ns": started,
                "finished_ns": now_ns()}
    except Definite as e:
        return {**base, "type": "fail", "error": "other", "message": str(e),
                "started_ns": started, "finished_ns": now_ns()}
    except Exception as e:  # indefinite when unsure
        log(f"client {client_id} {op}: {traceback.format_exc().strip()}")
        return {**base, "type": "info", "error": _error_kind(e),
                "message": f"{type(e).__name__}: {e}", "started_ns": started,
                "finished_ns": now_ns()}


def _error_kind(e):
    name = type(e).__name__.lower()
    if "timeout" in name:
        return "timeout"
    if "connection" in name:
        return "connection"
    return "other"


def serve(library):
    """Runs the protocol on stdin/stdout until stdin closes, then exits at once (status 0)."""
    out = _Out()
    clients = {}

    def emit(client, event, resource, detail=""):
        out.send({"type": "event", "client": client, "event": event, "resource": resource,
                  "detail": detail, "at_ns": now_ns()})

    library.emit = emit
    out.send({
        "type": "hello",
        "protocol": PROTOCOL,
        "adapter": library.name,
        "library": {"name": library.library, "version": library.library_version},
        "capabilities": library.capabilities,
        "topologies": library.topologies,
    })
    initialized = False
    # One logical client at a time (`init` `concurrency` 1): requests run right here.
    serial = False
    states = {}
    for raw in sys.stdin.buffer:
        received = now_ns()
        try:
            msg = json.loads(raw)
            mid = msg["id"]
            op = msg["type"]
        except (ValueError, KeyError, TypeError) as e:
            log(f"unreadable request {raw[:200]!r}: {e}")
            out.send({"type": "protocol_error", "message": f"unreadable request: {e}"})
            continue
        if op == "ping":
            out.send({"in_reply_to": mid, "type": "ok", "at_ns": now_ns()})
        elif op == "init":
            try:
                library.init(msg)
                initialized = True
                serial = msg.get("concurrency") == 1
                out.send({"in_reply_to": mid, "type": "ok"})
            except Exception as e:
                log(f"init: {traceback.format_exc().strip()}")
                out.send({"in_reply_to": mid, "type": "fail", "error": "other",
                          "message": f"init failed: {type(e).__name__}: {e}"})
        elif op in OPERATIONS:
            cid = msg.get("client")
            if not initialized or not isinstance(cid, int):
                why = "no init yet" if not initialized else "request without an integer client"
                out.send({"in_reply_to": mid, "client": cid, "type": "fail", "error": "other",
                          "message": why})
                continue
            if serial:
                state = states.get(cid)
                if state is None:
                    state = states[cid] = {"client": cid}
                out.send(answer(library, state, cid, msg, received))
                continue
            client = clients.get(cid)
            if client is None:
                client = clients[cid] = _Client(cid, library, out)
                client.start()
            if client.in_flight:
                out.send({"in_reply_to": mid, "client": cid, "type": "fail", "error": "other",
                          "message": f"client {cid} already has a request in flight"})
                continue
            client.submit(msg, received)
        else:
            out.send({"in_reply_to": mid, "type": "fail", "error": "other",
                      "message": f"unknown request type {op!r}"})
    log("stdin closed: exiting")
    sys.stdout.flush()
    os._exit(0)
