"""Locks on what several runs write at once (``guard/locks.py``): the cache's lock file is never
followed when it is a link nor waited on when it is a FIFO, and a layout's folder lock makes a
second writer wait for the first."""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from pathlib import Path

import pytest

from xpu_release.errors import ConfigError
from xpu_release.guard.locks import LockFile, folder_lock
from xpu_release.release.run.cache import LOCK_NAME, exclusive, in_use

from .hostile import deadline


@pytest.mark.parametrize("impostor", ["link", "dangling-link", "fifo", "socket"])
def test_an_impostor_at_the_lock_name_is_replaced_never_followed_nor_waited_on(
    tmp_path: Path, impostor: str
) -> None:
    cache, outside = tmp_path / "cache", tmp_path / "etc"
    cache.mkdir()
    outside.mkdir()
    lock = cache / LOCK_NAME
    if impostor == "link":
        (outside / "passwd").write_bytes(b"root:x:0:0")
        lock.symlink_to(outside / "passwd")
    elif impostor == "dangling-link":
        lock.symlink_to(outside / "cron.d-planted")
    elif impostor == "fifo":
        os.mkfifo(lock)
    else:
        import socket

        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(lock))

    with deadline(10), in_use(cache) as held, exclusive(cache, wait=False) as alone:
        pass

    assert held is not None
    assert alone is False  # the shared hold and the exclusive one met on one file
    assert stat.S_ISREG(lock.lstat().st_mode)
    assert sorted(p.name for p in outside.iterdir()) == (["passwd"] if impostor == "link" else [])
    if impostor == "link":
        assert (outside / "passwd").read_bytes() == b"root:x:0:0"


def test_a_folder_at_the_lock_name_is_a_config_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).mkdir(parents=True)

    with pytest.raises(ConfigError) as refused, in_use(tmp_path):
        pass

    assert f"{tmp_path / LOCK_NAME}: is a folder" in refused.value.message


def test_two_runs_replacing_one_impostor_end_up_holding_one_file(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    first = LockFile.open(tmp_path, LOCK_NAME)
    assert first is not None
    (tmp_path / LOCK_NAME).unlink()  # another run replaced the file after we opened it
    (tmp_path / LOCK_NAME).write_bytes(b"")
    second = LockFile.open(tmp_path, LOCK_NAME)
    assert second is not None

    assert first.take(fcntl.LOCK_SH, wait=False)
    assert not second.take(fcntl.LOCK_EX, wait=False)  # the first now holds the file the name holds
    first.close()
    second.close()


def test_a_second_writer_of_a_layout_waits_for_the_first(tmp_path: Path) -> None:
    order: list[str] = []
    heard = threading.Event()

    def second() -> None:
        with folder_lock(tmp_path, on_wait=heard.set):
            order.append("second")

    with folder_lock(tmp_path):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert heard.wait(10)  # told it waits, and it does not get in
        order.append("first")
    waiter.join(10)

    assert order == ["first", "second"]
