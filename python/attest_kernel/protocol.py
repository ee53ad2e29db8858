"""The kernel's side of attest's process protocol, version 3 (impl/PROTOCOL.md): the channel
(ATTEST_PROTOCOL_FDS), frames, and the serve loop that turns requests into calls of the kernel
function and its results (or its exceptions) into replies. Every request gets a reply: an
exception in the kernel is a status, a malformed request an ERROR frame; nothing hangs."""
import os
import sys
import traceback

import numpy as np

from . import abi, quantized, wire
from .declaration import Declaration, DeclarationError
from .packed import decode_packed
from .paged import PagedStep
from .problem import DecodeConfig, Problem
from .storage import from_float32, is_torch_tensor, itemsize, numpy_dtype, to_float32, torch_to_numpy
from .wire import ProtocolError

MAX_MESSAGE = 1000  # attest keeps 1 KiB of an error
TRACEBACKS = 3  # the kernel's first exceptions also go to stderr with their traceback


class KernelRefusal(Exception):
    """Raised by a kernel function to answer with a status other than INTERNAL_ERROR."""
    status = abi.INTERNAL_ERROR


class Unsupported(KernelRefusal):
    """The problem uses a feature the kernel does not support (ATTEST_UNSUPPORTED: a failure when
    the problem is inside the declaration)."""
    status = abi.UNSUPPORTED


class InvalidArgument(KernelRefusal):
    """The problem is outside what the kernel accepts (ATTEST_INVALID_ARGUMENT)."""
    status = abi.INVALID_ARGUMENT


class OutputError(Exception):
    """The kernel returned something that is not the outputs the problem needs."""


# --- the channel ----------------------------------------------------------------------------------

class Channel:
    """Frames over a pair of file descriptors."""

    def __init__(self, in_fd, out_fd):
        self.in_fd, self.out_fd = in_fd, out_fd

    def _read_into(self, buffer):
        view, done = memoryview(buffer), 0
        while done < len(view):
            n = os.readv(self.in_fd, [view[done:]])
            if n == 0:
                return done
            done += n
        return done

    def read_frame(self):
        """(type, payload), or None at a clean end of input."""
        header = bytearray(16)
        got = self._read_into(header)
        if got == 0:
            return None
        if got < 16:
            raise ProtocolError("input ended inside a frame header")
        kind, size = wire.parse_header(header)
        payload = bytearray(size)
        if self._read_into(payload) != size:
            raise ProtocolError("input ended inside a message")
        return kind, payload

    def write_frame(self, kind, payload=b""):
        payload = memoryview(payload).cast("B")
        for data in (memoryview(wire.frame_header(kind, len(payload))), payload):
            while data:
                data = data[os.write(self.out_fd, data):]


def open_channel(environ=None):
    """The channel attest named in ATTEST_PROTOCOL_FDS ("IN,OUT"). Run by hand without it, the
    protocol is stdin / stdout, and descriptor 1 is then pointed at stderr so that nothing the
    kernel prints (Python or C) can reach the protocol."""
    environ = os.environ if environ is None else environ
    fds = environ.get("ATTEST_PROTOCOL_FDS")
    if fds:
        try:
            in_fd, out_fd = (int(x) for x in fds.split(","))
            os.fstat(in_fd), os.fstat(out_fd)
        except (ValueError, OSError) as e:
            raise ProtocolError("ATTEST_PROTOCOL_FDS=%r does not name two open descriptors (%s)" % (fds, e))
        for fd in (in_fd, out_fd):  # the kernel's own subprocesses never hold the protocol
            os.set_inheritable(fd, False)
        return Channel(in_fd, out_fd)
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.set_inheritable(out_fd, False)
    os.dup2(2, 1)
    return Channel(0, out_fd)


# --- outputs --------------------------------------------------------------------------------------

def _as_array(value, what):
    """(numpy array, "bf16" when it holds bf16 bit patterns from a torch bfloat16 tensor)."""
    if is_torch_tensor(value):
        return torch_to_numpy(value)
    if value is None or isinstance(value, (str, bytes, dict)):
        raise OutputError("%s is %s, not an array" % (what, "None" if value is None else "a " + type(value).__name__))
    try:
        return np.asarray(value), None
    except Exception as e:  # an object numpy cannot read
        raise OutputError("%s (a %s) is not an array: %s" % (what, type(value).__name__, e))


