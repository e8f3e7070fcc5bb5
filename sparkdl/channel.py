"""An authenticated message channel over TCP, keyed by a per-cluster secret.

Every sparkdl socket speaks this protocol. A peer must prove it knows the cluster's secret
before anything it sends is parsed, and every frame after the handshake carries an
HMAC-SHA256 tag over a per-direction sequence number, so frames cannot be forged, replayed
or reordered by anyone who lacks the secret. Messages are JSON (never pickle), so even an
authenticated peer cannot make the other side execute code.

Handshake (both sides prove the secret, neither reveals it)::

    server -> client   MAGIC + server_nonce
    client -> server   client_nonce + HMAC(secret, "client" + server_nonce + client_nonce)
    server -> client   HMAC(secret, "server" + client_nonce + server_nonce)

Then each frame is ``length (4 bytes) | tag (32 bytes) | kind (1 byte) | payload``, with
``tag = HMAC(session_key, direction + seq + kind + payload)`` and a session key derived from
both nonces. ``kind`` is ``J`` (a JSON message) or ``B`` (opaque bytes, e.g. Arrow IPC data).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import select
import errno
import socket
import struct
import threading
import time
from typing import Any, Callable

from .errors import SparkDLError

logger = logging.getLogger(__name__)

MAGIC = b"SPARKDL1"
NONCE_BYTES = 32
TAG_BYTES = 32
MAX_FRAME_BYTES = 64 * 1024 * 1024   # binary frames (Arrow record batches)
MAX_JSON_BYTES = 1024 * 1024         # control messages are small: a bigger JSON frame is refused unread
HANDSHAKE_TIMEOUT_S = 10.0
MAX_HANDSHAKES = 32      # unauthenticated connections a server handshakes with at once; more are refused
MAX_CHANNELS = 1024      # authenticated channels a server keeps open at once; more are refused
ACCEPT_RETRY_S = 0.1     # pause after accept() fails for want of descriptors or memory
REJECTION_LOG_S = 10.0   # at most one log line per this many seconds about refused connections
KIND_JSON = b"J"
KIND_BYTES = b"B"


class ChannelError(SparkDLError, ConnectionError):
    """The peer failed authentication, broke the protocol, or went away."""


class AuthenticationError(ChannelError):
    """The peer did not prove the cluster's secret."""


def new_secret() -> bytes:
    """Return a fresh random per-cluster secret."""
    return secrets.token_bytes(32)


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, count: int, deadline: float | None = None) -> bytes:
    """Read exactly ``count`` bytes; with ``deadline`` (monotonic) the whole read is bounded."""
    chunks = []
    while count:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("handshake took too long")
            sock.settimeout(remaining)
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise ChannelError("connection closed by peer")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _recv_into(sock: socket.socket, count: int, first: bytes = b"") -> bytearray:
    """Read exactly ``count`` bytes (``first`` already read) into one preallocated buffer (no
    per-chunk copies)."""
    buffer = bytearray(count)
    buffer[:len(first)] = first
    view = memoryview(buffer)[len(first):]
    count -= len(first)
    while count:
        received = sock.recv_into(view, count)
        if not received:
            raise ChannelError("connection closed by peer")
        view = view[received:]
        count -= received
    return buffer


