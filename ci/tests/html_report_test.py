#!/usr/bin/env python3
"""attest report CERT --html FILE, rendered in a real browser (docs/reading-a-report.md):
    html_report_test.py ATTEST WORKDIR
A certificate of a certified kernel and a failing mutant becomes one self-contained page. Headless
Chromium (Debian's) loads it: the DOM it built holds the summary, both verdicts, a row and an
err/bound bar per check that ran, the coverage matrix, per path the pairs of classes (a cell per
pair: its effective cases, red where a check required it and no case reached it, checked on a
certificate given such a pair) and the failing check with its case and replay command; its
screenshot (kept as WORKDIR/report.png) shows both verdict colours. Skipped (exit 77) only when
chromium is not installed.
"""
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

ATTEST, WORK = sys.argv[1:3]
os.makedirs(WORK, exist_ok=True)
SMALL = ["--budget", "quick", "--seed", "11", "--max-len", "256", "--long-seconds", "0"]
CERTIFIED_COLOUR, FAILED_COLOUR = (0xE3, 0xF4, 0xE1), (0xFB, 0xE4, 0xE4)  # html_report.cpp's verdict boxes


def run(cmd, expect, timeout=300):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s%s" % (done.returncode, expect, " ".join(cmd), done.stdout, done.stderr))
    return done


def need(text, *needles):
    for needle in needles:
        if needle not in text:
            sys.exit("expected %r in the page:\n%s" % (needle, text[:3000]))


def png_pixels(path):
    """The RGB(A) rows of an 8-bit, non-interlaced PNG (what Chromium writes), unfiltered."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("the screenshot is not a PNG")
    at, idat, width, height, channels = 8, b"", 0, 0, 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace or colour not in (2, 6):
                sys.exit("unexpected PNG format: depth %d colour %d interlace %d" % (depth, colour, interlace))
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                nearest = min((abs(p - left), 0, left), (abs(p - up), 1, up), (abs(p - corner), 2, corner))[2]
                line[x] = (line[x] + nearest) & 255
        rows.append(line)
        previous = line
    return {tuple(row[x:x + 3]) for row in rows for x in range(0, stride, channels)}


def pair_cells(page):
    """{(kernel section index, path): {pair: (class, text)}} of the page's pair matrices."""
    cells = {}
    for index, section in enumerate(page.split('<section class="kernel">')[1:]):
        for path, table in re.findall(r'<table class="pairs" data-path="([^"]*)">(.*?)</table>', section, re.S):
            found = re.findall(r'<td class="pair (\w+)" data-pair="([^"]*)"[^>]*>([^<]*)</td>', table)
            cells[(index, html.unescape(path))] = {html.unescape(p): (kind, text) for kind, p, text in found}
    return cells


def check_pair_matrix(page, certificate):
    """Each path's pairs of classes, drawn per pair: a reached pair's cell holds its effective cases
    over every check (pair_cases of the kernel's path in the certificate); a pair a check required
    and never reached is red. The certificate is then given a required pair no case reached: its
    cell turns red."""
    cells, expected = pair_cells(page), {}
    for index, kernel in enumerate(certificate["kernels"]):
        for path in kernel["paths"]:
            if path.get("pair_cases"):
                expected[(index, path["path"])] = path["pair_cases"]
    if not expected:
        sys.exit("the certificate holds no pair_cases: nothing for the matrix to draw")
    for key, pairs in expected.items():
        for pair, n in pairs.items():
            if cells.get(key, {}).get(pair) != ("reached", str(n)):
                sys.exit("path %r: pair %r: cell %s, expected %d effective cases" % (key[1], pair,
                                                                                     cells.get(key, {}).get(pair), n))
    unreached = [(key, pair) for key, row in cells.items() for pair, (kind, _) in row.items() if kind == "unreached"]
    if not unreached:
        sys.exit("no cell shows a pair never reached (the matrix draws only what was reached?)")
    (index, path), pair = unreached[0]
    for check in certificate["kernels"][index]["checks"]:
        if path in check.get("coverage", {}):
            coverage = check["coverage"][path]
            coverage["uncovered"].append(pair)
            coverage["required"] += 1
            break
    edited = os.path.join(WORK, "never_reached.json")
    json.dump(certificate, open(edited, "w"))
    page_of_edited = os.path.join(WORK, "never_reached.html")
    run([ATTEST, "report", edited, "--html", page_of_edited], 0)
    cell = pair_cells(open(page_of_edited).read()).get((index, path), {}).get(pair)
    if not cell or cell[0] != "never":
        sys.exit("a required pair never reached (%s on path %r) is drawn %s" % (pair, path, cell))


chromium = shutil.which("chromium")
if not chromium:
    print("SKIP: chromium is not installed (apt-get install chromium)")
    sys.exit(77)

cert = os.path.join(WORK, "cert.json")
run([ATTEST, "certify", "--out", os.path.join(WORK, "out"), "--json", cert, *SMALL, "--kernel", "blocked", "--kernel",
     "mutant:causal_sees_next", "--check", "golden,grid,rows_sum_to_one,zero_masked_weight", "--no-size-stages"], 1)
page = os.path.join(WORK, "report.html")
run([ATTEST, "report", cert, "--html", page], 0)
certificate = json.load(open(cert))
ran = [c for k in certificate["kernels"] for c in k["checks"] if c.get("status", c.get("verdict")) != "not covered"]

profile = tempfile.mkdtemp(prefix="attest-chromium-")
try:
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile]
    dom = run(browser + ["--dump-dom", "file://" + os.path.abspath(page)], 0, timeout=120).stdout
    need(dom, "2 kernels: 1 CERTIFIED, 1 NOT CERTIFIED", 'class="verdict certified"',
         'class="verdict not-certified"', "CERTIFIED blocked for", "NOT CERTIFIED mutant:causal_sees_next",
         "<h3>Failing checks</h3>", "case: <code>", "replay: <code>%s replay " % html.escape(ATTEST),
         "Coverage: targets per path", "Coverage: pairs of classes per path", '<table class="pairs" data-path=')
    rows, bars = dom.count('<tr class="check">'), dom.count('<div class="bar')
    if rows < 4 or bars != rows:
        sys.exit("%d check rows, %d err/bound bars: expected a bar per row, at least 4 rows" % (rows, bars))
    replay = html.unescape(re.search(r"replay: <code>([^<]* replay [^<]*)</code>", dom).group(1))
    if not re.search(r"counterexamples/\S*__mutant_causal_sees_next__\S*Tq\d+_Tk\d+\S*\.json", replay):
        sys.exit("the replay command does not name the counterexample file by kernel and case: " + replay)
    check_pair_matrix(dom, certificate)
    shot = os.path.join(WORK, "report.png")
    run(browser + ["--window-size=1280,2400", "--screenshot=" + shot, "file://" + os.path.abspath(page)], 0,
        timeout=120)
    colours = png_pixels(shot)
    for name, colour in (("certified", CERTIFIED_COLOUR), ("not certified", FAILED_COLOUR)):
        if colour not in colours:
            sys.exit("the screenshot shows no %s verdict box (colour %s): kept at %s" % (name, colour, shot))
finally:
    shutil.rmtree(profile, ignore_errors=True)
print("ok: %d check rows rendered; screenshot %s" % (rows, shot))
