# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rendezvous of a serving group across nodes (issue 33), over TCP, one JSON line per message.

A real group meets in torch.distributed: rank 0 (on the head) hosts a TCPStore on the rendezvous port
(vLLM `--master-port`, SGLang `--dist-init-addr HOST:PORT`), every rank of every node connects to it and
`init_process_group` returns on all ranks only once the whole world joined. The mock keeps one connection
per node: the head (node rank 0) listens, each worker node connects (retrying until the head listens, as a
TCPStore client does) and says hello:

    {"engine": "vllm", "node_rank": 1, "nnodes": 2, "world_size": 2, "spec": DIGEST, "spec_text": "..."}

The head answers `{"ok": false, "error": ...}` at once to a node whose engine, node count, world size or
speculative config (digest of the config as the engine parsed and normalised it) differ from its own, and
fails. A node admitted says `{"loaded": true}` once its own ranks loaded, and the head answers every node
`{"ok": true}` when all did (a real head's executor waits for the remote ranks' message queues, which they
open after loading): the group serves only when every rank of every node is up. After the rendezvous the connections stay open: a node that
goes away (EOF) takes the group down (the real group's next collective fails, NCCL's ncclRemoteError; the
mock notices at once), and a head that stops gracefully sends `{"shutdown": true}` (SGLang's ShutdownReq
broadcast) so the worker nodes exit 0.
"""
import hashlib
import json
import socket
import threading
import time

# NCCL's own text for a peer that went away (ncclRemoteError); what a real group's next collective raises.
NCCL_REMOTE = ("torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network "
               "error, ncclRemoteError: A call failed possibly due to a network error or a remote process "
               "exiting prematurely.")


def digest(obj):
    """A short digest of a normalised config (None: no speculation)."""
    if obj is None:
        return None
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _send(sock, lock, msg):
    try:
        with lock:
            sock.sendall((json.dumps(msg) + "\n").encode())
    except OSError:
        pass


def _lines(sock):
    """Yield the JSON messages on `sock` until EOF (or a broken connection)."""
    buf = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                yield json.loads(line)
            except ValueError:
                return


def mismatch(head, hello):
    """The reason `hello` cannot join the head's group, or None."""
    rank = hello.get("node_rank")
    if hello.get("engine") != head["engine"]:
        return "node_rank %s runs %s, the head runs %s" % (rank, hello.get("engine"), head["engine"])
    if hello.get("nnodes") != head["nnodes"]:
        return "node_rank %s has nnodes %s, the head has nnodes %s" % (rank, hello.get("nnodes"), head["nnodes"])
    if hello.get("world_size") != head["world_size"]:
        return "node_rank %s has world size %s, the head has world size %s" % (
            rank, hello.get("world_size"), head["world_size"])
    if not isinstance(rank, int) or not 0 < rank < head["nnodes"]:
        return "node_rank %s is not a worker rank of a group of %d nodes" % (rank, head["nnodes"])
    if hello.get("spec") != head["spec"]:
        return "node_rank %s has a different speculative config: %s (head: %s)" % (
            rank, hello.get("spec_text") or "none", head["spec_text"] or "none")
    return None


class Head:
    """Node rank 0: listens on the rendezvous port, admits nodes, watches them."""

    def __init__(self, engine, port, nnodes, world_size, spec, spec_text, bind="0.0.0.0"):
        self.me = {"engine": engine, "nnodes": nnodes, "world_size": world_size, "spec": spec,
                   "spec_text": spec_text, "node_rank": 0}
        self.nnodes = nnodes
        self.lock = threading.Lock()
        self.joined = {}  # node_rank -> (sock, send lock, peer address)
        self.loaded = set()  # node ranks whose own ranks finished loading
        self.error = None  # a mismatch: the head fails
        self.lost = None  # a node that went away (before or after the rendezvous)
        self.complete = threading.Event()
        self.closing = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((bind, port))  # OSError (address in use) goes to the caller, as a TCPStore's bind does
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        if nnodes <= 1:
            self.complete.set()

    def waiting_for(self):
        """Nodes that have not joined yet."""
        with self.lock:
            return self.nnodes - 1 - len(self.joined)

    def loading(self):
        """Nodes that joined and are still loading."""
        with self.lock:
            return len(self.joined) - len(self.loaded)

    def failure(self):
        return self.error or self.lost

    def _accept(self):
        while not self.closing:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, addr), daemon=True).start()

    def _serve(self, conn, addr):
        send_lock = threading.Lock()
        lines = _lines(conn)
        hello = next(lines, None)
        if hello is None:
            conn.close()
            return
        with self.lock:
            why = mismatch(self.me, hello)
            if why is None and hello["node_rank"] in self.joined:
                why = "node_rank %s joined twice" % hello["node_rank"]
            if why is None and self.complete.is_set():
                why = "node_rank %s joined a group that already started" % hello["node_rank"]
            if why is not None:
                if self.error is None:
                    self.error = why
                _send(conn, send_lock, {"ok": False, "error": why})
                conn.close()
                return
            rank = hello["node_rank"]
            self.joined[rank] = (conn, send_lock, addr[0])
        for msg in lines:  # after the hello a node only says it loaded, then only ever closes its side
            if msg.get("loaded"):
                with self.lock:
                    self.loaded.add(rank)
                    done = len(self.loaded) == self.nnodes - 1 and not self.complete.is_set()
                if done:
                    for sock, lock, _peer in list(self.joined.values()):
                        _send(sock, lock, {"ok": True, "world_size": self.me["world_size"]})
                    self.complete.set()
        if not self.closing:
            with self.lock:
                if self.lost is None:
                    self.lost = "node_rank %d (%s) closed its connection to the group" % (rank, addr[0])

    def shutdown(self):
        """Graceful stop: tell every node (SGLang's ShutdownReq), then close."""
        self.closing = True
        for sock, lock, _peer in list(self.joined.values()):
            _send(sock, lock, {"shutdown": True})
            try:
                sock.close()
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass


