"""The quick lane's guard (tests/conftest.py): a test without the slow mark that starts a process fails."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import conftest
import pytest


class Item:
    """What the guard reads of a test item: its id and its marks."""

    def __init__(self, slow: bool):
        self.nodeid, self.slow = "tests/test_x.py::test_y", slow

    def get_closest_marker(self, name):
        return object() if self.slow and name == "slow" else None


def test_a_quick_test_that_starts_a_process_is_refused_and_fails_even_when_it_swallows_the_error():
    before = subprocess.Popen._execute_child
    guard = conftest._refusing_processes(Item(slow=False), "call")
    next(guard)
    try:
        with pytest.raises(conftest.ProcessInFastLaneError, match=r"tests/test_x.py::test_y started a process "
                                                                  r"\(Popen._execute_child\) but is not marked slow"):
            subprocess.run([sys.executable, "-c", "pass"], check=False)
        with contextlib.suppress(Exception):   # code under test that swallows the refusal
            os.system("true")
    finally:
        with pytest.raises(conftest.ProcessInFastLaneError,
                           match=r"\(call\) started a process \(Popen._execute_child, os.system\)"):
            guard.send(None)
    assert subprocess.Popen._execute_child is before   # put back as it was


def test_a_slow_test_is_left_alone():
    before = subprocess.Popen._execute_child
    guard = conftest._refusing_processes(Item(slow=True), "call")
    next(guard)
    assert subprocess.Popen._execute_child is before
    with pytest.raises(StopIteration):
        guard.send(None)
