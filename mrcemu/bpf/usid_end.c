// SPDX-License-Identifier: GPL-2.0
// mrcemu's SRv6 End with the NEXT-CSID flavour (lblen 32, nflen 16) as a tc ingress
// program on every switch port: the BPF engine, for kernels built without seg6local
// (docs/kernel.md). A packet whose destination is in the switch's own /48 has its
// uSIDs shifted left before the routing decision, exactly as topology/addressing.py's
// end_next_csid says; everything after it (the forward hook, the hop limit, ICMP,
// the egress program) is the kernel's ordinary forwarding.
//
// Ports are keyed by their own MAC (the Ethernet destination of what they receive),
// as the switch program keys them on egress: MACs are unique in the fabric, while
// ifindexes repeat across namespaces.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "../datapath/mrc_shared.h" /* generated from topology/addressing.py */

#define ACTIVE_AT MRC_BLOCK_BYTES                       /* the first uSID after the block */
#define ARG_AT (MRC_BLOCK_BYTES + MRC_USID_BITS / 8)    /* what follows it */
#define DADDR_AT (sizeof(struct ethhdr) + offsetof(struct ipv6hdr, daddr))

struct end_port {
	__u32 usid;    /* the switch's own uSID */
	__u32 pad;
	__u64 shifted; /* packets whose destination this End shifted */
	__u64 dropped; /* packets for the switch itself with nothing after its uSID */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct end_port);
} mrc_usid SEC(".maps");

static __always_inline __u64 mac_key(const unsigned char *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

static __always_inline int arg_zero(const __u8 *a)
{
	__u8 any = 0;
#pragma unroll
	for (int i = ARG_AT; i < 16; i++)
		any |= a[i];
	return !any;
}

static __always_inline __u16 active(const __u8 *a)
{
	return ((__u16)a[ACTIVE_AT] << 8) | a[ACTIVE_AT + 1];
}

SEC("tc")
int usid_end(struct __sk_buff *skb)
{
	/* Copied out, not pulled linear: a frame the End is not for goes on untouched,
	 * and one it is for is written once, by the store below. */
	__u8 h[DADDR_AT + 16];
	if (bpf_skb_load_bytes(skb, 0, h, sizeof(h)) < 0 ||
	    h[12] != (ETH_P_IPV6 >> 8) || h[13] != (ETH_P_IPV6 & 0xff))
		return TC_ACT_OK;
	__u64 key = mac_key(h); /* the Ethernet destination: this port's own MAC */
	struct end_port *port = bpf_map_lookup_elem(&mrc_usid, &key);
	if (!port)
		return TC_ACT_OK;

	__u8 a[16];
	__builtin_memcpy(a, h + DADDR_AT, 16);
	const __u8 block[MRC_BLOCK_BYTES] = MRC_BLOCK_INIT;
#pragma unroll
	for (int i = 0; i < MRC_BLOCK_BYTES; i++)
		if (a[i] != block[i])
			return TC_ACT_OK;
	if (active(a) != port->usid)
		return TC_ACT_OK;
	/* The kernel looks the shifted address up again: while its active uSID is still the
	 * switch's own, it meets the same End. Each shift empties one slot, so this ends. */
#pragma unroll
	for (int n = 0; n < MRC_USIDS_PER_ADDRESS; n++) {
		if (arg_zero(a)) {
			__sync_fetch_and_add(&port->dropped, 1);
			return TC_ACT_SHOT;
		}
#pragma unroll
		for (int i = ACTIVE_AT; i < 16 - MRC_USID_BITS / 8; i++)
			a[i] = a[i + MRC_USID_BITS / 8];
		a[14] = 0;
		a[15] = 0;
		if (active(a) != port->usid)
			break;
	}
	/* The outer header is not in any checksum, but a CHECKSUM_COMPLETE skb's sum
	 * covers it: the helper keeps that sum true. */
	if (bpf_skb_store_bytes(skb, DADDR_AT, a, 16, BPF_F_RECOMPUTE_CSUM))
		return TC_ACT_SHOT;
	__sync_fetch_and_add(&port->shifted, 1);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
