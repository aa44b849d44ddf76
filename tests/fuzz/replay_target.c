/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a corpus directory through msb_fuzz_target_one (fuzz_target.h):
 * no crash, no broken property (the entry aborts), no sanitizer report, and
 * the expected outcome by name: `ok-*` seeds must be accepted, `bad-*` seeds
 * refused. Ends with "N replayed".
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"

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
	unsigned n = 0, wrong = 0;
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
		int accepted = msb_fuzz_target_one(buf, len);
		n++;
		if ((strncmp(e->d_name, "ok-", 3) == 0 && accepted != 1) ||
		    (strncmp(e->d_name, "bad-", 4) == 0 && accepted != 0)) {
			fprintf(stderr, "%s: %s\n", e->d_name,
				accepted ? "accepted, expected a refusal"
					 : "refused, expected to be accepted");
			wrong++;
		}
	}
	closedir(d);
	printf("%u replayed, %u with the wrong outcome\n", n, wrong);
	return n && !wrong ? 0 : 1;
}
