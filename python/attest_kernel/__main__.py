"""python3 -m attest_kernel serve MODULE:FUNCTION [--declaration [MODULE:]NAME]
python3 -m attest_kernel describe MODULE:FUNCTION [--declaration [MODULE:]NAME]
python3 -m attest_kernel --version

MODULE is an importable module name (the current directory and PYTHONPATH are searched) or a
path to a .py file. The declaration is FUNCTION.declaration (set by @attest_kernel.declare), or
the object --declaration names (NAME alone: in FUNCTION's module)."""
import argparse
import importlib
import importlib.util
import os
import sys

from . import __version__, abi, wire
from .declaration import Declaration
from .protocol import Server, open_channel
from .wire import encode_descriptor, decode_descriptor


class LoadError(Exception):
    pass


def load_module(target):
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise LoadError("no such file: %s" % target)
        name = os.path.splitext(os.path.basename(path))[0]
        if name in sys.modules:
            name = "_attest_kernel_user_%s" % name
        sys.path.insert(0, os.path.dirname(path))  # its siblings import as they would from a script
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(target)


def resolve(spec, default_module=None):
    target, colon, attribute = spec.rpartition(":")
    if not colon:
        if default_module is None:
            raise LoadError("%r is not MODULE:NAME" % spec)
        module = default_module
    else:
        if not target or not attribute:
            raise LoadError("%r is not MODULE:NAME" % spec)
        module = load_module(target)
    value = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise LoadError("%s has no attribute %r" % (getattr(module, "__name__", module), attribute))
        value = getattr(value, part)
    return module, value


def load(kernel_spec, declaration_spec=None):
    """(function, declaration); LoadError, DeclarationError or the module's own exception otherwise."""
    module, function = resolve(kernel_spec)
    if declaration_spec:
        declaration = resolve(declaration_spec, module)[1]
        where = declaration_spec
    else:
        declaration = getattr(function, "declaration", None)
        where = "%s.declaration" % kernel_spec
        if declaration is None:
            raise LoadError("%s has no declaration: decorate it with @attest_kernel.declare(Declaration(...)) "
                            "or name one with --declaration MODULE:NAME" % kernel_spec)
    if not isinstance(declaration, Declaration):
        raise LoadError("%s is a %s, not an attest_kernel.Declaration" % (where, type(declaration).__name__))
    if not callable(function) and not declaration.contract.decode_only:
        raise LoadError("%s is not callable" % kernel_spec)
    return function, declaration


def version_text():
    """The protocol and ABI this package speaks (the interface table's)."""
    versions = (__version__, wire.VERSION, abi.ABI_MAJOR, abi.ABI_MINOR)
    return "attest_kernel %s: process protocol %d, C ABI %d.%d" % versions


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m attest_kernel", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument("command", choices=("serve", "describe"),
                        help="serve: speak attest's protocol (for --kernel-cmd); describe: print the declaration")
    parser.add_argument("kernel", metavar="MODULE:FUNCTION")
    parser.add_argument("--declaration", metavar="[MODULE:]NAME")
    args = parser.parse_args(argv)

    if args.command == "describe":
        try:
            function, declaration = load(args.kernel, args.declaration)
        except Exception as e:
            print("cannot load %s: %s: %s" % (args.kernel, type(e).__name__, e), file=sys.stderr)
            return 2
        for key, value in decode_descriptor(encode_descriptor(declaration)).items():
            print("%s: %s" % (key, value))
        return 0

    channel = open_channel()  # first: whatever the module prints while loading goes to stderr
    try:
        function, declaration = load(args.kernel, args.declaration)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # an import error, a bad declaration, a module calling sys.exit
        message = "cannot serve %s: %s: %s" % (args.kernel, type(e).__name__, e)
        return Server(None, None, channel, load_error=message).run()
    return Server(function, declaration, channel).run()


if __name__ == "__main__":
    sys.exit(main())
