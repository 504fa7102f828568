"""The NIC daemon: the thin I/O shell around the sans-IO transport cores."""
