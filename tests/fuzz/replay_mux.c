/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays the mux corpus through msb_fuzz_mux: no crash, no sanitizer
 * report, and the expected outcome by name: `ok-*` seeds must be accepted by the
 * link, `deny-*` seeds must be refused (any other outcome fails).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_mux_entry.h"

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
	int passed = 0, failed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
		FILE *f = fopen(path, "rbe");
		if (!f)
			continue;
		static unsigned char buf[1 << 20];
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		int r = msb_fuzz_mux(buf, n);
		bool ok = true;
		if (strncmp(de->d_name, "ok-", 3) == 0)
			ok = r == 0;
		else if (strncmp(de->d_name, "deny-", 5) == 0)
			ok = r < 0;
		printf("%s %s (%d)\n", ok ? "ok" : "FAIL", de->d_name, r);
		if (ok)
			passed++;
		else
			failed++;
	}
	closedir(d);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 && passed > 0 ? 0 : 1;
}
