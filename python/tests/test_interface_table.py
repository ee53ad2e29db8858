"""The package's constants against the interface table (impl/abi/include/attest/abi/interface, or the
folder ATTEST_INTERFACE_DIR names): any difference fails, naming the entry."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import interface_table  # noqa: E402
from attest_kernel import abi, wire  # noqa: E402


def test_generated_constants_are_the_tables():
    differences = interface_table.differences(interface_table.read_table(), interface_table.generated_module())
    assert not differences, ("attest_kernel/_interface.py differs from the table (run "
                             "python/tools/interface_table.py):\n" + "\n".join(differences))


def test_every_message_type_has_its_number():
    table = interface_table.read_table()["MESSAGES"]
    assert {name: row[0] for name, row in table.items()} == wire.TYPES
    assert sorted(wire.TYPES.values()) == list(range(1, wire.LAST_TYPE + 1))


def test_abi_constants_come_from_the_table():
    table = interface_table.read_table()
    assert abi.CAPABILITIES == {name: 1 << bit for name, (bit, _) in table["CAPABILITIES"].items()}
    assert abi.FORMATS == {name: value for name, (value, _) in table["FORMATS"].items()}
    assert (abi.ABI_MAJOR, abi.ABI_MINOR, wire.VERSION) == tuple(table["VERSION"].values())
