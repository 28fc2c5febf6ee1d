"""One writer at a time per dataset folder: an OS file lock around every read-change-write of its files.

Files already land by atomic rename, so a reader never sees half a file; but two processes that each read a file,
add their row and rename their copy into place keep only the last copy (two sweeps into one ``--out``, a sweep and a
``contribute``). ``folder_lock`` serialises them with ``flock`` on the folder's ``LOCK_NAME`` file: the kernel frees
it when its holder dies, so no stale lock outlives a killed sweep. Re-entrant within a thread (``append_rows`` upgrades
older files under the lock it holds). A file system without locks (some NFS mounts) is refused in one line rather
than written unguarded. Within one sweep (local ``--jobs``, the Ray fleet) a single process writes already.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from pathlib import Path

from neuronhelpers.core.errors import UserError

LOCK_NAME = ".neuronhelpers.lock"
WAIT_S = 600.0  # a writer holds the lock for one file's rewrite (well under a second); this long means it hangs
_POLL_S = 0.02
_held = threading.local()  # folder -> depth, for this thread
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def _depths() -> dict:
    if not hasattr(_held, "depths"):
        _held.depths = {}
    return _held.depths


@contextlib.contextmanager
def folder_lock(folder, wait_s: float = WAIT_S):
    """Hold the folder's write lock (waiting up to ``wait_s`` for another writer); created with the folder."""
    import fcntl

    key = os.path.realpath(folder)
    depths = _depths()
    if depths.get(key):
        depths[key] += 1
        try:
            yield
        finally:
            depths[key] -= 1
        return
    Path(key).mkdir(parents=True, exist_ok=True)
    fd = os.open(os.path.join(key, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno in _NO_LOCKS:
                    raise UserError(f"'{folder}' is on a file system without file locks ({exc.strerror}): "
                                    "neuronhelpers will not write there unguarded; write to a local folder and "
                                    "copy it") from None
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise UserError(f"'{folder}' stayed locked by another writer for {wait_s:.0f} s "
                                    f"({os.path.join(key, LOCK_NAME)}): is a sweep still writing there? "
                                    "nothing was written") from None
                time.sleep(_POLL_S)
        depths[key] = 1
        try:
            yield
        finally:
            depths.pop(key, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
