// SPDX-License-Identifier: GPL-2.0
// mrcemu switch egress: a virtual queue per port that marks ECN, trims MRC data
// packets to their headers and drops above the buffer (docs/switch.md).
//
// Every port's config and counters live in two maps (pinned by the loader) keyed by the
// port's own MAC (the Ethernet source of what it sends): MACs are unique in the
// fabric, while ifindexes repeat across namespaces.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "mrc_wire.h" /* generated from mrcemu/wire/layout.py */
#include "vq.h"

#define ROCE_PORT MRC_UDP_PORT
#define DSCP_TRIMMABLE MRC_DSCP_TRIMMABLE
#define DSCP_TRIMMABLE_RETX MRC_DSCP_TRIMMABLE_RETX
#define DSCP_TRIMMED MRC_DSCP_TRIMMED
#define DSCP_TRIMMED_LASTHOP MRC_DSCP_TRIMMED_LASTHOP
#define DSCP_CONTROL MRC_DSCP_CONTROL
#define PRIO_CONTROL 0x10010 /* htb class 1:10 */
#define PRIO_DATA 0x10020    /* htb class 1:20 */
#define HDRS_MAX (8 + MRC_DATA_HDRS_MAX) /* UDP + BTH + METH + TSETH + RETH + ImmDt */
/* skb->mark of a trimmed packet sent back through its own port (see the trim below). */
#define MARK_TRIM_REQUEUED 0x4d524354 /* "MRCT" */

struct port_cfg {
	__u64 rate_bps;
	__u32 ecn_threshold;
	__u32 trim_threshold;
	__u32 buffer;
	__u32 lasthop; /* a leaf's host-facing port */
};

struct port_state {
	__u64 vq_bytes;
	__u64 last_ns;
	__u64 packets;
	__u64 bytes;
	__u64 ecn_marked;
	__u64 trimmed;
	__u64 dropped;
	__u64 trim_errors; /* a trim the kernel refused: the packet went on whole */
	__u64 last_error;
	/* Serialises the virtual queue's read-modify-write: both CPUs forward into the
	 * same port at once (an incast's last hop), and an update lost to that race is a
	 * packet the virtual queue never counted while the real one holds it. */
	struct bpf_spin_lock lock;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct port_cfg);
} mrc_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct port_state);
} mrc_state SEC(".maps");

/* Path loss (fault kind path-loss, paper experiment E7): the packets of one path, from one host
 * to another over one spine, dropped at random on one port. A path is the inner source
 * and destination addresses and the EV's high half (plane and spine: every variant of
 * the path), so nothing else on the link is touched. Entries exist only while such a
 * fault is active; `matched` and `dropped` count per entry (the port's own `dropped`
 * stays the buffer's). */
struct ploss_key {
	__u64 port; /* the egress port's MAC, as mrc_cfg's key */
	__u8 src[16];
	__u8 dst[16];
	__u32 ev_hi;
	__u32 pad;
};

struct ploss_val {
	__u32 per_million; /* drop probability */
	__u32 pad;
	__u64 matched;
	__u64 dropped;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ploss_key);
	__type(value, struct ploss_val);
} mrc_ploss SEC(".maps");

