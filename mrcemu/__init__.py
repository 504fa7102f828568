"""mrcemu: a packet-level emulator of MRC (Multipath Reliable Connection)."""

__version__ = "0.1.0"
