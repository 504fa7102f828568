"""Programs on emulated hosts: the verbs shim a program runs with, and what the NIC
daemon shares with it."""
