"""The console script freezes its loaded input out of the garbage collector's reach: same
output, same exit codes as :func:`main` in-process, exit handlers still run, threads still
running are waited for, and the collector is on again once the input is loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rebalancer.cli.main import main
from tests.test_invalid import objects

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).parent / "data" / "cli_snapshot.yaml"


def _script(*argv: str, prelude: str = "") -> subprocess.CompletedProcess[bytes]:
    """``rebalancer ARGV`` through :func:`run`, as the console script calls it."""
    code = (
        "import sys\n"
        f"{prelude}\n"
        "from rebalancer.cli.main import run\n"
        f"sys.argv = ['rebalancer', *{list(argv)!r}]\n"
        "run()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=False, cwd=ROOT, timeout=120
    )


@pytest.mark.parametrize("fmt", ["json", "yaml", "table"])
def test_same_output_and_exit_code_as_main(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", fmt]) == 0
    expected = capsys.readouterr().out.encode()
    result = _script("plan", "--snapshot", str(SNAPSHOT), "-o", fmt)
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, b"")
    module = subprocess.run(
        [sys.executable, "-m", "rebalancer", "plan", "--snapshot", str(SNAPSHOT), "-o", fmt],
        capture_output=True,
        check=False,
        cwd=ROOT,
    )
    assert (module.returncode, module.stdout) == (0, expected)


def test_exit_codes_and_warnings_stay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input exits 2 naming the object; --skip-invalid warns on stderr and exits 1."""
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects()}))
    strict = _script("plan", "--snapshot", str(path))
    assert strict.returncode == 2
    assert b"Pod broken/b1" in strict.stderr
    lenient = _script("plan", "--snapshot", str(path), "--skip-invalid", "-o", "json")
    assert lenient.returncode == 1
    assert b"Pod broken/b1 cannot be read, namespace broken left out" in lenient.stderr
    assert main(["plan", "--snapshot", str(path), "--skip-invalid", "-o", "json"]) == 1
    assert lenient.stdout == capsys.readouterr().out.encode()
    assert b"broken" not in lenient.stdout
    missing = _script("plan", "--snapshot", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert _script("--version").returncode == 0
    assert _script("no-such-command").returncode == 2


def test_exit_handlers_run_and_output_is_flushed(tmp_path: Path) -> None:
    """An exit handler registered before the command still runs, after the output."""
    prelude = "import atexit\natexit.register(lambda: sys.stdout.write('handler ran\\n'))"
    result = _script("plan", "--snapshot", str(SNAPSHOT), "-o", "json", prelude=prelude)
    assert result.returncode == 0
    text = result.stdout.decode()
    assert text.endswith("}\nhandler ran\n")
    json.loads(text.removesuffix("handler ran\n"))


def test_the_loaded_input_is_frozen_and_the_collector_back_on() -> None:
    """After the load the objects alive are in the collector's permanent generation, and the
    collector runs again for what comes after."""
    prelude = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), gc.isenabled()))"
    )
    result = _script("plan", "--snapshot", str(SNAPSHOT), "-o", "json", prelude=prelude)
    assert result.returncode == 0
    last = result.stdout.decode().splitlines()[-1].split()
    assert last[0] == "frozen" and int(last[1]) > 1000 and last[2] == "True"


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    """With a non-daemon thread left, the interpreter's usual exit waits for it."""
    done = tmp_path / "done"
    prelude = (
        "import threading, time, pathlib\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        f"    pathlib.Path({str(done)!r}).write_text('ok')\n"
        "threading.Thread(target=late).start()"
    )
    result = _script("plan", "--snapshot", str(SNAPSHOT), "-o", "json", prelude=prelude)
    assert result.returncode == 0
    assert done.read_text() == "ok"


def test_main_leaves_the_collector_and_nothing_held(capsys: pytest.CaptureFixture[str]) -> None:
    """In-process callers (tests, the kubectl plugin) keep the collector on and hold nothing."""
    import gc  # noqa: PLC0415

    assert main(["plan", "--snapshot", str(SNAPSHOT), "-o", "json"]) == 0
    capsys.readouterr()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
