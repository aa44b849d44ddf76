/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File plane throughput of the `ns` backend: write_file and read_file of one
 * SIZE MiB file (default 64) into and out of a live sandbox, N times each,
 * through the public API, beside a plain write(2)/read(2) of the same bytes
 * to the same filesystem, the read into a buffer touched beforehand (the
 * floor any copy pays). Prints medians and one
 * machine-readable line per measurement ("RESULT name median_ms MB/s") that
 * bench/files-peers collects next to `docker cp` and `podman cp`.
 *
 *   MSB_SHIM=build/shim/msb-shim MSB_AGENT=build/agent/msb-agent \
 *       build/tests/ns_files/files_bench [N [SIZE_MIB]]
 *
 * Needs what the ns backend needs (root, or user namespaces). Leaves nothing
 * behind: the sandbox is disposed and its private state root removed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "util/fs.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n, size_t bytes)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	double med = v[n / 2];
	double mbs = (double)bytes / 1e6 / (med / 1e3);
	printf("%-26s median %8.2f ms  min %8.2f  max %8.2f  %7.0f MB/s  (n=%d)\n", name, med, v[0],
	       v[n - 1], mbs, n);
	printf("RESULT %s %.3f %.0f\n", name, med, mbs);
}

static int fail(const char *what, msb_error *err)
{
	fprintf(stderr, "files_bench: %s: %s\n", what, err ? msb_error_message(err) : "failed");
	msb_error_free(err);
	return 1;
}

/* The floor: the same bytes with write(2)+rename and read(2) in `dir`. */
static void plain_io(const char *dir, const uint8_t *data, size_t size, int n)
{
	double *w = calloc((size_t)n, sizeof(double)), *r = calloc((size_t)n, sizeof(double));
	/* The floor reads into one buffer touched beforehand: no allocation and
	 * no page faults, only the copy out of the page cache. */
	uint8_t *buf = malloc(size);
	memset(buf, 0, size);
	char tmp[256], dst[256];
	snprintf(tmp, sizeof(tmp), "%s/plain.tmp", dir);
	snprintf(dst, sizeof(dst), "%s/plain", dir);
	for (int i = 0; i < n; i++) {
		double t0 = now_ms();
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		for (size_t off = 0; fd >= 0 && off < size;) {
			ssize_t k = write(fd, data + off, size - off);
			if (k <= 0)
				break;
			off += (size_t)k;
		}
		close(fd);
		rename(tmp, dst);
		w[i] = now_ms() - t0;
		t0 = now_ms();
		fd = open(dst, O_RDONLY | O_CLOEXEC);
		for (size_t off = 0; fd >= 0 && off < size;) {
			ssize_t k = read(fd, buf + off, size - off);
			if (k <= 0)
				break;
			off += (size_t)k;
		}
		close(fd);
		r[i] = now_ms() - t0;
	}
	unlink(dst);
	report("plain write+rename", w, n, size);
	report("plain read (warm buf)", r, n, size);
	free(w);
	free(r);
	free(buf);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 11;
	long mib = argc > 2 ? strtol(argv[2], NULL, 10) : 64;
	if (n < 3 || mib < 1 || mib > 1024) {
		fprintf(stderr, "usage: %s [N>=3 [SIZE_MIB 1..1024]]\n", argv[0]);
		return 2;
	}
	size_t size = (size_t)mib << 20;
	uint8_t *data = malloc(size);
	if (!data)
		return 1;
	for (size_t off = 0; off < size;) {
		ssize_t k = getrandom(data + off, size - off > 33554431 ? 33554431 : size - off, 0);
		if (k <= 0)
			return 1;
		off += (size_t)k;
	}

	char root[] = "/tmp/msbb-XXXXXX";
	if (!mkdtemp(root))
		return 1;
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_error *err = NULL;
	int rc = 1;
	if (msb_ns_backend_new(&o, &b, &err) < 0) {
		fail("backend", err);
		goto out_root;
	}
	msb_spec_builder *sbld = msb_spec_builder_new("bench");
	msb_spec_builder_set_requires(sbld, MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT);
	msb_spec *spec = NULL;
	if (msb_spec_build(sbld, &spec, &err) < 0) {
		msb_spec_builder_free(sbld);
		fail("spec", err);
		goto out_backend;
	}
	msb_spec_builder_free(sbld);
	msb_key key = {.scope = "bench", .thread_id = "files", .agent_dir = "/bench"};
	msb_sandbox *sb = NULL;
	int r = msb_backend_acquire(b, &key, spec, &sb, &err);
	msb_spec_unref(spec);
	if (r < 0) {
		fail("acquire", err);
		goto out_backend;
	}

	printf("ns file plane: %ld MiB, N=%d\n", mib, n);
	double *w = calloc((size_t)n, sizeof(double)), *rd = calloc((size_t)n, sizeof(double));
	bool ok = true;
	for (int i = 0; i < n && ok; i++) {
		double t0 = now_ms();
		if (msb_sandbox_write_file(sb, "bench.bin", data, size, NULL, &err) < 0) {
			ok = !fail("write_file", err);
			err = NULL;
			break;
		}
		w[i] = now_ms() - t0;
		uint8_t *got = NULL;
		size_t len = 0;
		t0 = now_ms();
		if (msb_sandbox_read_file(sb, "bench.bin", NULL, size, &got, &len, &err) < 0) {
			ok = !fail("read_file", err);
			err = NULL;
			break;
		}
		rd[i] = now_ms() - t0;
		if (len != size || (i == 0 && memcmp(got, data, size) != 0)) {
			fprintf(stderr, "files_bench: read back different bytes\n");
			ok = false;
		}
		free(got);
	}
	if (ok) {
		report("ns write_file", w, n, size);
		report("ns read_file", rd, n, size);
		plain_io(root, data, size, n);
		rc = 0;
	}
	free(w);
	free(rd);
	msb_sandbox_free(sb);
	msb_scope_purge purge = {0};
	if (msb_backend_dispose_scope(b, "bench", "files", &purge, &err) < 0 || purge.undisposed) {
		fail("dispose", err);
		err = NULL;
		rc = 1;
	}
out_backend:
	msb_backend_unref(b);
out_root:
	msb__rm_rf(root);
	free(data);
	return rc;
}