static __always_inline __u64 mac_key(const unsigned char *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

static __always_inline void set_dscp(__u8 *b, __u8 dscp)
{
	__u8 ecn = ((b[1] >> 4) & 0x3);
	__u8 tc = (dscp << 2) | ecn;
	b[0] = 0x60 | (tc >> 4);
	b[1] = (tc << 4) | (b[1] & 0x0f);
}

/* Trim an IPv6-in-IPv6 MRC data packet to its headers: fix both IPv6 payload lengths,
 * the UDP length and checksum (over the inner header, which names the destination port
 * itself), and the DSCP of both headers. Byte-identical to codec.trim. */
static __always_inline int trim(struct __sk_buff *skb, __u32 keep, __u8 dscp)
{
	long rc = bpf_skb_change_tail(skb, keep, 0);
	if (rc)
		return rc < 0 ? (int)rc : -100;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ipv6hdr *outer = data + sizeof(struct ethhdr);
	struct ipv6hdr *ip6 = outer + 1;
	struct udphdr *udp = (void *)(ip6 + 1);
	if ((void *)(udp + 1) > end)
		return -101;
	__u16 ulen = keep - sizeof(struct ethhdr) - 2 * sizeof(struct ipv6hdr);
	outer->payload_len = bpf_htons(ulen + sizeof(struct ipv6hdr));
	ip6->payload_len = bpf_htons(ulen);
	udp->len = bpf_htons(ulen);
	udp->check = 0;
	set_dscp((__u8 *)outer, dscp);
	set_dscp((__u8 *)ip6, dscp);

	struct {
		__u8 src[16];
		__u8 dst[16];
		__be32 len;
		__u8 zero[3];
		__u8 nh;
	} ph = {};
	__builtin_memcpy(ph.src, &ip6->saddr, 16);
	__builtin_memcpy(ph.dst, &ip6->daddr, 16);
	ph.len = bpf_htonl(ulen);
	ph.nh = IPPROTO_UDP;

	__u8 hdrs[HDRS_MAX] = {};
	__u32 n = ulen;
	if (n > HDRS_MAX || n < 8)
		return -102;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr), hdrs,
			       n & 0x3f) < 0)
		return -103;
	__s64 s = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	s = bpf_csum_diff(0, 0, (__be32 *)hdrs, HDRS_MAX, s);
	__u16 ck = ~fold((__u64)(__u32)s);
	if (ck == 0)
		ck = 0xffff;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	udp = data + sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr);
	if ((void *)(udp + 1) > end)
		return -104;
	udp->check = ck;
	return 0;
}

