/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` backend's side of egress (docs/egress.md): the proxy's
 * configuration for a sandbox (the backend's egress config plus the spec's
 * rules), and the decision records the shim appends to <state>/egress.log,
 * turned into EgressObserved events through the router's reporter.
 *
 * Records are read - and the log truncated, under its flock, which the shim
 * takes for each append - when an exec completes, at reset, and at
 * disposal (after the shim is down, so the records of tunnels it closed are
 * in). The window of an event therefore spans calls: it carries no call id
 * (17.5, 17.9).
 */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msb/observer.h>

#include "backends/types.h"
#include "egress/egress.h"
#include "ns_int.h"
#include "util/fs.h"
#include "util/json.h"

int msb_ns__egress_check_config(const char *json, msb_error **err)
{
	msb_egress_config c;
	msb_egress__config_init(&c);
	int r = msb_egress__config_from_json(&c, json, strlen(json), false, err);
	msb_egress__config_clear(&c);
	return r < 0 ? msb_error_wrap(err, "ns options.egress_config") : 0;
}

int msb_ns__egress_config(const ns_backend *b, const msb_spec *spec, char **out, msb_error **err)
{
	*out = NULL;
	if (msb_spec_egress(spec) != MSB_EGRESS_ALLOWLIST)
		return 0;
	return msb_backends__egress_rules(b->egress_config, "ns options.egress_config", "ns", spec,
					  out, err);
}

int msb_ns__egress_match(int dfd, const char *name, const char *want, msb_error **err)
{
	_cleanup_free_ char *have = NULL;
	int r = msb__read_file_at(dfd, MSB_NS_EGRESS_CONFIG, 1u << 20, &have, NULL);
	if (r < 0 && r != -ENOENT)
		return msb__error_errno(err, r, "ns: cannot read `%s`'s egress configuration",
					name);
	if (msb__streq_null(have, want))
		return 0;
	return msb_error_set(err, MSB_E_VALUE,
			     "ns: the warm sandbox `%s` runs with another egress configuration "
			     "than this spec asks for; dispose it first",
			     name);
}

void msb_ns__egress_drain(int dfd, const msb_key *key, const msb_egress_reporter *rep)
{
	if (!rep || !rep->report)
		return;
	int fd = openat(dfd, MSB_EGRESS_LOG_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			close(fd);
			return;
		}
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    st.st_size <= (off_t)MSB_EGRESS_LOG_MAX + MSB_EGRESS_RECORD_MAX &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		while (len < (size_t)st.st_size) {
			ssize_t n = pread(fd, buf + len, (size_t)st.st_size - len, (off_t)len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			len += (size_t)n;
		}
	}
	if (st.st_size > 0 && ftruncate(fd, 0) < 0)
		len = 0; /* not consumed: read again next time rather than twice */
	flock(fd, LOCK_UN);
	close(fd);
	for (size_t pos = 0; buf && pos < len;) {
		char *nl = memchr(buf + pos, '\n', len - pos);
		if (!nl)
			break;
		msb_egress_entry e;
		char reason[64];
		if (msb_egress__record_parse(buf + pos, (size_t)(nl - (buf + pos)), &e, reason,
					     sizeof(reason)) == 0) {
			msb_egress_record r = {
				.time_ns = e.time_ns,
				.decision = e.allow ? MSB_EGRESS_ALLOW : MSB_EGRESS_DENY,
				.host = e.host,
				.port = e.port,
				.method = e.method[0] ? e.method : NULL,
				.reason = reason,
				.bytes_up = e.bytes_up,
				.bytes_down = e.bytes_down,
			};
			rep->report(rep->userdata, key, &r);
		}
		pos = (size_t)(nl - buf) + 1;
	}
	free(buf);
}