class Channel:
    """One authenticated, bidirectional connection. Thread-safe for one sender and one receiver."""

    def __init__(self, sock: socket.socket, session_key: bytes, is_server: bool):
        self._sock = sock
        self._key = session_key
        self._send_dir, self._recv_dir = (b"S", b"C") if is_server else (b"C", b"S")
        self._send_seq = 0
        self._recv_seq = 0
        self._send_lock = threading.Lock()
        self._closed = False

    @property
    def local_address(self) -> str:
        """The local IP address this channel is bound to (the address peers can reach us on)."""
        return self._sock.getsockname()[0]

    def set_timeout(self, seconds: float | None) -> None:
        """Bound blocking sends (and the next receive) by ``seconds``; a send that times out raises."""
        self._sock.settimeout(seconds)

    def has_incoming(self) -> bool:
        """Whether the peer has sent something not yet received (never blocks)."""
        readable, _, _ = select.select([self._sock], [], [], 0)
        return bool(readable)

    def send(self, message: dict[str, Any]) -> None:
        """Send one JSON-serialisable message."""
        self._send_frame(KIND_JSON, json.dumps(message, separators=(",", ":")).encode())

    def send_bytes(self, data) -> None:
        """Send one binary frame (any bytes-like object, e.g. an Arrow IPC buffer), without copying it."""
        self._send_frame(KIND_BYTES, data)

    def _send_frame(self, kind: bytes, payload) -> None:
        view = memoryview(payload).cast("B")
        with self._send_lock:
            mac = hmac.new(self._key, self._send_dir + struct.pack("!Q", self._send_seq) + kind, hashlib.sha256)
            mac.update(view)
            header = struct.pack("!I", len(view) + 1) + mac.digest() + kind
            if len(view) < 65536:  # small frames: one write (fewer syscalls, one TCP segment)
                self._sock.sendall(header + view)
            else:  # large frames: no copy of the payload
                self._sock.sendall(header)
                self._sock.sendall(view)
            self._send_seq += 1

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """Receive one JSON message; raises ChannelError on a bad tag, EOF, timeout or binary frame."""
        message = self.recv_any(timeout)
        if not isinstance(message, dict):
            raise ChannelError("expected a JSON message, got a binary frame")
        return message

    def recv_any(self, timeout: float | None = None) -> dict[str, Any] | bytearray:
        """Receive one frame: a dict for a JSON message, a bytearray for a binary frame."""
        self._sock.settimeout(timeout)
        try:
            (length,) = struct.unpack("!I", _recv_exact(self._sock, 4))
            if length > MAX_FRAME_BYTES:
                raise ChannelError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
            if length < 1:
                raise ChannelError("empty frame")
            tag = _recv_exact(self._sock, TAG_BYTES)
            kind = _recv_exact(self._sock, 1)
            if kind == KIND_JSON and length > MAX_JSON_BYTES:  # refused before anything is allocated for it
                raise ChannelError(f"JSON frame of {length} bytes exceeds the {MAX_JSON_BYTES}-byte limit")
            body = _recv_into(self._sock, length, first=kind)
        except socket.timeout as exc:
            raise ChannelError(f"no message within {timeout} s") from exc
        except OSError as exc:
            if isinstance(exc, ChannelError):
                raise
            raise ChannelError(str(exc)) from exc
        kind = bytes(body[:1])
        mac = hmac.new(self._key, self._recv_dir + struct.pack("!Q", self._recv_seq), hashlib.sha256)
        mac.update(body)
        if not hmac.compare_digest(tag, mac.digest()):
            raise AuthenticationError("frame failed its integrity check")
        self._recv_seq += 1
        if kind == KIND_BYTES:
            del body[:1]
            return body
        if kind != KIND_JSON:
            raise ChannelError(f"unknown frame kind {kind!r}")
        try:
            return json.loads(body[1:])
        except ValueError as exc:
            raise ChannelError(f"frame is not a JSON message: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _server_handshake(sock: socket.socket, secret: bytes) -> Channel:
    # One deadline for the whole handshake, so a peer trickling bytes cannot hold a thread.
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    server_nonce = os.urandom(NONCE_BYTES)
    sock.sendall(MAGIC + server_nonce)
    answer = _recv_exact(sock, NONCE_BYTES + TAG_BYTES, deadline)
    client_nonce, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
    if not hmac.compare_digest(proof, _mac(secret, b"client", server_nonce, client_nonce)):
        raise AuthenticationError("client did not prove the cluster secret")
    sock.sendall(_mac(secret, b"server", client_nonce, server_nonce))
    sock.settimeout(None)
    return Channel(sock, _mac(secret, b"session", server_nonce, client_nonce), is_server=True)


def connect(address: tuple[str, int], secret: bytes, timeout: float = 30.0) -> Channel:
    """Open an authenticated channel to a ChannelServer at ``address``."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.monotonic() + timeout
        hello = _recv_exact(sock, len(MAGIC) + NONCE_BYTES, deadline)
        if not hello.startswith(MAGIC):
            raise ChannelError(f"{address} does not speak the sparkdl protocol")
        server_nonce = hello[len(MAGIC):]
        client_nonce = os.urandom(NONCE_BYTES)
        sock.sendall(client_nonce + _mac(secret, b"client", server_nonce, client_nonce))
        try:
            proof = _recv_exact(sock, TAG_BYTES, deadline)
        except ChannelError as exc:
            raise AuthenticationError(f"server at {address} closed the connection after our proof: wrong "
                                      "cluster secret (or not a sparkdl server)") from exc
        if not hmac.compare_digest(proof, _mac(secret, b"server", client_nonce, server_nonce)):
            raise AuthenticationError(f"server at {address} did not prove the cluster secret")
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return Channel(sock, _mac(secret, b"session", server_nonce, client_nonce), is_server=False)


Handler = Callable[[Channel], None]


class _RejectionLog:
    """Logs refused connections without flooding: the first at once, then at most one summary
    line per ``REJECTION_LOG_S`` seconds (how many, and the last reason), written when the
    period ends even if no other connection comes."""

    def __init__(self, name: str):
        self._name = name
        self._lock = threading.Lock()
        self._last_logged = float("-inf")
        self._unlogged = 0
        self._last_reason = ""
        self._timer: threading.Timer | None = None

    def record(self, reason: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last_logged >= REJECTION_LOG_S and not self._unlogged:
                self._last_logged = now
                first = True
            else:
                first = False
                self._unlogged += 1
                self._last_reason = reason
                if self._timer is None:
                    self._timer = threading.Timer(max(0.0, self._last_logged + REJECTION_LOG_S - now), self._flush)
                    self._timer.name, self._timer.daemon = f"sparkdl-{self._name}-rejections", True
                    self._timer.start()
        if first:
            logger.warning("%s: %s", self._name, reason)

    def _flush(self) -> None:
        with self._lock:
            count, reason, self._unlogged, self._timer = self._unlogged, self._last_reason, 0, None
            self._last_logged = time.monotonic()
        if count:
            logger.warning("%s: refused %d more connection(s) in the last %.0f s; the last: %s", self._name, count,
                           REJECTION_LOG_S, reason)


class ChannelServer:
    """Accepts authenticated channels and hands each to ``handler`` on its own thread.

    The server binds to one deliberate address (never all interfaces by accident). Peers
    that fail the handshake are dropped and counted in ``rejected``; the handler only ever
    sees authenticated channels.
    """

    def __init__(self, secret: bytes, handler: Handler, host: str = "127.0.0.1", port: int = 0,
                 name: str = "sparkdl-channel"):
        self._secret = secret
        self._handler = handler
        self._name = name
        self._listener = socket.create_server((host, port), backlog=128)
        self._stopping = threading.Event()
        self._channels: set[Channel] = set()
        self._lock = threading.Lock()
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self.rejected = 0  #: connections refused or failing the handshake
        self._rejections = _RejectionLog(name)
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
                sock, _ = self._listener.accept()
            except OSError as exc:
                if self._stopping.is_set():
                    return
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._refuse(None, f"cannot accept a connection ({exc.strerror}); retrying")
                    self._stopping.wait(ACCEPT_RETRY_S)
                continue  # e.g. ECONNABORTED: that connection is gone, the next may come
            if not self._handshakes.acquire(blocking=False):
                self._refuse(sock, f"more than {MAX_HANDSHAKES} connections are handshaking")
                continue
            try:
                threading.Thread(target=self._serve, args=(sock,), name=f"{self._name}-conn", daemon=True).start()
            except RuntimeError as exc:  # no thread to spare: refuse this one, keep serving
                self._handshakes.release()
                self._refuse(sock, f"no thread to serve it ({exc})")

    def _refuse(self, sock: socket.socket | None, reason: str) -> None:
        with self._lock:
            self.rejected += 1
        self._rejections.record(reason)
        if sock is not None:
            sock.close()

    def _serve(self, sock: socket.socket) -> None:
        try:
            channel = _server_handshake(sock, self._secret)
        except (OSError, ChannelError) as exc:
            self._refuse(sock, f"rejected a connection: {exc}")
            return
        finally:
            self._handshakes.release()
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
        """Stop accepting and close every open channel."""
        self._stopping.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            channels = list(self._channels)
        for channel in channels:
            channel.close()
        self._thread.join(timeout=5)
