"""Shared fixtures: the fakes (PKI, spoke clusters) come from tests.fakes.fixtures."""

pytest_plugins = ["tests.fakes.fixtures", "tests.serve_harness"]
