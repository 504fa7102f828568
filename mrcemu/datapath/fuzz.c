/* libFuzzer harness for the compiled parser (`make fuzz`; a short run is in the tests).
 * Built with clang -fsanitize=fuzzer,address,undefined: any read outside the input, any
 * leak or undefined behaviour stops the run. The first input byte picks the parse mode
 * (ICRC checked or not, snapped capture or not), the rest is the packet. */
#include <stdlib.h>
#include <string.h>

#include "wire.h"

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
	free(pkt);
	return 0;
}
