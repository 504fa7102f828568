"""A module imported on a thread of its own, for a foreground command that has a core
idle while it waits: `mrcemu run` imports matplotlib (most of a second) while the
fabric manager, one process, brings the fabric up."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType


class Preload:
    def __init__(self, name: str) -> None:
        self.name = name
        self._thread = threading.Thread(target=self._load, name=f"import {name}",
                                        daemon=True)
        self._thread.start()

    def _load(self) -> None:
        try:
            importlib.import_module(self.name)
        except BaseException:  # noqa: BLE001 - raised again, in the caller's thread, by get()
            pass

    def get(self) -> ModuleType:
        """The module, once its import is done; its import's error if it failed."""
        self._thread.join()
        return importlib.import_module(self.name)