def _shape_text(shape):
    return "(%s)" % ", ".join(str(int(d)) for d in shape) if len(shape) != 1 else "(%d,)" % shape[0]


def convert_output(value, fmt, shape, what, layout):
    """A returned output as the bytes-ready array of its storage format `fmt`: float32 for f32,
    uint16 bit patterns for bf16 / f16. Floating-point values of any width are rounded to the
    format (to nearest even); uint16 is taken as bit patterns of a 16-bit format. OutputError names
    the expected shape or dtype otherwise."""
    array, bits = _as_array(value, what)
    expected = tuple(int(d) for d in shape)
    if array.shape != expected:
        raise OutputError("%s has shape %s; this problem needs %s = %s" % (what, _shape_text(array.shape), layout,
                                                                           _shape_text(expected)))
    dtype = array.dtype
    if bits == "bf16":
        return array if fmt == "bf16" else from_float32(to_float32(array, "bf16"), fmt)
    if fmt == "f32":
        if dtype.kind != "f":
            raise OutputError(
                "%s has dtype %s; its storage is f32: return floating-point values (float32)" % (what, dtype))
        return array.astype(np.float32, copy=False)
    if dtype == np.uint16:
        return array
    if fmt == "f16" and dtype == np.float16:
        return array.view(np.uint16)
    if dtype.kind != "f":
        raise OutputError("%s has dtype %s; its storage is %s: return floating-point values, or uint16 bit patterns"
                          % (what, dtype, fmt))
    return from_float32(array, fmt)


def _path(path):
    if path is None:
        return ""
    if not isinstance(path, str):
        raise OutputError("the path is a %s, not a string" % type(path).__name__)
    if len(path.encode()) > 31 or not path.isprintable():
        raise OutputError("path %r: at most 31 printable bytes" % path)
    return path


def split_result(result, lse_declared, who):
    """(o, lse or None, path) from what the kernel function returned."""
    if result is None:
        raise OutputError("%s returned None; expected (o, lse)%s" % (who, "" if lse_declared else " or o"))
    if isinstance(result, tuple):
        if len(result) == 2:
            o, lse = result
            path = None
        elif len(result) == 3:
            o, lse, path = result
        else:
            raise OutputError("%s returned a tuple of %d values; expected (o, lse) or (o, lse, path)" %
                              (who, len(result)))
    elif lse_declared:
        raise OutputError("%s returned a %s, not a tuple (o, lse): the declaration has the feature \"lse\""
                          % (who, type(result).__name__))
    else:
        o, lse, path = result, None, None
    if lse_declared and lse is None:
        raise OutputError("%s returned no lse, and the declaration has the feature \"lse\": return (o, lse)" % who)
    return o, lse if lse_declared else None, _path(path)


def describe_exception(error):
    """One line: the exception and where the kernel raised it."""
    text = "%s: %s" % (type(error).__name__, error) if str(error) else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    libraries = (os.sep + "numpy" + os.sep, os.sep + "torch" + os.sep)
    own = [f for f in frames if not os.path.abspath(f.filename).startswith(package)
           and not any(part in f.filename for part in libraries)]  # the kernel's line, not numpy's
    if own or frames:
        last = (own or frames)[-1]
        text += " (at %s:%d in %s)" % (os.path.basename(last.filename), last.lineno, last.name)
    return text


def _cut(text):
    data = text.encode("utf-8", "replace")
    return text if len(data) <= MAX_MESSAGE else data[:MAX_MESSAGE - 3].decode("utf-8", "ignore") + "..."


# --- the serve loop -------------------------------------------------------------------------------

