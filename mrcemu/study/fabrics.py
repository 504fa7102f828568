"""The fabrics a study takes at each size, in hosts: MRC's multi-plane fabric and its
one-plane ECMP twin of the same aggregate bandwidth, which RoCE runs on and the hash
census probes (`default` and `ecmp` at 8; the generated ones of topology/sizes.py)."""

MRC_FABRICS = {8: "default", 16: "rack4", 32: "rack4x8", 64: "rack8x8"}
ECMP_FABRICS = {8: "ecmp", 16: "rack4-ecmp", 32: "rack4x8-ecmp", 64: "rack8x8-ecmp"}
