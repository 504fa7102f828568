"""Sans-IO transports: fed packets and the time, they return packets and timers."""
