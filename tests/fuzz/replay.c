/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays every file of a corpus directory through the fuzz entry point
 * (tests/fuzz/fuzz_proto.h). Beyond "no crash" (the entry aborts on a broken
 * property), the file name states what must happen:
 *   valid-*    every frame decodes, nothing left over, at least one frame;
 *   invalid-*  the stream is refused (a reader or decoder error);
 *   anything else (regressions found by the fuzzer): no crash only.
 * Ends with "N passed, N failed".
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_proto.h"
#include "proto/proto.h"

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	unsigned char *buf = malloc(cap);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		unsigned char *nb = realloc(buf, cap * 2);
		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	fclose(f);
	*len = n;
	return buf;
}

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
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		if (!names || !(names[n] = strdup(de->d_name)))
			return 2;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp);

	unsigned passed = 0, failed = 0, valid = 0, invalid = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
		size_t len = 0;
		unsigned char *data = slurp(path, &len);
		if (!data) {
			printf("FAIL %s: unreadable\n", names[i]);
			failed++;
			continue;
		}
		struct msb_fuzz_stats st;
		msb_fuzz_proto_one(data, len, &st);
		free(data);
		const char *why = NULL;
		if (strncmp(names[i], "valid-", 6) == 0) {
			valid++;
			if (st.first_error)
				why = msb_proto_strerror(st.first_error);
			else if (st.partial)
				why = "unfinished frame at the end";
			else if (st.frames == 0 || st.decoded != st.frames)
				why = "no frame decoded";
		} else if (strncmp(names[i], "invalid-", 8) == 0) {
			invalid++;
			if (st.first_error == 0)
				why = "accepted";
		}
		if (why) {
			printf("FAIL %s: %s\n", names[i], why);
			failed++;
		} else {
			printf("ok   %s (%u frames, %u decoded%s%s)\n", names[i], st.frames,
			       st.decoded, st.first_error ? ", refused: " : "",
			       st.first_error ? msb_proto_strerror(st.first_error) : "");
			passed++;
		}
		free(names[i]);
	}
	free(names);
	if (valid == 0 || invalid == 0) {
		printf("FAIL corpus: needs valid-* and invalid-* seeds\n");
		failed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
