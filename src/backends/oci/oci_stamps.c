/* SPDX-License-Identifier: Apache-2.0 */
/* msb-oci-shim's timing probe (oci_stamps.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/oci/oci_stamps.h"
#include "util/util.h"

void oci_stamp(oci_stamps *t, const char *name)
{
	if (t->n < OCI_STAMPS_MAX) {
		t->name[t->n] = name;
		t->ns[t->n++] = msb__now_ns();
	}
}

void oci_stamps_write(const char *runtime, const char *what, const oci_stamps *t)
{
	const char *path = getenv("MSB_OCI_TIMING");
	if (!path || path[0] != '/' || t->n < 2)
		return;
	char line[1024];
	int k = snprintf(line, sizeof(line), "%s runtime=%s", what, runtime ? runtime : "?");
	size_t len = k > 0 ? (size_t)k : 0;
	for (size_t i = 1; i < t->n && len < sizeof(line); i++) {
		k = snprintf(line + len, sizeof(line) - len, " %s=%.3f", t->name[i],
			     (double)(t->ns[i] - t->ns[i - 1]) / 1e6);
		len += k > 0 ? (size_t)k : 0;
	}
	if (len < sizeof(line)) {
		k = snprintf(line + len, sizeof(line) - len, " mono=%lld\n", (long long)t->ns[0]);
		len += k > 0 ? (size_t)k : 0;
	}
	if (len >= sizeof(line))
		return;
	/* guest-names: ok - the caller's probe file, a host path (O_NOFOLLOW) */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, len);
	(void)w;
	close(fd);
}
