#!/usr/bin/env python3
"""The C++ functions longer than a limit (issue 42: none over 150 lines outside tables), longest
first, as `lines  file:line  name`.

usage: function_lengths.py [--max N] PATH...   (folders are searched for .cpp .cc .h .hpp)
Exit 0: none longer than N (default 150); 1: some (listed); 2: bad usage.

A function is a brace block opened at namespace or class scope after a parameter list; its length
runs from the line of its name to its closing brace. Comments, strings and character literals are
blanked first, so braces in them do not count. Lambdas bound at namespace scope count as functions;
a table (a function whose body is one initialiser) is listed like any other: judge it by eye."""
import os
import re
import sys

SOURCES = (".cpp", ".cc", ".h", ".hpp")
TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<d>[^(\s]*)\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                    re.S)
CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|try)\b")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def blank(text):
    """text with comments and literals replaced by spaces (newlines kept: line numbers stay)."""
    return TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def function_name(header):
    """The name before the parameter list of a function header, or None when it is none."""
    header = " ".join(header.split())
    if CONTROL.match(header) or header.startswith("#"):
        return None
    head = header.split("(", 1)[0]
    if SCOPE.search(head) or ")" not in header:
        return None
    words = re.findall(r"[\w:~<>=!+\-*/\[\]]+", head)
    return words[-1] if words else "lambda"


def functions(path):
    """(first line, last line, name) of each function defined at namespace or class scope."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    scopes = []  # per open brace: "scope" (namespace, class, extern block) or "body"
    header_start = 0
    found = []
    for i, ch in enumerate(text):
        if ch in ";}":
            if ch == "}" and scopes:
                kind, start, name = scopes.pop()
                if kind == "function":
                    found.append((text.count("\n", 0, start) + 1, text.count("\n", 0, i) + 1, name))
            header_start = i + 1
        elif ch == "{":
            in_scope = all(kind == "scope" for kind, _, _ in scopes)
            header = text[header_start:i]
            name = function_name(header) if in_scope else None
            if name:
                first = header_start + len(header) - len(header.lstrip())
                scopes.append(("function", first, name))
            elif in_scope and (SCOPE.search(header) or header.strip().startswith('extern')):
                scopes.append(("scope", i, None))
            else:
                scopes.append(("body", i, None))
            header_start = i + 1
    return found


def sources(paths):
    for path in paths:
        if os.path.isfile(path):
            yield path
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(("build", ".")) and d != "node_modules")
            for name in sorted(files):
                if name.endswith(SOURCES):
                    yield os.path.join(root, name)


def main(argv):
    limit = 150
    if len(argv) >= 2 and argv[0] == "--max":
        if not argv[1].isdigit():
            print("function_lengths: --max needs a number of lines", file=sys.stderr)
            return 2
        limit, argv = int(argv[1]), argv[2:]
    if not argv or not all(os.path.exists(p) for p in argv):
        print("usage: function_lengths.py [--max N] PATH...", file=sys.stderr)
        return 2
    long = []
    for path in sources(argv):
        for first, last, name in functions(path):
            if last - first + 1 > limit:
                long.append((last - first + 1, "%s:%d" % (path, first), name))
    for lines, where, name in sorted(long, reverse=True):
        print("%5d  %s  %s" % (lines, where, name))
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
