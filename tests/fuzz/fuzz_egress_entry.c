/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress parsers under hostile input (src/egress): the request head as a
 * whole and as every prefix a slow client could send (a prefix must never be
 * accepted as a different request, and once the head is refused no longer
 * input is accepted), the DNS reply parser, and the record line parser.
 */
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "fuzz_egress_entry.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

int msb_fuzz_egress(const uint8_t *data, size_t len)
{
	const char *buf = (const char *)data;
	msb_egress_request whole;
	int r = msb_egress__parse_head(buf, len, &whole);
	if (r == MSB_EGRESS_HEAD_OK) {
		check(whole.head_len <= len && whole.head_len >= 4);
		check(memcmp(buf + whole.head_len - 4, "\r\n\r\n", 4) == 0);
		check(whole.port != 0 && whole.host[0] != '\0');
		check(whole.connect == (whole.upstream_head == NULL));
		if (whole.upstream_head) {
			/* What goes upstream is itself a head with no smuggling. */
			check(strlen(whole.upstream_head) == whole.upstream_len);
			check(strstr(whole.upstream_head, "\r\n\r\n") ==
			      whole.upstream_head + whole.upstream_len - 4);
		}
		/* Any prefix short of the head is incomplete, never a request. */
		for (size_t cut = 1; cut < whole.head_len && cut < 512; cut += 7) {
			msb_egress_request part;
			int pr = msb_egress__parse_head(buf, cut, &part);
			check(pr == MSB_EGRESS_HEAD_NEED_MORE);
			msb_egress__request_clear(&part);
		}
	} else if (r < 0) {
		check(whole.reason != NULL && whole.upstream_head == NULL);
	}
	msb_egress__request_clear(&whole);

	struct sockaddr_storage a[MSB_EGRESS_ADDRS_MAX];
	if (len >= 2) {
		uint16_t id = (uint16_t)((data[0] << 8) | data[1]);
		int n = msb_egress__dns_parse(data, len, id, 1, 443, a, MSB_EGRESS_ADDRS_MAX);
		check(n <= MSB_EGRESS_ADDRS_MAX);
		n = msb_egress__dns_parse(data, len, id, 28, 443, a, MSB_EGRESS_ADDRS_MAX);
		check(n <= MSB_EGRESS_ADDRS_MAX);
	}
	msb_egress_entry e;
	char reason[64];
	if (msb_egress__record_parse(buf, len, &e, reason, sizeof(reason)) == 0)
		check(strlen(e.host) <= MSB_EGRESS_HOST_MAX);
	return r;
}
