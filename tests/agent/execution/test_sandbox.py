"""Each candidate runs in its own process: every way it can go wrong becomes an Outcome, never an exception."""

from __future__ import annotations

import os
import time

import numpy as np

from agent.execution.sandbox import Limits, run_isolated

GIB = 1024**3


def _value(x):
    return {"doubled": x * 2, "pid": os.getpid()}


def _raise():
    raise ValueError("bad candidate")


def _sleep():
    time.sleep(3600)


def _allocate():
    return np.ones(8 * GIB // 8).sum()


def _exit_abruptly():
    os._exit(7)


def test_result_travels_back_from_another_process():
    outcome = run_isolated(_value, 21, limits=Limits(60))
    assert outcome.ok and outcome.value["doubled"] == 42 and outcome.value["pid"] != os.getpid()


def test_locally_defined_functions_travel_too():
    offset = 5
    outcome = run_isolated(lambda x: x + offset, 1, limits=Limits(60))
    assert outcome.value == 6


def test_exception_is_captured_with_its_traceback():
    outcome = run_isolated(_raise, limits=Limits(60))
    assert outcome.status == "error" and "ValueError: bad candidate" in outcome.error and "Traceback" in outcome.error


def test_hang_is_killed_at_the_time_limit():
    outcome = run_isolated(_sleep, limits=Limits(2))
    assert outcome.status == "timeout" and "timed out after 2 s" in outcome.error
    assert outcome.elapsed < 60


def test_memory_limit_turns_an_oversized_allocation_into_a_failure():
    outcome = run_isolated(_allocate, limits=Limits(60, memory_bytes=3 * GIB))
    assert outcome.status == "memory" and "memory limit of 3.0 GiB" in outcome.error


def test_process_that_dies_is_reported_as_crashed():
    outcome = run_isolated(_exit_abruptly, limits=Limits(60))
    assert outcome.status == "crashed" and "exited with code 7" in outcome.error
