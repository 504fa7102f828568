// SPDX-License-Identifier: GPL-2.0
// The switch's virtual queue arithmetic, alone so that the host can compile and test
// it (tests/unit/bpf/test_vq.py) exactly as the BPF program runs it.
#ifndef MRCEMU_VQ_H
#define MRCEMU_VQ_H

#include <linux/types.h>

#define VQ_NSEC 1000000000ULL

// The queue left after `dt_ns` of draining at `rate_bps`. Saturating: the product
// dt * rate would overflow 64 bits after a long idle (at 20 Mb/s after 2 h 3 min, at
// 100 Gb/s after 1.5 s, and at once on a port's first packet, when the last time is
// 0), wrap around and leave a stale queue that marks and trims an idle port. A queue
// that had time to drain is empty, which is decided without that product.
static inline __u64 vq_drain(__u64 vq_bytes, __u64 dt_ns, __u64 rate_bps)
{
	__u64 rate_Bps = rate_bps / 8;

	if (!vq_bytes || !rate_Bps)
		return rate_Bps ? 0 : vq_bytes;
	// vq_bytes is bounded by the port buffer, far below 2^64 / 1e9.
	if (dt_ns >= vq_bytes * VQ_NSEC / rate_Bps + 1)
		return 0;
	// Here dt * rate < vq * 1e9 + rate: no overflow.
	__u64 drained = dt_ns * rate_Bps / VQ_NSEC;
	return vq_bytes > drained ? vq_bytes - drained : 0;
}

#endif
