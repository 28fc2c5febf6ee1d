"""Is the Hugging Face Hub reachable? Decided once per process, quickly, and passed on to child processes.

Offline, huggingface_hub and transformers retry a dead connection for tens of seconds before failing,
and a local folder given by a relative path can even send ``from_pretrained`` to the Hub. So the CLI,
the planner, ``doctor`` and the notebooks ask :func:`hub_reachable` once; when the answer is no,
:func:`apply_offline_mode` switches on the libraries' own offline switches (``HF_HUB_OFFLINE``) for this
process and, through the environment, for every run.py it starts.
"""

from __future__ import annotations

import contextlib
import os
import socket
from urllib.parse import urlparse

from neuronhelpers.core.settings import HUB_UNREACHABLE_ENV

PROBE_TIMEOUT_S = 2.0
_TRUE = ("1", "true", "yes", "on")
# Set (for this process and its children) when offline mode was switched on because the probe failed.
UNREACHABLE_MARK = HUB_UNREACHABLE_ENV
_decided: dict[str, bool] = {}  # endpoint -> reachable, decided once per process


def offline_requested() -> bool:
    """Offline mode is on through the libraries' own switches (asked for, or switched on by apply_offline_mode)."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _probe(endpoint: str, timeout: float) -> bool:
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:  # no DNS, refused, unreachable, timed out
        return False


def hub_reachable(*, refresh: bool = False, endpoint: str | None = None) -> bool:
    """True when the Hub can be reached from here: not in offline mode and its endpoint accepts a connection.

    The answer is kept for the life of the process (``refresh=True`` asks again). ``endpoint`` asks about
    another Hub endpoint than HF_ENDPOINT's (an HfApi's own).
    """
    if offline_requested():
        return False
    endpoint = endpoint or hub_endpoint()
    if endpoint not in _decided or refresh:
        _decided[endpoint] = _probe(endpoint, PROBE_TIMEOUT_S)
    return _decided[endpoint]


def apply_offline_mode() -> bool:
    """When the Hub is unreachable, turn on offline mode here and for child processes; returns reachability."""
    reachable = hub_reachable()
    if not reachable:
        if not offline_requested():
            os.environ[UNREACHABLE_MARK] = hub_endpoint()
        go_offline()
    return reachable


def go_offline() -> None:
    """Offline mode for this process and every child it starts (``HF_HUB_OFFLINE``), also where huggingface_hub
    was already imported (it read the environment then)."""
    import sys

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True


@contextlib.contextmanager
def offline_mode():
    """Offline mode for this process while the block runs, then as it was. transformers writes how a tokenizer was
    loaded into its saved config (``local_files_only``, true offline): files made from local files alone (a
    twin) are then the same bytes whether or not the machine can reach the Hub."""
    import sys

    before = os.environ.get("HF_HUB_OFFLINE")
    constants = sys.modules.get("huggingface_hub.constants")
    was = getattr(constants, "HF_HUB_OFFLINE", None)
    go_offline()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before
        constants = sys.modules.get("huggingface_hub.constants")
        if constants is not None:
            constants.HF_HUB_OFFLINE = bool(was) if was is not None else offline_requested()


def offline_env() -> dict[str, str]:
    """Environment for a child process: offline mode when the Hub cannot be reached (nothing otherwise)."""
    return {} if hub_reachable() else {"HF_HUB_OFFLINE": "1"}


def hub_status_line() -> str:
    """One line for ``doctor`` and the notebooks."""
    if os.environ.get(UNREACHABLE_MARK):
        return f"unreachable ({os.environ[UNREACHABLE_MARK]}): offline mode is on, local folders and twins only"
    if offline_requested():
        return "offline (HF_HUB_OFFLINE is set): local folders and twins only"
    if hub_reachable():
        return f"reachable ({hub_endpoint()}); gated models need `hf auth login`"
    return f"unreachable ({hub_endpoint()}): offline mode is used, local folders and twins only"
