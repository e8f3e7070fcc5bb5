"""An authenticated message channel over TCP, keyed by a per-cluster secret.

Every sparkdl socket speaks this protocol. A peer must prove it knows the cluster's secret
before anything it sends is parsed, and every frame after the handshake carries HMAC-SHA256
tags over a per-direction sequence number, so frames cannot be forged, replayed or reordered
by anyone who lacks the secret. Messages are JSON (never pickle), so even an authenticated
peer cannot make the other side execute code.

Handshake (both sides prove the secret, neither reveals it), bound to the server's ``Endpoint``
``E`` (cluster, node, service): a client names the endpoint it means to reach, so a connection
spliced onto another endpoint of the cluster fails authentication on both ends::

    server -> client   MAGIC + server_nonce
    client -> server   client_nonce + HMAC(secret, "client" + E + server_nonce + client_nonce)
    server -> client   HMAC(secret, "server" + E + client_nonce + server_nonce)

Then each frame is ``length (4) | kind (1) | head_tag (32) | body_tag (32) | payload``, with
``head_tag = HMAC(key, direction + seq + "head" + length + kind)`` and ``body_tag =
HMAC(key, direction + seq + "body" + kind + payload)``, the session key derived from ``E`` and
both nonces. The receiver checks the head tag before it allocates anything for the payload,
so a forged header costs it nothing; a genuine one is then held to its kind's limit: ``J`` (a
JSON message) ``MAX_JSON_BYTES``, ``B`` (opaque bytes, e.g. Arrow IPC data) ``MAX_FRAME_BYTES``.

Every wait is bounded: a send by the send timeout (``DEFAULT_SEND_TIMEOUT_S`` unless set), a receive
by its own, ``connect`` by its timeout, the server's handshake by ``HANDSHAKE_TIMEOUT_S``; TCP
keepalive notices a peer whose host vanished.

Admission (``admission.py``): silent connections cannot lock clients out. A server handshakes
with at most ``MAX_HANDSHAKES`` unauthenticated connections, ``MAX_HANDSHAKES_PER_SOURCE`` from
one address, and a newcomer takes the slot of the oldest pending one from its own address (else
from the address holding most): an idle flood displaces itself, never a client arriving after
it, even from the same address. An evicted client is told ``BUSY`` and ``connect`` retries.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import logging
import os
import secrets
import select
import socket
import struct
import threading
import time
from typing import Any, Callable

from ..common.errors import AuthenticationError as AuthenticationError  # re-exported: the channel's errors
from ..common.errors import ChannelError as ChannelError
from ..common.errors import ChannelTimeout as ChannelTimeout
from ..common.errors import NoSlot
from ..common.timeouts import ACCEPT_RETRY_S, CLOSE_JOIN_S, DEFAULT_SEND_TIMEOUT_S, HANDSHAKE_TIMEOUT_S
from ..common.timeouts import KEEPALIVE_IDLE_S as KEEPALIVE_IDLE_S  # re-exported: the channel's timings
from .admission import BUSY, Admission, Pending, retry_while_no_slot, say_busy
from .endpoint import Endpoint
from .rejection_log import RejectionLog
from .tcp_options import KEEPALIVE_PROBES as KEEPALIVE_PROBES
from .tcp_options import tune

logger = logging.getLogger(__name__)

MAGIC = b"SPARKDL2"
NONCE_BYTES = 32
TAG_BYTES = 32
MAX_FRAME_BYTES = 64 * 1024 * 1024  # binary frames (Arrow record batches)
MAX_JSON_BYTES = 1024 * 1024  # control messages are small: a bigger JSON frame is refused unread
MAX_HANDSHAKES = 32  # unauthenticated connections a server handshakes with at once (a newcomer evicts one)
MAX_HANDSHAKES_PER_SOURCE = 8  # of them from one address (a newcomer evicts that address's oldest)
MAX_CHANNELS = 1024  # authenticated channels a server keeps open at once; more are refused
KIND_JSON = b"J"
KIND_BYTES = b"B"
_HEAD = struct.Struct("!I1s")  # payload length, kind


def new_secret() -> bytes:
    """Return a fresh random per-cluster secret."""
    return secrets.token_bytes(32)


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Read exactly ``count`` bytes from a blocking socket (the handshake) by ``deadline`` (monotonic)."""
    chunks = []
    while count:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise ChannelError("connection closed by peer")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _remaining(deadline: float) -> float:
    """Seconds until ``deadline`` (monotonic); ``socket.timeout`` once it has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise socket.timeout("handshake took too long")
    return remaining


def _frame_limit(kind: bytes) -> int:
    """The largest payload a frame of ``kind`` may carry (read at call time: tests lower them)."""
    if kind == KIND_JSON:
        return min(MAX_JSON_BYTES, MAX_FRAME_BYTES)
    if kind == KIND_BYTES:
        return MAX_FRAME_BYTES
    raise ChannelError(f"unknown frame kind {kind!r}")


class Channel:
    """One authenticated, bidirectional connection. Thread-safe for one sender and one receiver."""

    def __init__(self, sock: socket.socket, session_key: bytes, is_server: bool):
        tune(sock)
        sock.setblocking(False)  # every wait is a poll with its own deadline
        self._sock = sock
        self._key = session_key
        self._send_dir, self._recv_dir = (b"S", b"C") if is_server else (b"C", b"S")
        self._send_seq = 0
        self._recv_seq = 0
        self._send_lock = threading.Lock()
        self._send_timeout: float = DEFAULT_SEND_TIMEOUT_S
        self._closed = False

    @property
    def local_address(self) -> str:
        """The local IP address this channel is bound to (the address peers can reach us on)."""
        return self._sock.getsockname()[0]

    def set_send_timeout(self, seconds: float | None) -> None:
        """Bound each send by ``seconds`` (None: ``DEFAULT_SEND_TIMEOUT_S``). A send that times out
        raises ``ChannelTimeout`` and closes the channel. Receives take their own timeout."""
        self._send_timeout = DEFAULT_SEND_TIMEOUT_S if seconds is None else seconds

    def has_incoming(self) -> bool:
        """Whether the peer has sent something not yet received, or closed (never blocks)."""
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        return bool(poller.poll(0))

    def send(self, message: dict[str, Any]) -> None:
        """Send one JSON-serialisable message."""
        self._send_frame(KIND_JSON, json.dumps(message, separators=(",", ":")).encode())

    def send_bytes(self, data) -> None:
        """Send one binary frame (any bytes-like object, e.g. an Arrow IPC buffer), without copying it."""
        self._send_frame(KIND_BYTES, data)

    def _send_frame(self, kind: bytes, payload) -> None:
        view = memoryview(payload).cast("B")
        with self._send_lock:
            if self._closed:
                raise ChannelError("the channel is closed")
            seq = struct.pack("!Q", self._send_seq)
            head = _HEAD.pack(len(view), kind)
            body_mac = hmac.new(self._key, self._send_dir + seq + b"body" + kind, hashlib.sha256)
            body_mac.update(view)
            header = head + _mac(self._key, self._send_dir, seq, b"head", head) + body_mac.digest()
            deadline = time.monotonic() + self._send_timeout
            try:
                if len(view) < 65536:  # small frames: one write (fewer syscalls, one TCP segment)
                    self._send_all(memoryview(header + view), deadline)
                else:  # large frames: no copy of the payload
                    self._send_all(memoryview(header), deadline)
                    self._send_all(view, deadline)
            except socket.timeout as exc:
                self.close()  # part of a frame may be out: nothing more can be sent on this channel
                raise ChannelTimeout(f"the peer accepted no data for {self._send_timeout} s") from exc
            except ChannelError:
                self.close()
                raise
            except (OSError, ValueError) as exc:  # ValueError: the socket was closed under us
                self.close()
                raise ChannelError(str(exc)) from exc
            self._send_seq += 1

    def _send_all(self, view: memoryview, deadline: float | None) -> None:
        while view:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                self._wait(select.POLLOUT, deadline)
                continue
            view = view[sent:]

    def _recv_into(self, view: memoryview, deadline: float | None) -> None:
        while view:
            try:
                received = self._sock.recv_into(view)
            except BlockingIOError:
                self._wait(select.POLLIN, deadline)
                continue
            if not received:
                raise ChannelError("connection closed by peer")
            view = view[received:]

    def _recv_exact(self, count: int, deadline: float | None, allocate: Callable[[int], Any] = bytearray):
        buffer = allocate(count)
        self._recv_into(memoryview(buffer), deadline)
        return buffer

    def _wait(self, event: int, deadline: float | None) -> None:
        """Wait until the socket is ready for ``event``; socket.timeout once ``deadline`` passes."""
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise socket.timeout("timed out")
        if self._closed:
            raise ChannelError("the channel is closed")
        poller = select.poll()
        poller.register(self._sock, event)
        # close() from another thread shuts the socket down first, which ends this wait.
        if not poller.poll(None if remaining is None else max(1, int(remaining * 1000) + 1)):
            raise socket.timeout("timed out")

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """Receive one JSON message; raises ChannelError on a bad tag, EOF, timeout or binary frame."""
        message = self.recv_any(timeout)
        if not isinstance(message, dict):
            raise ChannelError("expected a JSON message, got a binary frame")
        return message

    def recv_any(self, timeout: float | None = None, allocate: Callable[[int], Any] = bytearray) -> Any:
        """Receive one frame: a dict for a JSON message, a binary frame's bytes in what
        ``allocate(size)`` gives (a writable buffer; a bytearray by default).

        ``timeout`` bounds the whole frame (``ChannelTimeout``), so a peer trickling bytes cannot
        hold the receiver longer than one silent one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            head = bytes(self._recv_exact(4, deadline))
            (length,) = struct.unpack("!I", head)
            if length > MAX_FRAME_BYTES:
                raise ChannelError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
            rest = bytes(self._recv_exact(1 + 2 * TAG_BYTES, deadline))
            kind, head_tag, body_tag = rest[:1], rest[1 : 1 + TAG_BYTES], rest[1 + TAG_BYTES :]
            seq = struct.pack("!Q", self._recv_seq)
            # Checked before anything is allocated for the payload: a forged header costs nothing.
            if not hmac.compare_digest(head_tag, _mac(self._key, self._recv_dir, seq, b"head", head + kind)):
                raise AuthenticationError("frame header failed its integrity check")
            limit = _frame_limit(kind)
            if length > limit:
                raise ChannelError(
                    f"{'JSON' if kind == KIND_JSON else 'binary'} frame of {length} bytes "
                    f"exceeds the {limit}-byte limit"
                )
            body = self._recv_exact(length, deadline, allocate if kind == KIND_BYTES else bytearray)
        except socket.timeout as exc:
            raise ChannelTimeout(f"no message within {timeout} s") from exc
        except OSError as exc:
            if isinstance(exc, ChannelError):
                raise
            raise ChannelError(str(exc)) from exc
        except ValueError as exc:  # the socket was closed under us (no descriptor to poll)
            raise ChannelError(f"the channel is closed ({exc})") from exc
        mac = hmac.new(self._key, self._recv_dir + seq + b"body" + kind, hashlib.sha256)
        mac.update(body)
        if not hmac.compare_digest(body_tag, mac.digest()):
            raise AuthenticationError("frame failed its integrity check")
        self._recv_seq += 1
        if kind == KIND_BYTES:
            return body
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ChannelError(f"frame is not a JSON message: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _server_handshake(sock: socket.socket, secret: bytes, endpoint: Endpoint, evicted: Callable[[], bool]) -> Channel:
    """The server's side; ``evicted()`` settles the connection's slot once its answer is in."""
    # One deadline for the whole handshake, so a peer trickling bytes cannot hold a thread.
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    identity = endpoint.encode()
    server_nonce = os.urandom(NONCE_BYTES)
    sock.sendall(MAGIC + server_nonce)
    answer = _recv_exact(sock, NONCE_BYTES + TAG_BYTES, deadline)
    if evicted():
        raise NoSlot("evicted while handshaking")
    client_nonce, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
    if not hmac.compare_digest(proof, _mac(secret, b"client", identity, server_nonce, client_nonce)):
        raise AuthenticationError(f"client did not prove the cluster secret for {endpoint}")
    sock.sendall(_mac(secret, b"server", identity, client_nonce, server_nonce))
    return Channel(sock, _mac(secret, b"session", identity, server_nonce, client_nonce), is_server=True)


def connect(address: tuple[str, int], secret: bytes, timeout: float = 30.0, *, endpoint: Endpoint) -> Channel:
    """Open an authenticated channel to the ChannelServer at ``address`` that is ``endpoint``,
    within ``timeout`` seconds in all (``socket.timeout``, or ``ChannelTimeout`` if the server
    never had a handshake slot for us: such refusals are retried after a short growing pause).

    A server that is another endpoint (even of the same cluster) fails the handshake:
    ``AuthenticationError`` here, a refused connection there."""
    deadline = time.monotonic() + timeout
    try:
        return retry_while_no_slot(lambda: _connect_once(address, secret, endpoint, deadline), deadline)
    except NoSlot as exc:
        raise ChannelTimeout(f"server at {address} had no handshake slot for us within {timeout} s ({exc})") from exc


def _connect_once(address: tuple[str, int], secret: bytes, endpoint: Endpoint, deadline: float) -> Channel:
    """One attempt at ``connect``; ``NoSlot`` when the server turned the connection away."""
    identity = endpoint.encode()
    sock = socket.create_connection(address, timeout=_remaining(deadline))
    try:
        try:
            hello = _recv_exact(sock, len(MAGIC) + NONCE_BYTES, deadline)
        except (ChannelError, ConnectionResetError) as exc:  # closed before its hello: no slot for us
            raise NoSlot(str(exc)) from exc
        if not hello.startswith(MAGIC):
            raise ChannelError(f"{address} does not speak this version of the sparkdl protocol")
        server_nonce = hello[len(MAGIC) :]
        client_nonce = os.urandom(NONCE_BYTES)
        try:
            sock.sendall(client_nonce + _mac(secret, b"client", identity, server_nonce, client_nonce))
            proof = _recv_exact(sock, TAG_BYTES, deadline)
        except (ConnectionResetError, BrokenPipeError) as exc:  # a server refusing a secret reads it all first
            raise NoSlot(str(exc)) from exc
        except ChannelError as exc:
            raise AuthenticationError(
                f"server at {address} closed the connection after our proof: wrong cluster "
                f"secret, or it is not the {endpoint} (or not a sparkdl server)"
            ) from exc
        if proof == BUSY:
            raise NoSlot("the server evicted this connection to admit another")
        if not hmac.compare_digest(proof, _mac(secret, b"server", identity, client_nonce, server_nonce)):
            raise AuthenticationError(f"server at {address} did not prove the cluster secret for {endpoint}")
        return Channel(sock, _mac(secret, b"session", identity, server_nonce, client_nonce), is_server=False)
    except BaseException:
        sock.close()
        raise


Handler = Callable[[Channel], None]


class ChannelServer:
    """Accepts authenticated channels and hands each to ``handler`` on its own thread.

    The server binds to one deliberate address (never all interfaces by accident) and is
    ``endpoint``: clients must name it (``connect(..., endpoint=...)``). Peers that fail the
    handshake are dropped and counted in ``rejected``; the handler only ever sees
    authenticated channels.
    """

    def __init__(
        self,
        secret: bytes,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "sparkdl-channel",
        *,
        endpoint: Endpoint,
    ):
        self._secret = secret
        self.endpoint = endpoint
        self._handler = handler
        self._name = name
        self._listener = socket.create_server((host, port), backlog=128)
        self._stopping = threading.Event()
        self._channels: set[Channel] = set()
        self._serving: set[threading.Thread] = set()  # one per connection, until its handler returns
        self._lock = threading.Lock()
        self._admission = Admission(MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE)
        self.rejected = 0  #: connections refused or failing the handshake
        self._rejections = RejectionLog(name, logger)
        self._address: tuple[str, int] = tuple(self._listener.getsockname()[:2])  # still known once closed
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) peers connect to."""
        return self._address

    def _accept_loop(self) -> None:
        """Accept until closed. Nothing a peer does ends this loop: a connection the server cannot
        serve is refused, and running out of descriptors or memory only pauses it."""
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError as exc:
                if self._stopping.is_set():
                    return
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._refuse(None, f"cannot accept a connection ({exc.strerror}); retrying")
                    self._stopping.wait(ACCEPT_RETRY_S)
                continue  # e.g. ECONNABORTED: that connection is gone, the next may come
            pending = self._admission.admit(sock, peer[0])
            thread = threading.Thread(target=self._serve, args=(pending,), name=f"{self._name}-conn", daemon=True)
            with self._lock:
                self._serving.add(thread)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to spare: refuse this one, keep serving
                with self._lock:
                    self._serving.discard(thread)
                self._admission.settle(pending)
                self._refuse(sock, f"no thread to serve it ({exc})")  # closed before its hello: the client retries

    def _refuse(self, sock: socket.socket | None, reason: str) -> None:
        with self._lock:
            self.rejected += 1
        self._rejections.record(reason)
        if sock is not None:
            sock.close()

    def _serve(self, pending: Pending) -> None:
        try:
            self._serve_connection(pending)
        finally:
            with self._lock:
                self._serving.discard(threading.current_thread())

    def _serve_connection(self, pending: Pending) -> None:
        sock = pending.sock
        try:
            channel = _server_handshake(sock, self._secret, self.endpoint, lambda: self._admission.settle(pending))
        except (OSError, ChannelError) as exc:
            if self._admission.settle(pending):
                say_busy(sock)
                self._refuse(sock, f"evicted an unauthenticated connection from {pending.source} to admit a newer one")
            else:
                self._refuse(sock, f"rejected a connection: {exc}")
            return
        with self._lock:
            stopping = self._stopping.is_set()
            full = not stopping and len(self._channels) >= MAX_CHANNELS
            if not (stopping or full):
                self._channels.add(channel)
        if stopping or full:
            channel.close()
            if full:
                self._refuse(None, f"refused an authenticated channel: more than {MAX_CHANNELS} are open")
            return
        try:
            self._handler(channel)
        except ChannelError as exc:
            logger.debug("%s: channel closed: %s", self._name, exc)
        except Exception:  # a handler bug must not kill the server silently
            logger.exception("%s: handler failed", self._name)
        finally:
            with self._lock:
                self._channels.discard(channel)
            channel.close()

    def close(self) -> None:
        """Stop accepting, close every open channel and wait (``CLOSE_JOIN_S`` in all) for the
        threads serving them: a handler ends once its channel is closed."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            channels = list(self._channels)
        for channel in channels:
            channel.close()
        self._thread.join(timeout=5)
        with self._lock:
            serving = [t for t in self._serving if t is not threading.current_thread()]
        deadline = time.monotonic() + CLOSE_JOIN_S
        for thread in serving:
            thread.join(max(0.0, deadline - time.monotonic()))