class Worker:
    """Node rank > 0: connects to the head, says hello, waits for the group, then watches the head."""

    def __init__(self, engine, addr, port, node_rank, nnodes, world_size, spec, spec_text):
        self.addr, self.port = addr, port
        self.hello = {"engine": engine, "node_rank": node_rank, "nnodes": nnodes, "world_size": world_size,
                      "spec": spec, "spec_text": spec_text}
        self.sock = None
        self.error = None  # refused by the head
        self.lost = None  # the head went away
        self.shutdown = False  # the head stopped gracefully
        self.complete = threading.Event()
        self.connected = threading.Event()
        self.done = threading.Event()  # the connection ended (error, lost or shutdown)
        self.send_lock = threading.Lock()
        self.is_loaded = False

    def mark_loaded(self):
        """This node's ranks are loaded (sent once connected): the head starts the group when every node is."""
        with self.send_lock:
            if self.is_loaded:
                return
            self.is_loaded = True
            if self.connected.is_set():
                _send(self.sock, threading.Lock(), {"loaded": True})

    def start(self, give_up):
        """Connect in a thread, retrying until `give_up()` is true."""
        threading.Thread(target=self._run, args=(give_up,), daemon=True).start()

    def failure(self):
        return self.error or self.lost

    def _run(self, give_up):
        while True:
            try:
                self.sock = socket.create_connection((self.addr, self.port), timeout=2)
                self.sock.settimeout(None)
                break
            except OSError:
                if give_up():
                    return
                time.sleep(0.2)
        with self.send_lock:
            _send(self.sock, threading.Lock(), self.hello)
            if self.is_loaded:
                _send(self.sock, threading.Lock(), {"loaded": True})
            self.connected.set()
        for msg in _lines(self.sock):
            if msg.get("shutdown"):
                self.shutdown = True
                break
            if msg.get("ok") is False:
                self.error = msg.get("error") or "refused by the head"
                break
            if msg.get("ok"):
                self.complete.set()
        else:
            self.lost = "the head (%s:%d) closed the connection to the group" % (self.addr, self.port)
        self.done.set()

    def wait_group(self, sup, n_ranks, stopper, started, timeout):
        """Both engines' worker nodes: wait until this node's ranks loaded and the whole group started.

        Returns None (the group is up), "stop" (SIGTERM while waiting) or the error that ends the node: the head's
        refusal or loss, a rank that crashed, or torch.distributed's timeout (connecting, then waiting for the group).
        """
        while True:
            if stopper.wait(0.2):
                return "stop"
            error = self.failure() or sup.crashed()
            if not error and len(sup.ready) < n_ranks:
                error = sup.wait_ready(n_ranks, 0.01)
                error = None if error == "timeout" else error
            if not error and len(sup.ready) == n_ranks:
                self.mark_loaded()
            if error or (self.complete.is_set() and len(sup.ready) == n_ranks):
                return error
            if time.monotonic() - started > timeout:
                if not self.connected.is_set():
                    return ("torch.distributed.DistNetworkError: The client socket has timed out after %dms while "
                            "trying to connect to (%s, %d)." % (timeout * 1000, self.addr, self.port))
                return "torch.distributed.DistStoreError: Timed out after %d seconds waiting for the group" % timeout

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
