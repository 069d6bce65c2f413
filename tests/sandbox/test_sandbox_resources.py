"""Resource attacks: each must end in a bounded time with the right status and leave nothing running."""

from __future__ import annotations

import shutil

import pytest

ONE_CASE = [{"input": "", "output": "done"}]
RUNS_TESTS = "assert f() == 1"


def test_infinite_loop_times_out(code_fn, clean):
    s = code_fn({"tests": RUNS_TESTS}, "def f():\n    while True:\n        pass")
    assert (s.status, s.value) == ("time_limit", 0.0)


def test_infinite_loop_at_import_times_out(code_fn, clean):
    s = code_fn({"tests": ONE_CASE}, "while True: pass")
    assert (s.status, s.value) == ("time_limit", 0.0)


def test_cpu_burn_in_threads_is_killed(code_fn, clean):
    src = "import threading\ndef burn():\n    while True: pass\nfor _ in range(8):\n    threading.Thread(target=burn).start()\nprint('done')"
    s = code_fn({"tests": ONE_CASE}, src)
    assert s.status == "time_limit"


def test_fork_bomb_is_contained(code_fn, sandbox, clean):
    src = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    s = code_fn({"tests": ONE_CASE}, src)
    assert s.status in ("time_limit", "fail") and s.value == 0.0


@pytest.fixture(scope="module")
def small_memory_fn():
    """256 MiB and a longer limit: the memory limit, not the clock, must end these runs even on a loaded machine."""
    from harness import get_reward

    return get_reward("code", timeout=3.0, memory_mb=256)


def test_memory_bomb_reports_memory(small_memory_fn, clean):
    s = small_memory_fn(
        {"tests": RUNS_TESTS}, "def f():\n    x = []\n    while True:\n        x.append(' ' * (1 << 22))"
    )
    assert (s.status, s.value) == ("memory", 0.0)


def test_single_huge_allocation_reports_memory(small_memory_fn, clean):
    s = small_memory_fn({"tests": ONE_CASE}, "x = bytearray(3 << 30)\nprint('done')")
    assert (s.status, s.value) == ("memory", 0.0)


def test_disk_bomb_stops_at_the_quota_and_host_disk_is_untouched(code_fn, clean):
    before = shutil.disk_usage("/tmp").used
    src = "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))"
    s = code_fn({"tests": ONE_CASE}, src)
    assert s.status == "program_error" and s.value == 0.0  # the write fails: the program crashes
    assert shutil.disk_usage("/tmp").used - before < (256 << 20)


def test_gigabyte_of_output_is_cut_off(code_fn, clean):
    s = code_fn({"tests": ONE_CASE}, "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)")
    assert s.status == "fail"
    assert "output" in s.info["reason"]


def test_output_flood_in_function_mode_fails(code_fn, clean):
    s = code_fn({"tests": RUNS_TESTS}, "def f():\n    while True:\n        print('z' * 65536)")
    assert s.status == "fail" and s.value == 0.0


def test_shared_memory_fill_is_bounded(code_fn, clean):
    src = "f = open('/dev/shm/fill', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))"
    s = code_fn({"tests": ONE_CASE}, src)
    assert s.status == "program_error" and s.value == 0.0  # the write fails: the program crashes


@pytest.mark.parametrize("n", [200])
def test_thread_flood_is_refused_by_the_pids_limit(code_fn, clean, n):
    src = f"import threading, time\nts = [threading.Thread(target=time.sleep, args=(30,)) for _ in range({n})]\nfor t in ts: t.start()\nprint('done')"
    s = code_fn({"tests": ONE_CASE}, src)
    assert s.status in ("fail", "time_limit") and s.value == 0.0
