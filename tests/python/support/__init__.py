"""Helpers of the Python test suites (tests/python, which conftest.py puts on sys.path): import them
as `support.<module>`; fork_scenarios.py and hostile_cases.py also run as scripts by path."""
