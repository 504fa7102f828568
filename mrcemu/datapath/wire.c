/* The compiled data path's wire code: see wire.h. Every check mirrors codec._decode in
 * the same order, so that a bad packet gets the same reason from both. */
#include "wire.h"

#include <string.h>

const char *const mrc_error_names[] = {
	"ok", "truncated", "not_roce", "unknown_opcode", "bad_length", "bad_icrc",
};

/* ---- CRC-32, slicing by 8: short runs and the tail of long ones ------------------ */
static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xFF];
	crc_ready = 1;
}

static uint32_t crc_update(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;
		c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
		    crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
		    crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c;
}

uint32_t mrc_crc32_table(uint32_t crc, const uint8_t *p, size_t n)
{
	if (!crc_ready)
		crc_init();
	return ~crc_update(~crc, p, n);
}

/* ---- CRC-32 by carry-less multiplication: 64 bytes a step, folded ------------------- */
#if defined(__x86_64__)
#include <immintrin.h>

/* Folding constants of the reflected polynomial 0x04C11DB7: x^(4*128+32) and
 * x^(4*128-32) mod P for the 512-bit stride, x^(128+32) and x^(128-32) for 128 bits,
 * x^64 mod P for 64 to 32, and P' with mu for Barrett's reduction. Each is checked
 * against the table's result by the tests, not taken on trust. */
static const uint64_t k1k2[2] = {0x0154442bd4ull, 0x01c6e41596ull};
static const uint64_t k3k4[2] = {0x01751997d0ull, 0x00ccaa009eull};
static const uint64_t k5k0[2] = {0x0163cd6124ull, 0};
static const uint64_t barrett[2] = {0x01db710641ull, 0x01f7011641ull};

#define FOLD(x, k, y) \
	_mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), \
				    _mm_clmulepi64_si128(x, k, 0x11)), y)

/* The internal (inverted) state over n bytes, n >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(uint32_t c,
								 const uint8_t *p, size_t n)
{
	__m128i x1 = _mm_loadu_si128((const __m128i *)p);
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
	__m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
	__m128i k = _mm_loadu_si128((const __m128i *)k1k2);
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
	for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
		x1 = FOLD(x1, k, _mm_loadu_si128((const __m128i *)p));
		x2 = FOLD(x2, k, _mm_loadu_si128((const __m128i *)(p + 16)));
		x3 = FOLD(x3, k, _mm_loadu_si128((const __m128i *)(p + 32)));
		x4 = FOLD(x4, k, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	k = _mm_loadu_si128((const __m128i *)k3k4);
	x1 = FOLD(x1, k, x2);
	x1 = FOLD(x1, k, x3);
	x1 = FOLD(x1, k, x4);
	for (; n >= 16; p += 16, n -= 16)
		x1 = FOLD(x1, k, _mm_loadu_si128((const __m128i *)p));
	/* 128 bits to 64, 64 to 32, then Barrett's reduction to the remainder */
	const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
	__m128i t = _mm_clmulepi64_si128(x1, k, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
	t = _mm_srli_si128(x1, 4);
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32),
				  _mm_loadu_si128((const __m128i *)k5k0), 0x00);
	x1 = _mm_xor_si128(x1, t);
	k = _mm_loadu_si128((const __m128i *)barrett);
	t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), k, 0x00);
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, t), 1);
}

static int have_clmul = -1;
#endif

uint32_t mrc_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	if (!crc_ready)
		crc_init();
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (have_clmul < 0)
		have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	if (have_clmul && n >= 64) {
		size_t m = n & ~(size_t)15;
		c = crc_fold(c, p, m);
		p += m;
		n -= m;
	}
#endif
	return ~crc_update(c, p, n);
}

uint32_t mrc_icrc(const uint8_t *m, size_t end)
{
	/* The pseudo LRH, then the IPv6 header with traffic class, flow label and hop
	 * limit all ones, UDP checksum all ones, and BTH byte 4 (FECN, BECN) all ones. */
	static const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	uint8_t first[4] = {(uint8_t)(m[0] | 0x0F), 0xFF, 0xFF, 0xFF};
	uint32_t c = mrc_crc32(0, ones, 8);
	c = mrc_crc32(c, first, 4);
	c = mrc_crc32(c, m + 4, 3);
	c = mrc_crc32(c, ones, 1);
	c = mrc_crc32(c, m + 8, 36);
	c = mrc_crc32(c, m + 44, 2);
	c = mrc_crc32(c, ones, 2);
	c = mrc_crc32(c, m + 48, 4);
	c = mrc_crc32(c, ones, 1);
	return mrc_crc32(c, m + 53, end > 53 ? end - 53 : 0);
}

/* ---- the UDP checksum ------------------------------------------------------------- */
static uint64_t sum16(uint64_t s, const uint8_t *p, size_t n)
{
	while (n >= 2) {
		s += (uint32_t)p[0] << 8 | p[1];
		p += 2;
		n -= 2;
	}
	if (n)
		s += (uint32_t)p[0] << 8;
	return s;
}

