"""File-system attacks: writes, deletes and reads outside the working directory must not reach the host."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import pytest

import rewards.code as code_module


@pytest.fixture
def canary(tmp_path):
    p = tmp_path / "canary.txt"
    p.write_text("original")
    return p


def test_write_to_host_tmp_does_not_reach_host(sandbox, run, clean):
    name = f"/tmp/sbx-canary-{secrets.token_hex(6)}"
    r = run(f"open({name!r}, 'w').write('pwned')\nprint('wrote')")
    if sandbox.isolation().layers["mntns"]:
        assert r.status == "ok" and r.stdout == b"wrote\n"  # the private /tmp accepted it...
    assert not os.path.exists(name)  # ...and the host's /tmp never saw it


def test_write_into_a_host_directory_fails(sandbox, run, canary, clean):
    target = canary.parent / "new.txt"
    run(f"open({str(target)!r}, 'w').write('pwned')")
    assert not target.exists()


def test_overwrite_a_host_file_fails(sandbox, run, canary, clean):
    run(f"open({str(canary)!r}, 'w').write('pwned')")
    assert canary.read_text() == "original"


def test_delete_a_host_file_fails(sandbox, run, canary, clean):
    run(f"import os\nos.unlink({str(canary)!r})")
    assert canary.exists()


def test_write_to_home_fails(sandbox, run, clean):
    home = Path(os.path.expanduser("~"))
    name = home / f"sbx-canary-{secrets.token_hex(6)}"
    run(f"open({str(name)!r}, 'w').write('pwned')")
    assert not name.exists()


def test_write_to_host_dev_shm_does_not_reach_host(sandbox, run, clean):
    name = f"/dev/shm/sbx-canary-{secrets.token_hex(6)}"
    run(f"open({name!r}, 'w').write('pwned')")
    assert not os.path.exists(name)


def test_harness_files_cannot_be_modified(sandbox, run, clean):
    target = Path(code_module.__file__)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    r = run(f"open({str(target)!r}, 'a').write('\\nraise SystemExit')\nprint('ok')")
    assert r.stdout == b""
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest


def test_harness_files_cannot_be_read(sandbox, run, clean):
    r = run(f"print(open({code_module.__file__!r}).read()[:20])")
    assert r.status == "crash" and r.stdout == b""
    assert b"PermissionError" in r.stderr or b"FileNotFoundError" in r.stderr  # a checkout under /tmp is hidden


def test_symlink_escape_fails(sandbox, run, canary, clean):
    src = f"import os\nos.symlink({str(canary)!r}, 'link')\nopen('link', 'w').write('pwned')"
    run(src)
    assert canary.read_text() == "original"


def test_hardlink_to_host_file_fails(sandbox, run, canary, clean):
    src = f"import os\nos.link({str(canary)!r}, 'hl')\nopen('hl', 'w').write('pwned')"
    run(src)
    assert canary.read_text() == "original"


def test_no_leftover_files_after_arun(run, clean):
    before = set(os.listdir("/tmp"))
    src = (
        "import os\nfirst = set(os.listdir('.'))\nfor i in range(20):\n    open(f'f{i}', 'w').write('x')\n"
        "os.mkdir('d')\nprint(len(set(os.listdir('.')) - first), 'solution.py' in first)"
    )
    r = run(src)
    assert r.stdout == b"21 True\n"  # 20 files and a directory written beside the solution's own source
    assert set(os.listdir("/tmp")) - before == set()


def test_working_directory_is_fresh_eachrun(run, clean):
    run("open('marker', 'w').write('x')")
    r = run("import os\nprint(os.path.exists('marker'))")
    assert r.stdout == b"False\n"


def test_etc_shadow_is_unreadable(sandbox, run, clean):
    r = run("print(open('/etc/shadow').read())")
    assert r.status == "crash" and r.stdout == b""


def test_reading_the_tests_finds_nothing(code_fn, clean):
    # The expected value lives only in the judge: a solution that hunts for it everywhere it can read fails.
    expected = "EXPECTED-" + secrets.token_hex(8)
    hunt = (
        "import gc, os, re\n"
        "def f():\n"
        "    pat = re.compile(r'EXPECTED-[0-9a-f]{16}')\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, (str, bytes)):\n"
        "            m = pat.search(o if isinstance(o, str) else o.decode('latin1'))\n"
        "            if m: return m.group(0)\n"
        "    for root in ('/tmp', '.', '/proc/self'):\n"
        "        for dp, dn, fn in os.walk(root):\n"
        "            for n in fn:\n"
        "                try:\n"
        "                    m = pat.search(open(os.path.join(dp, n), errors='ignore').read())\n"
        "                    if m: return m.group(0)\n"
        "                except Exception: pass\n"
        "    return 'not found'\n"
    )
    s = code_fn({"tests": f"assert f() == {expected!r}"}, hunt)
    # a fail, or a timeout where the interpreter's read-only tree is large (a virtualenv under /tmp): never a pass
    assert s.status in ("fail", "time_limit") and s.value == 0.0
