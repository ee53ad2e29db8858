#!/usr/bin/env python3
"""A hostile process kernel (impl/PROTOCOL.md): announces a frame of 8 GiB, sends none of it,
and sleeps. It imitates a kernel whose size field is garbage (an uninitialised length, a wrong
offset); attest must not allocate what a header claims before the payload arrives.
    huge_frame_kernel.py hello   the reply to HELLO is the huge frame
    huge_frame_kernel.py result  a valid DESCRIPTOR (protocol 3), then a huge FORWARD_RESULT
    huge_frame_kernel.py deaf    a valid DESCRIPTOR whose contract makes every request over 64 KiB
                                 (Tk >= 600, Dk = 64), then it never reads again: attest's write of
                                 the first request fills the pipe and must not block past its limits
    huge_frame_kernel.py slow DIR   the same descriptor; it reads each request over 2.5 s, then never
                                 answers: the write and the read must share one limit. While it
                                 serves a request it writes "START NOW" (monotonic seconds) to DIR/PID
The protocol runs on the descriptors named by ATTEST_PROTOCOL_FDS ("IN,OUT") when it is set,
on stdin/stdout otherwise."""
import os
import struct
import sys
import threading
import time

MAGIC = 0x54535441
HELLO, DESCRIPTOR, FORWARD, FORWARD_RESULT, BYE = 1, 2, 3, 4, 11
CAPS = (1 << 9) - 1  # causal ... rope: everything but decode
HUGE = 8 << 30


def channel():
    fds = os.environ.get("ATTEST_PROTOCOL_FDS")
    if fds:
        fd_in, fd_out = (int(x) for x in fds.split(","))
        return fd_in, fd_out
    return 0, 1


def read_exactly(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def header(kind, size):
    return struct.pack("<IIQ", MAGIC, kind, size)


SLOW_READ_SECONDS = 2.5


def read_slowly(fd, n, heartbeat_dir):
    """Reads n bytes in 16 KiB pieces spread over SLOW_READ_SECONDS, beating into heartbeat_dir
    from the first byte on until the process dies."""
    start = time.monotonic()
    path = os.path.join(heartbeat_dir, str(os.getpid()))

    def beat():
        while True:
            with open(path + ".tmp", "w") as f:
                f.write("%f %f" % (start, time.monotonic()))
            os.replace(path + ".tmp", path)
            time.sleep(0.02)

    threading.Thread(target=beat, daemon=True).start()
    pieces = max(1, n // 16384)
    data = b""
    while len(data) < n:
        chunk = os.read(fd, min(16384, n - len(data)))
        if not chunk:
            return None
        data += chunk
        time.sleep(SLOW_READ_SECONDS / pieces)
    return data


def main():
    mode = sys.argv[1]
    fd_in, fd_out = channel()
    while True:
        head = read_exactly(fd_in, 16)
        if head is None:
            return 0
        _, kind, size = struct.unpack("<IIQ", head)
        if mode == "slow" and kind == FORWARD:
            read_slowly(fd_in, size, sys.argv[2])
            time.sleep(600)  # never answers; attest kills it
            return 0
        if read_exactly(fd_in, size) is None:
            return 0
        if kind == BYE:
            return 0
        if kind == HELLO and mode in ("result", "deaf", "slow"):
            name = b"hostile-huge-frame"
            # Ranges head_dim, batch, heads, q_len, k_len, q_offset: open, or (deaf) Dk 64 and Tk 600-700.
            ranges = [0] * 12 if mode == "result" else [64, 64, 0, 0, 0, 0, 0, 0, 600, 700, 0, 0]
            # ABI 2 layout: name, caps, empty rows, precision (7 x f32 + exp ulps), contract.
            descriptor = (struct.pack("<I", 2) + struct.pack("<I", len(name)) + name + struct.pack("<Ii", CAPS, 0)
                          + struct.pack("<7id", *([0] * 7), 1.0) + struct.pack("<Q", 0) + struct.pack("<12q", *ranges)
                          + struct.pack("<7i", *([0] * 7)))
            write_all(fd_out, header(DESCRIPTOR, len(descriptor)) + descriptor)
            if mode == "deaf":
                time.sleep(600)  # reads nothing more; attest (or the driver) kills it
                return 0
            continue
        reply = DESCRIPTOR if kind == HELLO else FORWARD_RESULT
        write_all(fd_out, header(reply, HUGE))
        time.sleep(60)  # the payload never comes; the driver kills what is left
        return 0


if __name__ == "__main__":
    sys.exit(main())
