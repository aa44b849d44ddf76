/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest side of bench/hosttools_bench.c: N host-tool calls over the native
 * channel with the header-only C client, one timed round trip each; prints
 * the nanoseconds of each call, one per line. Runs inside the sandbox.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../clients/c/msb_host_tools.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1000;
	int fd = msb_ht_connect(NULL);
	if (fd < 0) {
		fprintf(stderr, "connect: %d\n", fd);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct timespec a, b;
		char *out = NULL;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int r = msb_ht_call(fd, "{\"name\":\"add\",\"arguments\":{\"left\":2,\"right\":3}}",
				    &out);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (r < 0 || !out || out[0] != '{' || out[2] != 'v') {
			fprintf(stderr, "call %d: %d %s\n", i, r, out ? out : "");
			return 1;
		}
		free(out);
		printf("%lld\n",
		       (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
	}
	return 0;
}