uint16_t mrc_udp_checksum(const uint8_t *src, const uint8_t *dst, const uint8_t *udp,
			  size_t n)
{
	uint64_t s = sum16(0, src, 16);
	s = sum16(s, dst, 16);
	s += (n >> 16) + (n & 0xFFFF) + 17;
	s = sum16(s, udp, n);
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	uint16_t ck = (uint16_t)~s;
	return ck ? ck : 0xFFFF;
}

/* ---- fields ------------------------------------------------------------------------ */
uint64_t mrc_field(const uint8_t *hdr, const struct mrc_field *f)
{
	unsigned first = f->bitoff / 8, last = (f->bitoff + f->bits - 1) / 8;
	unsigned __int128 v = 0;
	for (unsigned i = first; i <= last; i++)
		v = v << 8 | hdr[i];
	v >>= (last + 1) * 8 - (f->bitoff + f->bits);
	return f->bits == 64 ? (uint64_t)v : (uint64_t)v & ((1ULL << f->bits) - 1);
}

int64_t mrc_field_signed(const uint8_t *hdr, const struct mrc_field *f)
{
	uint64_t v = mrc_field(hdr, f);
	if (f->bits < 64 && (v >> (f->bits - 1)) & 1)
		v |= ~0ULL << f->bits;
	return (int64_t)v;
}

/* ---- parsing ----------------------------------------------------------------------- */
static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

enum mrc_error mrc_parse(const uint8_t *buf, size_t len, size_t wire_len, int verify_icrc,
			 struct mrc_parsed *o)
{
	const size_t min = MRC_IP6_LEN + MRC_UDP_LEN + MRC_BTH_LEN;
	memset(o, 0, sizeof(*o));
	o->snapped = wire_len > len;
	size_t full = o->snapped ? wire_len : len;
	if (len < min)
		return MRC_E_TRUNCATED;
	uint32_t vtf = be32(buf);
	if (vtf >> 28 != 6)
		return MRC_E_NOT_ROCE;
	o->tclass = (vtf >> 20) & 0xFF;
	o->flow_label = vtf & 0xFFFFF;
	o->hlim = buf[7];
	uint16_t plen = be16(buf + 4);
	uint8_t nh = buf[6];
	const uint8_t *m = buf;
	size_t mlen = len;
	if (nh == MRC_IPPROTO_IPV6) {
		/* IPv6-in-IPv6: what the network did is in the outer header; the rest is
		 * the inner one, as the sender built it. */
		if (plen != full - MRC_IP6_LEN)
			return MRC_E_BAD_LENGTH;
		o->has_via = 1;
		o->ip = MRC_IP6_LEN;
		m += MRC_IP6_LEN;
		mlen -= MRC_IP6_LEN;
		full -= MRC_IP6_LEN;
		if (mlen < min)
			return MRC_E_TRUNCATED;
		if (be32(m) >> 28 != 6)
			return MRC_E_NOT_ROCE;
		plen = be16(m + 4);
		nh = m[6];
	}
	if (nh != 17)
		return MRC_E_NOT_ROCE;
	if (plen != full - MRC_IP6_LEN)
		return MRC_E_BAD_LENGTH;
	const uint8_t *udp = m + MRC_IP6_LEN;
	uint16_t dport = be16(udp + 2);
	if (dport != MRC_UDP_PORT && dport != MRC_UDP_PORT_TRANSPOSED)
		return MRC_E_NOT_ROCE;
	if (be16(udp + 4) != plen)
		return MRC_E_BAD_LENGTH;
	o->sport = be16(udp);
	const uint8_t *bth = udp + MRC_UDP_LEN;
	o->opcode = bth[MRC_BTH_OPCODE_BYTE];
	o->ts = (bth[MRC_BTH_TS_BYTE] & MRC_BTH_TS_MASK) != 0;
	const signed char *chain = MRC_AFTER_BTH[o->opcode][o->ts];
	if (chain[0] < 0)
		return MRC_E_UNKNOWN_OPCODE;
	size_t off = MRC_IP6_LEN + MRC_UDP_LEN + MRC_BTH_LEN;
	uint8_t dscp = o->tclass >> 2;
	o->trimmed = (dscp == MRC_DSCP_TRIMMED || dscp == MRC_DSCP_TRIMMED_LASTHOP) &&
		     MRC_OPCODE_KIND[o->opcode] == MRC_KIND_DATA;
	size_t end = (o->trimmed || o->snapped) ? mlen : mlen - MRC_ICRC_LEN;
	o->nheaders = chain[0];
	for (int i = 0; i < chain[0]; i++) {
		const struct mrc_header *h = &MRC_HEADERS[(int)chain[1 + i]];
		if (off + h->len > end)
			return MRC_E_TRUNCATED;
		o->header[i] = chain[1 + i];
		o->header_at[i] = o->ip + off;
		off += h->len;
	}
	o->payload_at = o->ip + off;
	if (o->snapped) {
		/* As much of the payload as the capture kept. */
		size_t stop = full - MRC_ICRC_LEN < mlen ? full - MRC_ICRC_LEN : mlen;
		o->payload_end = o->ip + (stop > off ? stop : off);
		return MRC_OK;
	}
	if (o->trimmed) {
		/* A trimmed packet may still carry its ICRC slot; anything else is malformed. */
		if (off != mlen && mlen - off != MRC_ICRC_LEN)
			return MRC_E_BAD_LENGTH;
		o->payload_end = o->payload_at;
		return MRC_OK;
	}
	if (MRC_OPCODE_KIND[o->opcode] == MRC_KIND_CONTROL && off != end)
		return MRC_E_BAD_LENGTH;
	o->payload_end = o->ip + end;
	if (verify_icrc) {
		if (mlen < MRC_IP6_LEN + MRC_UDP_LEN + 16 ||
		    mrc_icrc(m, mlen - MRC_ICRC_LEN) !=
			    ((uint32_t)m[mlen - 4] | (uint32_t)m[mlen - 3] << 8 |
			     (uint32_t)m[mlen - 2] << 16 | (uint32_t)m[mlen - 1] << 24))
			return MRC_E_BAD_ICRC;
		o->icrc_checked = 1;
	}
	return MRC_OK;
}

