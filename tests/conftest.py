"""Shared fixtures: the fakes (PKI, spoke clusters) come from tests.fakes.fixtures."""

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.fakes.processes import children_get_ctrl_c

pytest_plugins = ["tests.fakes.fixtures", "tests.serve_harness"]

# `cpcreds get-credential` caches answers under $XDG_CACHE_HOME/cpcreds: the tests, and every
# cpcreds they start, use a cache of their own, never the user's. tests/test_cli_cache.py points
# each of its tests at a fresh one.
_CACHE_HOME = tempfile.mkdtemp(prefix="cpcreds-tests-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, True)

# Tests that send Ctrl-C to a child pass when the suite itself runs in the background too.
children_get_ctrl_c()


@pytest.fixture(autouse=True)
def _logging_ends_with_its_test() -> Iterator[None]:
    # A CLI run in this process (main([...])) sends log records to the sys.stderr of its test,
    # which pytest replaces afterwards: a handler left behind would print "--- Logging error ---"
    # for a later test's thread that logs (a shard's renewer refused by the hub, say).
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
