"""Shared helpers: a client that plays attest's side of the protocol against a served kernel."""
import os
import select
import subprocess
import sys
import time

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(TESTS)
REPO = os.path.dirname(PYTHON_DIR)
sys.path.insert(0, PYTHON_DIR)

from attest_kernel import wire  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def env_with_package(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("ATTEST_PROTOCOL_FDS", None)
    env.update(extra or {})
    return env


class Served:
    """A kernel process and attest's end of its channel. mode "fds": the protocol on private
    descriptors named by ATTEST_PROTOCOL_FDS (as attest runs it); "stdio": on stdin / stdout (by hand).
    Every read has a timeout: a kernel that does not answer fails the test instead of hanging it."""

    def __init__(self, argv, mode="fds", timeout=30):
        self.timeout = timeout
        self.buffer = b""
        if mode == "fds":
            to_kernel_r, self.to_kernel = os.pipe()
            self.from_kernel, from_kernel_w = os.pipe()
            env = env_with_package({"ATTEST_PROTOCOL_FDS": "%d,%d" % (to_kernel_r, from_kernel_w)})
            self.process = subprocess.Popen(argv, env=env, pass_fds=(to_kernel_r, from_kernel_w), cwd=TESTS,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.close(to_kernel_r)
            os.close(from_kernel_w)
        else:
            self.process = subprocess.Popen(argv, env=env_with_package(), cwd=TESTS, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.to_kernel = self.process.stdin.fileno()
            self.from_kernel = self.process.stdout.fileno()
        self.mode = mode

    def send(self, kind, payload=b""):
        os.write(self.to_kernel, wire.encode_frame(kind, payload))

    def _fill(self, n):
        deadline = time.monotonic() + self.timeout
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.from_kernel], [], [], max(left, 0))
            if not ready:
                raise AssertionError("the kernel did not answer within %s s" % self.timeout)
            chunk = os.read(self.from_kernel, 1 << 20)
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def receive(self):
        """(type, payload), or None at end of output."""
        if not self._fill(16):
            assert not self.buffer, "output ended inside a frame header: %r" % self.buffer
            return None
        kind, size = wire.parse_header(self.buffer[:16])
        assert self._fill(16 + size), "output ended inside a message"
        payload, self.buffer = self.buffer[16:16 + size], self.buffer[16 + size:]
        return kind, payload

    def request(self, kind, payload=b""):
        self.send(kind, payload)
        reply = self.receive()
        assert reply is not None, "the kernel closed its output:\n" + self.finish()[1]
        return reply

    def hello(self, version=wire.VERSION):
        return self.request(wire.HELLO, wire.Writer().u32(version).bytes())

    def finish(self, bye=True):
        """(exit code, stderr) after BYE (or just closing the channel)."""
        try:
            if bye:
                self.send(wire.BYE)
        except OSError:
            pass
        if self.mode == "fds":
            os.close(self.to_kernel)
        stdout, stderr = self.process.communicate(timeout=self.timeout)  # closes stdin in stdio mode
        if self.mode == "fds":
            os.close(self.from_kernel)
        self.stdout = stdout.decode(errors="replace") if stdout else ""
        return self.process.returncode, stderr.decode(errors="replace")


@pytest.fixture
def serve_kernel():
    started = []

    def start(spec, mode="fds", declaration=None):
        argv = [PYTHON, "-m", "attest_kernel", "serve", spec] + (["--declaration", declaration] if declaration else [])
        served = Served(argv, mode)
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()
