/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays every file of a corpus directory through the rpc fuzz entry
 * (tests/fuzz/fuzz_rpc.h), which aborts when a property breaks.
 * Ends with "N replayed".
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_rpc.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	DIR *d = opendir(argv[1]);
	if (!d) {
		perror(argv[1]);
		return 2;
	}
	unsigned n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		FILE *f = fopen(path, "rbe");
		if (!f)
			continue;
		static uint8_t buf[1 << 20];
		size_t len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		msb_fuzz_rpc_one(buf, len);
		n++;
	}
	closedir(d);
	printf("%u replayed\n", n);
	return n ? 0 : 1;
}
