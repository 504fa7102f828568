/* The compiled data path's wire code: framing, parsing, ICRC and UDP checksum.
 *
 * Plain C with no Python in it, so that the CPython module (_datapath.c) and the
 * libFuzzer harness (fuzz.c) run the very same parser. Layouts come from the
 * generated tables (mrc_layout.h), never from hand-written offsets; the Python codec
 * (mrcemu/wire/codec.py) is the reference this must match byte for byte.
 */
#ifndef MRC_DATAPATH_WIRE_H
#define MRC_DATAPATH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "mrc_layout.h"
#include "mrc_shared.h"

#define MRC_IP6_LEN 40
#define MRC_UDP_LEN 8

/* Why a buffer is not a packet we accept: the codec's DecodeError reasons. */
enum mrc_error {
	MRC_OK = 0,
	MRC_E_TRUNCATED,
	MRC_E_NOT_ROCE,
	MRC_E_UNKNOWN_OPCODE,
	MRC_E_BAD_LENGTH,
	MRC_E_BAD_ICRC,
};

extern const char *const mrc_error_names[];

struct mrc_parsed {
	size_t ip;           /* where the IPv6 header before UDP starts (40 if encapsulated) */
	int has_via;         /* IPv6-in-IPv6: the outer DA is at bytes 24..40 */
	uint8_t tclass;      /* of the outer header: what the network did */
	uint32_t flow_label;
	uint8_t hlim;        /* the outer hop limit, as the codec reports it */
	uint16_t sport;
	uint8_t opcode;
	uint8_t ts;
	int nheaders;        /* headers after BTH */
	int8_t header[MRC_MAX_AFTER_BTH];
	size_t header_at[MRC_MAX_AFTER_BTH];
	size_t payload_at, payload_end; /* payload_end < payload_at: none */
	int trimmed, snapped;
	int icrc_checked;    /* verified and good (only ever set with MRC_OK) */
};

/* The full PSN nearest to `ref` whose low 24 bits are psn24 (transport/base.unwrap). */
static inline int64_t mrc_unwrap(uint32_t psn24, int64_t ref)
{
	int64_t base = ref - (1 << 23);
	return base + (int64_t)(((uint64_t)psn24 - (uint64_t)base) & 0xFFFFFFu);
}

/* zlib's CRC-32 (reflected 0xEDB88320), continuing from `crc` (0 to start): by
 * carry-less multiplication where the CPU has it (64 bytes a step), else by tables. */
uint32_t mrc_crc32(uint32_t crc, const uint8_t *p, size_t n);
/* The same by tables alone (slicing by 8): the reference the folded one is held to. */
uint32_t mrc_crc32_table(uint32_t crc, const uint8_t *p, size_t n);

/* The RoCEv2 ICRC over an IPv6 packet's bytes [0, end): masked as codec's icrc.crc. */
uint32_t mrc_icrc(const uint8_t *ip6, size_t end);

/* The IPv6 UDP checksum of udp[0, n) (its checksum field zero) from src to dst. */
uint16_t mrc_udp_checksum(const uint8_t *src, const uint8_t *dst, const uint8_t *udp,
			  size_t n);

/* Parse `len` bytes starting at an IPv6 header. `wire_len` (0: none) is the length on
 * the wire when a capture kept less. Reads nothing outside buf[0, len). */
enum mrc_error mrc_parse(const uint8_t *buf, size_t len, size_t wire_len, int verify_icrc,
			 struct mrc_parsed *out);

/* A field's value from its header's first byte (sign-extended when signed). */
int64_t mrc_field_signed(const uint8_t *hdr, const struct mrc_field *f);
uint64_t mrc_field(const uint8_t *hdr, const struct mrc_field *f);

/* The BTH DQPN of a RoCEv2/MRC packet (plain or IPv6-in-IPv6) from its IPv6 header,
 * or -1: what a NIC needs to pick the connection before the connection parses it. */
long mrc_peek_dqpn(const uint8_t *p, size_t n);

/* The length finish() writes: the inner packet, plus an outer header with `via`. */
size_t mrc_frame_len(size_t body_len, size_t payload_len, int with_via);

/* IPv6 (+ outer IPv6 to `via`) + UDP around body+payload, with ICRC and UDP checksum:
 * codec.finish. `final` is the address the ICRC and checksum cover (the delivered
 * address of a plain RoCEv2 packet; dst otherwise). `out` holds mrc_frame_len bytes. */
void mrc_finish(uint8_t *out, const uint8_t *src, const uint8_t *dst, const uint8_t *final,
		const uint8_t *via, uint16_t sport, uint8_t tclass, uint32_t flow_label,
		uint8_t hlim, const uint8_t *body, size_t body_len, const uint8_t *payload,
		size_t payload_len);

#endif
