/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays every file of the OCI corpus through msb_fuzz_oci: no crash, no
 * sanitizer report, and nothing written outside the input's own directory
 * (the entry aborts on that). Ends with "N passed, N failed".
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_oci_entry.h"

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
	int passed = 0;
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
		msb_fuzz_oci(buf, n);
		printf("ok %s\n", de->d_name);
		passed++;
	}
	closedir(d);
	printf("%d passed, 0 failed\n", passed);
	return passed > 0 ? 0 : 1;
}
