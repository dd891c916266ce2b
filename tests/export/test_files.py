"""Outputs are written atomically to regular files, and written through, never replaced, where the name is a
device, a named pipe or a symbolic link."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from simulon.export.files import write_atomic


def test_a_regular_file_gets_the_whole_new_content_and_no_temporary_file_is_left(tmp_path: Path):
    out = tmp_path / "trace.json"
    out.write_text("old")
    write_atomic(out, "new")
    assert out.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]
    write_atomic(tmp_path / "plot.png", b"\x89PNG")
    assert (tmp_path / "plot.png").read_bytes() == b"\x89PNG"


def test_a_symbolic_link_is_followed_and_kept(tmp_path: Path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_named_pipe_is_written_through_not_replaced(tmp_path: Path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through the pipe")
    reader.join(timeout=10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_standard_output_into_a_pipe_is_written_through_its_link():
    """`simulate -o /dev/stdout | cat` said "cannot write: No such file or directory": the link was resolved to
    /proc/self/fd/1's target, a pipe's name ("pipe:[123]") that is no file, and a temporary file was made beside
    it."""
    run = subprocess.run([sys.executable, "-c", "from simulon.export.files import write_atomic; "
                          "write_atomic('/dev/stdout', 'through the pipe')"], capture_output=True, text=True)
    assert (run.returncode, run.stdout, run.stderr) == (0, "through the pipe", "")


def test_dev_null_stays_a_device():
    write_atomic("/dev/null", "discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_device_is_an_error_naming_it_and_stays_a_device():
    with pytest.raises(OSError) as caught:
        write_atomic("/dev/full", "x" * 100_000)
    assert caught.value.filename == "/dev/full" and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_existing_file_keeps_its_permissions(tmp_path: Path):
    """Overwriting a trace its owner had made private (chmod 600) left it readable by all (644, the umask's): the
    temporary file renamed over it took a new file's permissions, where a plain open() keeps the file's own."""
    out = tmp_path / "trace.json"
    out.write_text("old")
    out.chmod(0o600)
    write_atomic(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o600
    write_atomic(tmp_path / "new.json", "new")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("length", [200, 250, 255])
def test_any_name_a_file_may_have_is_written_however_long(tmp_path: Path, length: int):
    out = tmp_path / ("t" * (length - 5) + ".json")  # NAME_MAX is 255: the temporary copy's name must fit too
    write_atomic(out, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name] and out.read_text() == "{}"


def test_an_existing_output_its_permissions_protect_is_refused_not_replaced(tmp_path: Path, monkeypatch):
    from simulon.config.errors import ConfigError
    from simulon.export.files import check_writable

    out = tmp_path / "kept.json"
    out.write_text("kept")
    out.chmod(0o444)
    if os.access(out, os.W_OK):  # root, whom permissions do not stop: answer as for any other user
        monkeypatch.setattr(os, "access", lambda path, mode: not (Path(path) == out and mode == os.W_OK))
    with pytest.raises(ConfigError, match=r"-o .*kept.json: the file is read-only"):
        check_writable(out, "-o")
    check_writable(tmp_path / "new.json", "-o")  # a new name in the same folder is fine
