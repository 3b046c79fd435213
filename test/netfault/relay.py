"""Packet-level helpers for tidelog's network-namespace fault suite (test/netfault).

This kernel has no netem qdisc, so latency comes from this relay: it forwards Ethernet frames
between two interfaces that are not bridged (AF_PACKET raw sockets), each one after a delay.
The suite detaches a broker's switch-side veth from the bridge and puts the relay between it
and a spare veth on the bridge, so the broker's established TCP connections keep running,
only slower.

  relay.py offload IFACE...           turn off checksum offload, scatter-gather, TSO and GSO
  relay.py delay A B DELAY_MS JITTER_MS SEED
                                      forward A <-> B, each frame DELAY_MS (+ up to JITTER_MS)
                                      late; prints "ready" once both sockets are bound; on
                                      SIGTERM stops reading, delivers what it holds, exits

Why offloads go off: a frame read from a packet socket and sent again loses the kernel's
"checksum not computed yet" mark (the receiver would drop it as corrupt), and a GSO frame of
64 KiB cannot be sent again on a 1500-byte link. With offloads off every frame on these veths
is a finished, MTU-sized packet, as on a wire.
"""

import collections
import ctypes
import fcntl
import random
import select
import signal
import socket
import struct
import sys
import time

SIOCETHTOOL = 0x8946
# Legacy ethtool "set" commands (linux/ethtool.h): tx checksum, scatter-gather, TSO, GSO, GRO.
ETHTOOL_SET = {"tx": 0x17, "sg": 0x19, "tso": 0x1F, "gso": 0x24, "gro": 0x2C}
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def offload_off(names):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for name in names:
        for feature, cmd in ETHTOOL_SET.items():
            value = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
            ifreq = struct.pack("16sP", name.encode(), ctypes.addressof(value))
            try:
                fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
            except OSError as error:
                # GRO may be fixed on some drivers; the others must go off.
                if feature != "gro":
                    sys.exit(f"offload: {name} {feature}: {error}")


def packet_socket(name):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.bind((name, 0))
    sock.setblocking(False)
    return sock


def delay(a, b, delay_ms, jitter_ms, seed):
    rng = random.Random(seed)
    socks = {a: packet_socket(a), b: packet_socket(b)}
    other = {a: b, b: a}
    # One FIFO per direction: due times never decrease, so TCP sees no reordering from jitter.
    queues = {a: collections.deque(), b: collections.deque()}
    last_due = {a: 0.0, b: 0.0}
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    by_fd = {s.fileno(): name for name, s in socks.items()}
    print("ready", flush=True)
    forwarded = 0
    dropped = 0
    while True:
        now = time.monotonic()
        for source, queue in queues.items():
            target = socks[other[source]]
            while queue and queue[0][0] <= now:
                _, frame = queue.popleft()
                try:
                    target.send(frame)
                    forwarded += 1
                except OSError:
                    # A full queue or a link going away: the frame is lost, as on a wire.
                    dropped += 1
        if stopping and not queues[a] and not queues[b]:
            break
        heads = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(heads) - now) if heads else 0.5
        readable = [] if stopping else list(by_fd)
        if stopping:
            time.sleep(min(timeout, 0.05))
            continue
        try:
            ready, _, _ = select.select(readable, [], [], timeout)
        except InterruptedError:
            continue
        for fd in ready:
            source = by_fd[fd]
            sock = socks[source]
            while True:
                try:
                    frame, address = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                if address[2] == PACKET_OUTGOING:
                    continue
                due = time.monotonic() + (delay_ms + rng.random() * jitter_ms) / 1000
                due = max(due, last_due[source])
                last_due[source] = due
                queues[source].append((due, frame))
    print(f"forwarded {forwarded} frames, dropped {dropped}", flush=True)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "offload":
        offload_off(sys.argv[2:])
    elif command == "delay":
        delay(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(f"unknown command {command}")