SEC("tc")
int mrc_switch(struct __sk_buff *skb)
{
	/* A trimmed packet's second pass: judged and counted on its first. */
	if (skb->mark == MARK_TRIM_REQUEUED) {
		skb->mark = 0;
		skb->priority = PRIO_CONTROL;
		return TC_ACT_OK;
	}
	/* Frames from AF_PACKET or forwarded may keep headers in paged data: make the
	 * headers we read linear first. */
	__u32 want = sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr) + 8 + MRC_BTH_LEN;
	bpf_skb_pull_data(skb, skb->len < want ? skb->len : want);
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_OK;
	__u64 key = mac_key(eth->h_source);
	struct port_cfg *cfg = bpf_map_lookup_elem(&mrc_cfg, &key);
	struct port_state *st = bpf_map_lookup_elem(&mrc_state, &key);
	if (!cfg || !st)
		return TC_ACT_OK;

	__u32 len = skb->len;
	__u8 dscp = 0, ecn = 0, opcode = 0, flags = 0, roce = 0, encap = 0;
	__u32 ev_hi = 0;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6) && (void *)(ip6 + 1) <= end) {
		/* Marks and classes are the outer header's: the one the network acts on. */
		__u8 *b = (__u8 *)ip6;
		__u8 tc = (b[0] << 4) | (b[1] >> 4);
		dscp = tc >> 2;
		ecn = tc & 3;
		if (ip6->nexthdr == MRC_IPPROTO_IPV6) { /* MRC: IPv6-in-IPv6 */
			ip6 = ip6 + 1;
			encap = 1;
		}
		struct udphdr *udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) <= end && ip6->nexthdr == IPPROTO_UDP &&
		    (udp->dest == bpf_htons(ROCE_PORT) ||
		     udp->dest == bpf_htons(MRC_UDP_PORT_TRANSPOSED))) {
			__u8 *bth = (void *)(udp + 1);
#if MRC_EV_HIGH_HALF_IN_SPORT
			ev_hi = bpf_ntohs(udp->source);
#else
			ev_hi = bpf_ntohs(*(__be16 *)((__u8 *)(eth + 1) + 2)); /* outer flow label, low 16 */
#endif
			if ((void *)(bth + MRC_BTH_LEN) <= end) {
				roce = 1;
				opcode = bth[MRC_BTH_OPCODE_BYTE];
				flags = bth[MRC_BTH_TS_BYTE];
			}
		}
	}

	if (roce && encap) {
		struct ploss_key pk = {.port = key, .ev_hi = ev_hi};
		__builtin_memcpy(pk.src, &ip6->saddr, 16);
		__builtin_memcpy(pk.dst, &ip6->daddr, 16);
		struct ploss_val *pl = bpf_map_lookup_elem(&mrc_ploss, &pk);
		if (pl) {
			__sync_fetch_and_add(&pl->matched, 1);
			if (bpf_get_prandom_u32() % 1000000 < pl->per_million) {
				__sync_fetch_and_add(&pl->dropped, 1);
				__sync_fetch_and_add(&st->packets, 1);
				return TC_ACT_SHOT;
			}
		}
	}

	int is_data = roce && opcode >= MRC_OP_DATA_MIN && opcode <= MRC_OP_DATA_MAX;
	int trimmable = is_data && encap && cfg->trim_threshold &&
			(dscp == DSCP_TRIMMABLE || dscp == DSCP_TRIMMABLE_RETX);
	__u32 keep = sizeof(struct ethhdr) + 2 * sizeof(struct ipv6hdr) + 8 + MRC_DATA_HDRS_MIN;
	if (flags & MRC_BTH_TS_MASK)
		keep += MRC_TSETH_LEN;
	if (opcode == MRC_OP_WRITE_LAST_IMM || opcode == MRC_OP_WRITE_ONLY_IMM)
		keep += MRC_IMMDT_LEN;

	/* The virtual queue: bytes that drain at the port rate. The verdict and the bytes
	 * it adds are decided under the port's lock (no helper may run under it: the trim
	 * itself comes after, and gives back what it reserved if the kernel refuses it). */
	__u64 now = bpf_ktime_get_ns();
	__u64 q;
	int verdict; /* 0 pass, 1 trim, 2 drop */
	bpf_spin_lock(&st->lock);
	/* Another CPU may have taken the lock with a later clock: no time passed. */
	q = vq_drain(st->vq_bytes, now > st->last_ns ? now - st->last_ns : 0, cfg->rate_bps);
	if (now > st->last_ns)
		st->last_ns = now;
	if (cfg->buffer && q + len > cfg->buffer && dscp != DSCP_CONTROL) {
		st->vq_bytes = q;
		verdict = 2;
	} else if (trimmable && q > cfg->trim_threshold) {
		st->vq_bytes = q + keep;
		verdict = 1;
	} else {
		st->vq_bytes = q + len;
		verdict = 0;
	}
	bpf_spin_unlock(&st->lock);
	__sync_fetch_and_add(&st->packets, 1);

	if (verdict == 2) {
		__sync_fetch_and_add(&st->dropped, 1);
		return TC_ACT_SHOT;
	}
	if (verdict == 1) {
		__u8 to = cfg->lasthop ? DSCP_TRIMMED_LASTHOP : DSCP_TRIMMED;
		int err = keep < len ? trim(skb, keep, to) : -105;
		if (err == 0) {
			__sync_fetch_and_add(&st->trimmed, 1);
			__sync_fetch_and_add(&st->bytes, keep);
			/* The qdisc would charge the length the packet had before this hook
			 * (__dev_queue_xmit sets qdisc_pkt_len first): htb would spend a whole
			 * packet's time on every trimmed header, and under an incast the port
			 * would carry less than its model while its real queue stood above the
			 * virtual one. Sent through the port once more, the packet is charged
			 * what it now is. */
			skb->mark = MARK_TRIM_REQUEUED;
			return bpf_redirect(skb->ifindex, 0);
		}
		__sync_fetch_and_add(&st->trim_errors, 1);
		st->last_error = (__u64)(-(long)err);
		/* The packet goes on whole: the queue holds all of it. */
		bpf_spin_lock(&st->lock);
		st->vq_bytes += len > keep ? len - keep : 0;
		bpf_spin_unlock(&st->lock);
	}
	if (cfg->ecn_threshold && q > cfg->ecn_threshold && (ecn == 1 || ecn == 2)) {
		/* A failed trim may have touched the packet: re-derive the pointers. */
		void *d2 = (void *)(long)skb->data;
		void *e2 = (void *)(long)skb->data_end;
		__u8 *b = d2 + sizeof(struct ethhdr);
		if ((void *)(b + sizeof(struct ipv6hdr)) <= e2) {
			b[1] |= 0x30; /* CE: the low two bits of the traffic class */
			__sync_fetch_and_add(&st->ecn_marked, 1);
		}
		/* And the inner header's, as RFC 6040 decapsulation would carry it in. */
		b += sizeof(struct ipv6hdr);
		if (encap && (void *)(b + sizeof(struct ipv6hdr)) <= e2)
			b[1] |= 0x30;
	}
	__sync_fetch_and_add(&st->bytes, len);
	skb->priority = (dscp == DSCP_CONTROL || dscp == DSCP_TRIMMED ||
			 dscp == DSCP_TRIMMED_LASTHOP) ? PRIO_CONTROL : PRIO_DATA;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