class Server:
    """Serves one kernel function with its declaration until BYE or end of input.

    With `load_error` set (the kernel could not be loaded or declared), the first request is
    answered with ERROR carrying that message: attest prints it and exits 2."""

    def __init__(self, function, declaration, channel, load_error=None, log=None):
        self.function, self.declaration, self.channel = function, declaration, channel
        self.load_error = load_error
        self.log = log if log is not None else sys.stderr
        self.sessions = {}
        self.lengths = {}  # session -> (tokens held, tokens of its last step)
        self.next_session = 1
        self.failures = 0
        if load_error is None:
            if not isinstance(declaration, Declaration):
                raise DeclarationError("%r is not an attest_kernel.Declaration" % (declaration,))
            if declaration.contract.decode_only is False and not callable(function):
                raise DeclarationError("the kernel %r is not callable" % (function,))
            self.storage = declaration.precision.storage()
            self.lse = declaration.has("lse")

    def _say(self, text):
        try:
            self.log.write("attest_kernel: %s\n" % text)
            self.log.flush()
        except Exception:
            pass

    def run(self):
        """Returns the process's exit code: 0 after BYE or end of input, 2 after an ERROR."""
        try:
            while True:
                frame = self.channel.read_frame()
                if frame is None:
                    return 0
                kind, payload = frame
                if self.load_error is not None:
                    self._say(self.load_error)
                    self.channel.write_frame(wire.ERROR, wire.encode_string(_cut(self.load_error)))
                    return 2
                if kind == wire.BYE:
                    return 0
                handler = self.handlers().get(kind)
                if handler is None:
                    raise ProtocolError("unexpected message type %d (%s)" % (kind, wire.TYPE_NAMES.get(kind, "?")))
                if handler(wire.Reader(payload)) is False:
                    return 2
        except ProtocolError as e:
            self._say("protocol error: %s" % e)
            try:
                self.channel.write_frame(wire.ERROR, wire.encode_string(_cut(str(e))))
            except OSError:
                pass
            return 2
        except (BrokenPipeError, ConnectionResetError):
            return 1  # attest is gone
        except Exception as e:  # a bug of this package: said, never a hang
            self._say("internal error:\n" + traceback.format_exc())
            try:
                self.channel.write_frame(wire.ERROR, wire.encode_string(_cut("attest_kernel internal error: "
                                                                             + describe_exception(e))))
            except OSError:
                pass
            return 2

    def handlers(self):
        """The handler of each message attest sends (every one the table lists as attest's)."""
        return {wire.HELLO: self.hello, wire.FORWARD: self.forward, wire.DECODE_OPEN: self.decode_open,
                wire.DECODE_STEP: self.decode_step, wire.DECODE_CLOSE: self.decode_close, wire.BACKWARD: self.backward,
                wire.DECODE_RETAINED: self.decode_retained, wire.PAGE_BYTES: self.page_bytes,
                wire.DECODE_PAGED: self.decode_paged, wire.MERGE: self.merge, wire.FORWARD_PACKED: self.forward_packed}

    def hello(self, r):
        version = r.u32()
        if version != wire.VERSION:  # another layout of the frames: refuse rather than misread them
            message = "protocol version %d not supported (this kernel speaks %d)" % (version, wire.VERSION)
            self._say(message)
            self.channel.write_frame(wire.ERROR, wire.encode_string(message))
            return False
        self.channel.write_frame(wire.DESCRIPTOR, wire.encode_descriptor(self.declaration))

    def _call(self, function, argument, who):
        """(status, error, result) of function(argument); an exception becomes a status."""
        try:
            with np.errstate(all="ignore"):
                return abi.OK, "", function(argument)
        except KernelRefusal as e:
            return e.status, _cut(str(e) or type(e).__name__), None
        except (Exception, SystemExit) as e:
            self.failures += 1
            if self.failures <= TRACEBACKS:
                self._say("%s raised:\n%s" % (who, "".join(traceback.format_exception(type(e), e, e.__traceback__))))
                if self.failures == TRACEBACKS:
                    self._say("(later tracebacks are not printed; each call still reports its exception)")
            return abi.INTERNAL_ERROR, _cut(describe_exception(e)), None

    def forward(self, r):
        fields = wire.decode_problem_fields(r, self.storage)
        r.expect_end()
        if self.declaration.contract.decode_only:
            raise ProtocolError("FORWARD sent to a decode-only kernel")
        problem = Problem(fields, self.declaration)
        who = "the kernel %s" % getattr(self.function, "__name__", "function")
        status, error, result = self._call(self.function, problem, who)
        o_bytes, lse, path = b"", None, ""
        if status == abi.OK:
            try:
                o, lse, path = split_result(result, self.lse, who)
                o_bytes = convert_output(o, self.storage["o"], problem.o_shape, "o", "[B][H][Tq][Dv]")
                if lse is not None:
                    lse = convert_output(lse, "f32", problem.lse_shape, "lse", "[B][H][Tq]")
            except OutputError as e:
                status, error, o_bytes, lse, path = abi.INTERNAL_ERROR, _cut(str(e)), b"", None, ""
            except Exception as e:  # an object that fails on conversion (a tensor on a lost device, ...)
                message = "the outputs could not be read: " + describe_exception(e)
                status, error, o_bytes, lse, path = abi.INTERNAL_ERROR, _cut(message), b"", None, ""
        self.channel.write_frame(wire.FORWARD_RESULT, wire.encode_forward_result(status, error, path, "", o_bytes, lse))

    def decode_open(self, r):
        fields = wire.decode_decode_open(r)
        if self.declaration.decode is None:
            message = "%s does not decode (no Declaration(decode=...))" % self.declaration.name
            self.channel.write_frame(wire.DECODE_OPENED, wire.encode_decode_opened(abi.UNSUPPORTED, message, 0))
            return
        config = DecodeConfig(fields, self.declaration)
        status, error, session = self._call(self.declaration.decode, config, "the decode function")
        if status == abi.OK and (session is None or not callable(getattr(session, "step", None))):
            status = abi.INTERNAL_ERROR
            error = "the decode function returned %r, not a session with step()" % (session,)
        number = 0
        if status == abi.OK:
            number, self.next_session = self.next_session, self.next_session + 1
            self.sessions[number] = (session, config)
            self.lengths[number] = (0, 0)  # tokens held, tokens of the last step
        self.channel.write_frame(wire.DECODE_OPENED, wire.encode_decode_opened(status, error, number))

    def decode_step(self, r):
        number, n, want_lse = r.u64(), r.i32(), bool(r.i32())
        q, k, v = r.array("u1"), r.array("u1"), r.array("u1")
        r.expect_end()
        if number not in self.sessions:
            raise ProtocolError("decode step for an unknown session")
        session, c = self.sessions[number]
        if n < 1:
            raise ProtocolError("decode step of %d tokens" % n)
        shapes = {"q": (c.batch, c.heads, n, c.head_dim), "k": (c.batch, c.kv_heads, n, c.head_dim),
                  "v": (c.batch, c.kv_heads, n, c.value_dim)}
        arrays = {}
        for name, raw in (("q", q), ("k", k), ("v", v)):
            fmt = self.storage[name]
            if fmt in quantized.QUANTIZED:
                scales = getattr(c, name + "_scales", None) if fmt == "q8_head" else None
                if fmt == "q8_head" and scales is None:
                    raise ProtocolError("a q8_head session opened without its static scales")
                try:
                    arrays[name] = quantized.decode(raw, fmt, shapes[name], scales)
                except ValueError:
                    raise ProtocolError("decode step arrays do not match n and the session's configuration")
                continue
            dtype = numpy_dtype(fmt)
            if raw.size != int(np.prod(shapes[name])) * dtype.itemsize:
                raise ProtocolError("decode step arrays do not match n and the session's configuration")
            values = raw.view(dtype)
            values = (values if values.flags.aligned else values.copy()).reshape(shapes[name])
            values.flags.writeable = False
            arrays[name] = values
        who = "the decode session's step"
        status, error, result = self._call(lambda a: session.step(a["q"], a["k"], a["v"], want_lse), arrays, who)
        if status == abi.OK:
            self.lengths[number] = (self.lengths[number][0] + n, n)
        o_bytes, lse, path = b"", None, ""
        if status == abi.OK:
            try:
                o, lse, path = split_result(result, want_lse, who)
                o_bytes = convert_output(o, self.storage["o"], (c.batch, c.heads, n, c.value_dim), "o", "[B][H][n][Dv]")
                if lse is not None:
                    lse = convert_output(lse, "f32", (c.batch, c.heads, n), "lse", "[B][H][n]")
            except OutputError as e:
                status, error, o_bytes, lse, path = abi.INTERNAL_ERROR, _cut(str(e)), b"", None, ""
            except Exception as e:  # an object that fails on conversion (a tensor on a lost device, ...)
                message = "the outputs could not be read: " + describe_exception(e)
                status, error, o_bytes, lse, path = abi.INTERNAL_ERROR, _cut(message), b"", None, ""
        self.channel.write_frame(wire.DECODE_RESULT, wire.encode_decode_result(status, error, path, o_bytes, lse))

    def decode_close(self, r):
        number = r.u64()
        r.expect_end()
        entry = self.sessions.pop(number, None)
        self.lengths.pop(number, None)
        if entry is not None and callable(getattr(entry[0], "close", None)):
            self._call(lambda session: session.close(), entry[0], "the decode session's close")
        self.channel.write_frame(wire.CLOSED)

    # --- ABI 2.3: the backward ---------------------------------------------------------------------

    def backward(self, r):
        if self.declaration.backward is None:
            raise ProtocolError("BACKWARD sent to a kernel declared without backward")
        problem = Problem(wire.decode_problem_fields(r, self.storage), self.declaration)
        threads, o, lse, d_o = r.i32(), r.array("u1"), r.array("<f4"), r.array("u1")
        if o.size % 4 or d_o.size % 4:
            raise ProtocolError("backward arrays o and d_o are not float32")
        o, d_o = o.view("<f4"), d_o.view("<f4")
        r.expect_end()
        if lse.size != int(np.prod(problem.lse_shape)) or o.size != int(np.prod(problem.o_shape)) or d_o.size != o.size:
            raise ProtocolError("backward arrays o, lse and d_o do not match the shape")
        grad = Gradient(o.reshape(problem.o_shape), lse.reshape(
            problem.lse_shape), d_o.reshape(problem.o_shape), threads)
        who = "the backward %s" % getattr(self.declaration.backward, "__name__", "function")
        status, error, result = self._call(lambda p: self.declaration.backward(p, grad), problem, who)
        out = {"status": status, "error": error}
        if status == abi.OK:
            try:
                out.update(self._gradients(problem, result, who))
            except OutputError as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut(str(e))}
            except Exception as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut(
                    "the gradients could not be read: " + describe_exception(e))}
        self.channel.write_frame(wire.BACKWARD_RESULT, wire.encode_message(wire.BACKWARD_RESULT, **out))

    @staticmethod
    def _gradients(problem, result, who):
        if not isinstance(result, tuple) or len(result) not in (3, 4):
            raise OutputError("%s returned %s; expected (dq, dk, dv) or (dq, dk, dv, dsinks)" %
                              (who, type(result).__name__))
        B, H, Hkv, Tq, Tk = problem.batch, problem.heads, problem.kv_heads, problem.q_len, problem.k_len
        shapes = {"dq": ((B, H, Tq, problem.head_dim), "[B][H][Tq][Dk]"), "dk": ((B, Hkv, Tk, problem.head_dim),
                  "[B][Hkv][Tk][Dk]"), "dv": ((B, Hkv, Tk, problem.value_dim), "[B][Hkv][Tk][Dv]")}
        out = {name: convert_output(value, "f32", shapes[name][0], name, shapes[name][1])
               for name, value in zip(("dq", "dk", "dv"), result)}
        dsinks = result[3] if len(result) == 4 else None
        if problem.sinks is not None:
            if dsinks is None:
                raise OutputError("%s returned no dsinks, and the problem has sinks: return (dq, dk, dv, dsinks)" % who)
            out["dsinks"] = convert_output(dsinks, "f32", (H,), "dsinks", "[H]")
        return out

    # --- ABI 2.4: retained positions and block tables ----------------------------------------------

    def decode_retained(self, r):
        number, b, t = r.u64(), r.i32(), r.i32()
        r.expect_end()
        if number not in self.sessions:
            raise ProtocolError("retained positions of an unknown session")
        session, config = self.sessions[number]
        length, last = self.lengths[number]
        if not 0 <= b < config.batch or not 0 <= t < last:
            raise ProtocolError("retained positions of a query outside the session's last step")
        capacity = length - last + t + 1  # a query at position p attends at most p + 1 positions
        retained = getattr(session, "retained", None)
        status, error, positions = abi.UNSUPPORTED, "the session has no retained(b, t)", None
        if callable(retained):
            status, error, positions = self._call(lambda _: retained(b, t), None, "the session's retained")
        if status == abi.OK:
            try:
                positions = np.asarray(positions, dtype=np.int64).reshape(-1)
                if positions.size > capacity:
                    raise ValueError("%d positions (capacity %d)" % (positions.size, capacity))
            except (TypeError, ValueError) as e:
                status, error, positions = abi.INTERNAL_ERROR, _cut("retained(%d, %d) returned %s" % (b, t, e)), None
        self.channel.write_frame(wire.RETAINED, wire.encode_message(wire.RETAINED, status=status, error=error,
                                                                    positions=positions))

    def _page_bytes(self, config):
        return self._call(self.declaration.page_bytes, config, "page_bytes")

    def page_bytes(self, r):
        config = DecodeConfig(wire.decode_decode_open(r, scales_follow=True), self.declaration)
        r.expect_end()
        status, error, size = abi.UNSUPPORTED, "no block tables (page_tokens 0)", 0
        if self.declaration.page_tokens:
            status, error, size = self._page_bytes(config)
        if status == abi.OK and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
            status, error, size = abi.INTERNAL_ERROR, "page_bytes returned %r, not a positive int" % (size,), 0
        self.channel.write_frame(wire.PAGE_BYTES_RESULT, wire.encode_message(wire.PAGE_BYTES_RESULT, status=status,
                                                                             error=error, bytes=int(size or 0)))

    def decode_paged(self, r):
        if not self.declaration.page_tokens:
            raise ProtocolError("DECODE_PAGED to a kernel without block tables")
        config = DecodeConfig(wire.decode_decode_open(r, scales_follow=True), self.declaration)
        fields = wire.decode_paged_step(r)
        status, _, own = self._page_bytes(config)
        if status != abi.OK or own != fields["page_bytes"] or fields["pool"].size % max(own, 1):
            raise ProtocolError("DECODE_PAGED with pages of %d bytes; the kernel's are %r" %
                                (fields["page_bytes"], own))
        if fields["tables"].size != config.batch * fields["table_width"] or len(fields["counts"]) != config.batch \
                or len(fields["lengths"]) != config.batch:
            raise ProtocolError("paged step: tables, lengths and counts do not match the batch")
        step = PagedStep(fields, config, self.declaration.page_tokens)
        try:
            step.check_sizes()
        except ValueError as e:
            raise ProtocolError(str(e))
        who = "decode_paged"
        status, error, result = self._call(lambda s: self.declaration.decode_paged(config, s), step, who)
        out = {"status": status, "error": error, "pool": step.pool}
        if status == abi.OK:
            try:
                out.update(self._paged_outputs(config, step, result, who))
            except OutputError as e:
                out.update(status=abi.INTERNAL_ERROR, error=_cut(str(e)))
            except Exception as e:
                out.update(status=abi.INTERNAL_ERROR, error=_cut(
                    "the outputs could not be read: " + describe_exception(e)))
        self.channel.write_frame(wire.DECODE_PAGED_RESULT, wire.encode_message(wire.DECODE_PAGED_RESULT, **out))

    def _paged_outputs(self, config, step, result, who):
        o_list, lse_list, path = split_result(result, step.want_lse, who)
        if len(o_list) != config.batch or (lse_list is not None and len(lse_list) != config.batch):
            raise OutputError("%s returned outputs for %d sequences; the batch is %d (one [H][n][Dv] o each)"
                              % (who, len(o_list), config.batch))
        o_parts, lse_parts = [], []
        for b in range(config.batch):
            n = int(step.counts[b])
            if n == 0:
                continue
            o_parts.append(convert_output(o_list[b], self.storage["o"], (config.heads, n, config.value_dim),
                                          "o[%d]" % b, "[H][n][Dv]").reshape(-1))
            if lse_list is not None:
                lse_parts.append(convert_output(lse_list[b], "f32",
                                 (config.heads, n), "lse[%d]" % b, "[H][n]").reshape(-1))
        o = np.concatenate(o_parts) if o_parts else np.zeros(0, dtype=np.float32)
        return {"o": o, "lse": np.concatenate(lse_parts) if lse_parts else None, "path": path}

    # --- ABI 2.6: merging partial states -------------------------------------------------------------

    def merge(self, r):
        if self.declaration.merge is None:
            raise ProtocolError("MERGE sent to a kernel declared without merge")
        parts, rows, width, storage = r.i32(), r.i32(), r.i32(), r.i32()
        o_bytes, lse = r.array("u1"), r.array("<f4")
        r.expect_end()
        fmt = abi.FORMAT_NAMES.get(storage)
        if fmt not in ("f32", "bf16") or min(parts, rows, width) < 1:
            raise ProtocolError("merge: storage %d, parts %d, rows %d, value_dim %d" % (storage, parts, rows, width))
        if o_bytes.size != parts * rows * width * itemsize(fmt) or lse.size != parts * rows:
            raise ProtocolError("merge arrays o and lse do not match the shape")
        o = to_float32(o_bytes.view(numpy_dtype(fmt)), fmt).reshape(parts, rows, width)
        lse = lse.reshape(parts, rows)
        who = "the merge %s" % getattr(self.declaration.merge, "__name__", "function")
        status, error, result = self._call(lambda states: self.declaration.merge(*states), (o, lse), who)
        out = {"status": status, "error": error}
        if status == abi.OK:
            try:
                if not isinstance(result, tuple) or len(result) != 2:
                    raise OutputError("%s returned %s; expected (o, lse)" % (who, type(result).__name__))
                out["o"] = convert_output(result[0], "f32", (rows, width), "o", "[rows][Dv]").reshape(-1)
                out["lse"] = convert_output(result[1], "f32", (rows,), "lse", "[rows]")
            except OutputError as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut(str(e))}
            except Exception as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut("the merged state could not be read: "
                                                                   + describe_exception(e))}
        self.channel.write_frame(wire.MERGE_RESULT, wire.encode_message(wire.MERGE_RESULT, **out))

    # --- ABI 2.8: the packed varlen layout -------------------------------------------------------------

    def forward_packed(self, r):
        if self.declaration.packed is None:
            raise ProtocolError("FORWARD_PACKED sent to a kernel declared without packed")
        problem = decode_packed(r, self.declaration)
        who = "the packed forward %s" % getattr(self.declaration.packed, "__name__", "function")
        status, error, result = self._call(self.declaration.packed, problem, who)
        out = {"status": status, "error": error}
        if status == abi.OK:
            try:
                o, lse, path = split_result(result, problem.want_lse, who)
                out["o"] = convert_output(o, "f32", problem.o_shape, "o", "[total_q][H][Dv]").reshape(-1)
                if lse is not None:
                    out["lse"] = convert_output(lse, "f32", problem.lse_shape, "lse", "[H][total_q]").reshape(-1)
                out["path"] = path
            except OutputError as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut(str(e))}
            except Exception as e:
                out = {"status": abi.INTERNAL_ERROR, "error": _cut("the outputs could not be read: "
                                                                   + describe_exception(e))}
        self.channel.write_frame(wire.FORWARD_PACKED_RESULT, wire.encode_message(wire.FORWARD_PACKED_RESULT, **out))


class Gradient:
    """What a backward receives besides the problem: o [B][H][Tq][Dv] and lse [B][H][Tq] (the forward's,
    as attest computed them), d_o [B][H][Tq][Dv] (the loss gradient), threads (0: the kernel's choice)."""

    def __init__(self, o, lse, d_o, threads):
        self.o, self.lse, self.d_o, self.threads = o, lse, d_o, threads


def serve(function, declaration=None, channel=None):
    """Serves `function` (problem -> (o, lse)) to attest and returns the exit code:
    `sys.exit(serve(attention))` at the end of a kernel script. The declaration is the argument,
    else `function.declaration` (set by @declare)."""
    declaration = declaration if declaration is not None else getattr(function, "declaration", None)
    channel = channel or open_channel()
    if not isinstance(declaration, Declaration):
        message = ("%s has no declaration: decorate it with @attest_kernel.declare(Declaration(...)) or pass one"
                   % getattr(function, "__name__", function))
        return Server(None, None, channel, load_error=message).run()
    return Server(function, declaration, channel).run()
