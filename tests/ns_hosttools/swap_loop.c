/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A guest program for tests/ns_hosttools (issue 15): until SECONDS have
 * passed, wait for a socket to appear at NAME, swap it for a link to TARGET at
 * once, hold the link a moment, then clear the name for the host's next bind.
 * Prints the number of swaps. Run inside the sandbox (the host image's
 * libraries are there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: swap-loop NAME TARGET SECONDS\n");
		return 2;
	}
	const char *name = argv[1], *target = argv[2];
	double end = now_s() + strtod(argv[3], NULL);
	unsigned long swaps = 0;
	struct stat st;
	for (unsigned long i = 0;; i++) {
		if ((i & 1023) == 0 && now_s() >= end)
			break;
		if (lstat(name, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		unlink(name);
		if (symlink(target, name) == 0) {
			swaps++;
			for (volatile int k = 0; k < 20000; k++)
				;
			unlink(name);
		}
	}
	printf("%lu\n", swaps);
	return 0;
}
