"""Programs on emulated hosts: the verbs shim a program runs with, and what the NIC
daemon shares with it."""

from pathlib import Path

SHIM = Path(__file__).resolve().parent / "shim" / "libmrcverbs.so"  # `make install` builds it
