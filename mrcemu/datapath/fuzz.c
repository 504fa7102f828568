/* libFuzzer harness for the compiled parser and responder (`make fuzz`; a short run is
 * in the tests). Built with clang -fsanitize=fuzzer,address,undefined: any read outside
 * the input, any write outside the memory region, any leak or undefined behaviour stops
 * the run. The first input byte picks the parse mode (ICRC checked or not, snapped
 * capture or not), the rest is the packet. Every input also goes to one responder (its
 * state carried over eight inputs, so short sequences reach its deeper states), whose only
 * region is a heap block of exactly its size: a payload placed a byte outside it is a
 * heap-buffer-overflow. */
#include <stdlib.h>
#include <string.h>

#include "responder.h"
#include "wire.h"

#define REGION 4096

static struct mrc_regions regions;
static struct mrc_responder resp;
static unsigned inputs;

static void responder_setup(void)
{
	static uint8_t *region;
	if (inputs++ % 8 == 0) {
		if (region) {
			mrc_resp_free(&resp);
			mrc_regions_remove(&regions, 0);
			free(region);
		}
		/* The seeds' RETH: R_Key 0 at VA 0; the window small enough to leave. */
		region = malloc(REGION);
		mrc_regions_add(&regions, 0, 0, region, REGION, NULL);
		struct mrc_resp_consts k = {1, 2, 0x0B, 0, 1, 0x1F, 1, 256};
		if (mrc_resp_init(&resp, 0, 1, 64, 4, 0.002, &k, &regions) < 0)
			abort();
		resp.sack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_SETH].len +
				MRC_HEADERS[MRC_H_CC_STATE].len;
		resp.nack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_NETH].len;
		resp.ack_len = MRC_BTH_LEN + MRC_HEADERS[MRC_H_AETH].len;
		struct mrc_path path = {.ev = 0xC0000005, .sport = 0xC000, .flow_label = 5};
		mrc_resp_set_paths(&resp, &path, 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	size_t len = size - 1;
	/* A heap copy of exactly the packet's length, so ASan sees any overread. */
	uint8_t *pkt = malloc(len ? len : 1);
	memcpy(pkt, data + 1, len);
	size_t wire_len = (mode & 2) ? len + (mode >> 2) : 0;
	struct mrc_parsed p;
	if (mrc_parse(pkt, len, wire_len, mode & 1, &p) == MRC_OK) {
		/* Touch every byte the parse said is ours. */
		volatile uint64_t sink = 0;
		for (int i = 0; i < p.nheaders; i++) {
			const struct mrc_header *h = &MRC_HEADERS[(int)p.header[i]];
			for (int f = 0; f < h->nfields; f++)
				sink += mrc_field(pkt + p.header_at[i], &h->fields[f]);
		}
		for (size_t i = p.payload_at; i < p.payload_end; i++)
			sink += pkt[i];
		if (p.payload_end > len || p.payload_at > len)
			abort(); /* a region outside the packet is a bug even if unread */
	}
	responder_setup();
	resp.verify_icrc = mode & 1;
	enum mrc_error err;
	double now = inputs * 1e-4;
	if (mrc_resp_rx(&resp, pkt, len, now, NULL, &p, &err) == MRC_RX_DONE)
		mrc_resp_timer(&resp, now + 0.01);
	if (resp.ooo > resp.window || resp.nctl > MRC_CTL_MAX)
		abort(); /* the bitmap's count or the control queue left their bounds */
	resp.nctl = 0;
	resp.ndone = 0;
	free(pkt);
	return 0;
}
