/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one entry point shared by the libFuzzer target (fuzz_proto.c) and the
 * corpus replay test (replay.c). Feeds `data` as a byte stream through the
 * frame reader and every message decoder, twice (whole and in
 * data-derived splits), and checks two properties, aborting when one fails:
 * a decoded message re-encodes to exactly its frame, and the split stream
 * decodes to exactly the same frames as the whole one.
 */
#ifndef MSB_TESTS_FUZZ_PROTO_H
#define MSB_TESTS_FUZZ_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msb_fuzz_stats {
	unsigned frames;  /* frames the reader delivered */
	unsigned decoded; /* ... whose payload decoded */
	int first_error;  /* first reader or decoder status < 0, else 0 */
	bool partial;	  /* bytes of an unfinished frame left at the end */
};

void msb_fuzz_proto_one(const uint8_t *data, size_t size, struct msb_fuzz_stats *st);

#endif
