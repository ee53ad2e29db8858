"""The rules of runnable_docs_test.py, on small documents of its own, and every shell block of the
repository's README.md and docs/ marked (runnable, or checked elsewhere with a reason). It runs
no block: docs_runnable_blocks does.

Usage: runnable_docs_rules_test.py SOURCE_DIR"""

import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import runnable_docs_test as docs  # noqa: E402  (the module under test, beside this file)

SOURCE = None  # the repository root, from the command line


def blocks_of(text, record=""):
    with tempfile.TemporaryDirectory() as folder:
        page = pathlib.Path(folder) / "page.md"
        page.write_text(text, encoding="utf-8")
        return docs.runnable_blocks(page, record)


class Markers(unittest.TestCase):
    def test_an_unmarked_shell_block_is_refused(self):
        for fence in ("```sh", "```bash", "```shell", "```console"):
            with self.assertRaisesRegex(ValueError, r"page.md:3: a shell block neither marked"):
                blocks_of(f"# Page\n\n{fence}\nattest certify\n```\n")

    def test_a_reason_is_required(self):
        with self.assertRaisesRegex(ValueError, "neither marked"):
            blocks_of("<!-- checked elsewhere:  -->\n```sh\nattest certify\n```\n")

    def test_a_block_checked_elsewhere_is_not_run(self):
        self.assertEqual(blocks_of("<!-- checked elsewhere: CI runs it -->\n```sh\n./ci/test.sh\n```\n"), [])

    def test_a_marker_must_touch_its_fence(self):
        with self.assertRaisesRegex(ValueError, "must be followed by"):
            blocks_of("<!-- runnable -->\n\n```sh\nattest --help\n```\n")
        with self.assertRaisesRegex(ValueError, "must be followed by"):
            blocks_of("<!-- checked elsewhere: CI -->\nprose\n```sh\n./ci/test.sh\n```\n")

    def test_other_languages_and_quoted_fences_need_no_marker(self):
        page = "```c\nint x;\n```\n```\n```sh\n```\n<!-- runnable -->\n```sh\nattest --help\n```\n"
        self.assertEqual(blocks_of(page), [(8, "attest --help", None)])

    def test_a_sample_follows_its_block(self):
        page = "<!-- runnable, output below -->\n```sh\necho hi\n```\n```\nhi\n```\n"
        self.assertEqual(blocks_of(page), [(2, "echo hi", "hi\n")])

    def test_whole_builds_may_not_be_marked_runnable(self):
        with self.assertRaisesRegex(ValueError, "may not install or build everything"):
            blocks_of("<!-- runnable -->\n```sh\n./ci/certify.sh\n```\n")


class CommandRecord(unittest.TestCase):
    PAGE = ("<!-- checked elsewhere: by hand, recorded in ci/results/docs_commands.txt -->\n"
            "```sh\ncmake --preset release   # configure\n# a comment line\n./ci/certify.sh\n```\n")

    def test_each_command_must_be_recorded(self):
        with self.assertRaisesRegex(ValueError, r"not recorded in ci/results/docs_commands.txt: \./ci/certify\.sh"):
            blocks_of(self.PAGE, "$ cmake --preset release\nexit 0\n")

    def test_recorded_commands_pass(self):
        self.assertEqual(blocks_of(self.PAGE, "$ cmake --preset release\n$ ./ci/certify.sh\nexit 0\n"), [])


class Samples(unittest.TestCase):
    def test_durations_and_decimals_may_differ(self):
        self.assertEqual(docs.output_difference("took 3 s, err 0.25\n", "took 41 s, err 0.2503\n"), "")

    def test_a_different_line_fails(self):
        self.assertIn("+checks: 20 ran", docs.output_difference("checks: 21 ran\n", "checks: 20 ran\n"))

    def test_an_elided_line_stands_for_several(self):
        sample = "header\n  ...\nfooter\n"
        self.assertEqual(docs.output_difference(sample, "header\nrow 1\nrow 2\nrow 3\nfooter\n"), "")
        self.assertNotEqual(docs.output_difference(sample, "header\nrow 1\nfooter changed\n"), "")
        self.assertNotEqual(docs.output_difference(sample, "other header\nrow 1\nfooter\n"), "")

    def test_an_elision_inside_a_line_stays_on_it(self):
        sample = "CERTIFIED k for causal, ..., lse; not covered: decode\nend\n"
        same = "CERTIFIED k for causal, window, gqa, lse; not covered: decode\nend\n"
        self.assertEqual(docs.output_difference(sample, same), "")
        across_lines = "CERTIFIED k for causal, lse\nx, lse; not covered: decode\nend\n"
        self.assertNotEqual(docs.output_difference(sample, across_lines), "")
        other_tail = "CERTIFIED k for causal, gqa, lse; not covered: backward\nend\n"
        self.assertNotEqual(docs.output_difference(sample, other_tail), "")


class RepositoryDocuments(unittest.TestCase):
    def test_every_shell_block_is_marked(self):
        record_path = SOURCE / docs.COMMAND_RECORD
        record = record_path.read_text(encoding="utf-8") if record_path.is_file() else ""
        runnable = [block for page in docs.documents(SOURCE) for block in docs.runnable_blocks(page, record)]
        self.assertTrue(runnable, "no block is marked runnable")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (pathlib.Path(sys.argv[1]) / "README.md").is_file():
        print("usage: runnable_docs_rules_test.py SOURCE_DIR (the repository root, holding README.md)", file=sys.stderr)
        sys.exit(2)
    SOURCE = pathlib.Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=1)