/* ---- framing ------------------------------------------------------------------------ */
size_t mrc_frame_len(size_t body_len, size_t payload_len, int with_via)
{
	return (with_via ? MRC_IP6_LEN : 0) + MRC_IP6_LEN + MRC_UDP_LEN + body_len + payload_len +
	       MRC_ICRC_LEN;
}

static void put_ip6(uint8_t *p, uint32_t vtf, uint16_t plen, uint8_t nh, uint8_t hlim,
		    const uint8_t *src, const uint8_t *dst)
{
	p[0] = vtf >> 24;
	p[1] = vtf >> 16;
	p[2] = vtf >> 8;
	p[3] = vtf;
	p[4] = plen >> 8;
	p[5] = plen;
	p[6] = nh;
	p[7] = hlim;
	memcpy(p + 8, src, 16);
	memcpy(p + 24, dst, 16);
}

void mrc_finish(uint8_t *out, const uint8_t *src, const uint8_t *dst, const uint8_t *final,
		const uint8_t *via, uint16_t sport, uint8_t tclass, uint32_t flow_label,
		uint8_t hlim, const uint8_t *body, size_t body_len, const uint8_t *payload,
		size_t payload_len)
{
	uint32_t vtf = 6u << 28 | (uint32_t)tclass << 20 | (flow_label & 0xFFFFF);
	size_t udp_len = MRC_UDP_LEN + body_len + payload_len + MRC_ICRC_LEN;
	uint8_t *in = via ? out + MRC_IP6_LEN : out;
	if (via)
		put_ip6(out, vtf, (uint16_t)(MRC_IP6_LEN + udp_len), MRC_IPPROTO_IPV6, hlim, src,
			via);
	/* First addressed to `final`, which ICRC and checksum cover; then to `dst`. */
	put_ip6(in, vtf, (uint16_t)udp_len, 17, hlim, src, final);
	uint8_t *udp = in + MRC_IP6_LEN;
	udp[0] = sport >> 8;
	udp[1] = sport;
	udp[2] = MRC_UDP_PORT >> 8;
	udp[3] = MRC_UDP_PORT & 0xFF;
	udp[4] = udp_len >> 8;
	udp[5] = udp_len;
	udp[6] = udp[7] = 0;
	memcpy(udp + MRC_UDP_LEN, body, body_len);
	if (payload_len) /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(udp + MRC_UDP_LEN + body_len, payload, payload_len);
	uint8_t *crc = udp + udp_len - MRC_ICRC_LEN;
	uint32_t c = mrc_icrc(in, MRC_IP6_LEN + udp_len - MRC_ICRC_LEN);
	crc[0] = c;
	crc[1] = c >> 8;
	crc[2] = c >> 16;
	crc[3] = c >> 24;
	uint16_t ck = mrc_udp_checksum(src, final, udp, udp_len);
	udp[6] = ck >> 8;
	udp[7] = ck;
	if (final != dst)
		memcpy(in + 24, dst, 16);
}

long mrc_peek_dqpn(const uint8_t *p, size_t n)
{
	static const struct mrc_field *dqpn;
	if (!dqpn) {
		const struct mrc_header *h = &MRC_HEADERS[MRC_H_BTH];
		for (int i = 0; i < h->nfields; i++)
			if (strcmp(h->fields[i].name, "dqpn") == 0)
				dqpn = &h->fields[i];
		if (!dqpn)
			return -1;
	}
	size_t ip = 0;
	if (n >= MRC_IP6_LEN && p[6] == MRC_IPPROTO_IPV6)
		ip = MRC_IP6_LEN;
	size_t bth = ip + MRC_IP6_LEN + MRC_UDP_LEN;
	if (n < bth + MRC_BTH_LEN || (p[0] >> 4) != 6 || p[ip + 6] != 17)
		return -1;
	unsigned dport = (unsigned)p[ip + 42] << 8 | p[ip + 43];
	if (dport != MRC_UDP_PORT && dport != MRC_UDP_PORT_TRANSPOSED)
		return -1;
	return (long)mrc_field(p + bth, dqpn);
}
