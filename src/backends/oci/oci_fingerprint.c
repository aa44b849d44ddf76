/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fingerprint of an `oci` sandbox under gVisor (docs/oci.md, "Files,
 * reset, fingerprint"). gVisor's gofer writes the guest's regular files,
 * directories and links through to the host - the shim's writable layer,
 * /dev/shm and the storage base, which the host walks as on ns - but keeps
 * the rest in the sentry: the guest's processes, its mounts, and a bound
 * socket or a fifo. Those come from the agent: its process table (the
 * protocol's PS) and the file-plane request `specials` (agent/specials.c),
 * which runs with a workload's rights and fails on what it cannot read.
 * Both are the guest's answers; every byte counts against the ns budget.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/ns/ns_snapshot.h"
#include "backends/oci/oci_int.h"
#include "client/client.h"

#define SPECIALS_TIMEOUT 60.0
#define PS_TIMEOUT 30.0

/* The guest's sockets, fifos and device nodes below its writable places. */
static int specials(msb_client *c, const char *guest_base, msb_ns_strs *paths, msb_error **err)
{
	const char *argv[] = {"specials", "/", guest_base, "/dev/shm", "/tmp", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = SPECIALS_TIMEOUT;
	req.max_output_bytes = MSB_NS_FINGERPRINT_MAX_PATH_BYTES;
	msb_exec_result res;
	memset(&res, 0, sizeof(res));
	int r = msb_client__exec_file(c, &req, &res, err);
	if (r < 0)
		return msb_error_wrap(err, "oci fingerprint: cannot attest");
	if (res.exit_code != 0 || res.truncated) {
		size_t n = res.stderr_len;
		while (n > 0 && res.stderr_bytes[n - 1] == '\n')
			n--;
		r = msb_error_set(err, MSB_E_RUNTIME, "oci fingerprint: cannot attest: %.*s",
				  (int)(n > 400 ? 400 : n),
				  res.truncated ? "the guest's answer is over the budget"
						: (const char *)res.stderr_bytes);
		msb_exec_result_clear(&res);
		return r;
	}
	const char *p = (const char *)res.stdout_bytes, *end = p + res.stdout_len;
	while (r == 0 && p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t len = nul ? (size_t)(nul - p) : (size_t)(end - p);
		if (len == 0 || p[0] != '/' || len >= MSB_NS_FINGERPRINT_MAX_PATH_LEN) {
			r = msb_error_set(err, MSB_E_PROTOCOL,
					  "oci fingerprint: the guest named a special file badly");
			break;
		}
		r = msb_ns__strs_add(paths, strndup(p, len));
		if (r < 0)
			r = msb_ns__strs_refusal(err, r, paths, "oci", "changed paths");
		p += len + 1;
	}
	msb_exec_result_clear(&res);
	return r;
}

/* "PID:STARTTIME:ARGV" of every guest process but the agent (PID 1). */
static int processes(msb_client *c, msb_ns_strs *procs, msb_error **err)
{
	msb_client_proc *ps = NULL;
	size_t n = 0;
	int r = msb_client__ps(c, PS_TIMEOUT, &ps, &n, err);
	if (r < 0)
		return msb_error_wrap(err, "oci fingerprint: cannot attest");
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (ps[i].pid == 1)
			continue;
		char *argv = NULL;
		size_t len = 0;
		for (size_t k = 0; ps[i].argv && ps[i].argv[k]; k++)
			len += strlen(ps[i].argv[k]) + 1;
		if (len > 0 && !(argv = malloc(len))) {
			r = msb__error_nomem(err);
			break;
		}
		for (size_t k = 0, at = 0; len > 0 && ps[i].argv[k]; k++) {
			size_t l = strlen(ps[i].argv[k]);
			memcpy(argv + at, ps[i].argv[k], l);
			at += l;
			argv[at++] = ps[i].argv[k + 1] ? ' ' : '\0';
		}
		char *id = argv ? msb__asprintf("%u:%llu:%s", ps[i].pid,
						(unsigned long long)ps[i].start_ticks, argv)
				: msb__asprintf("%u:%llu:[%s]", ps[i].pid,
						(unsigned long long)ps[i].start_ticks, ps[i].comm);
		free(argv);
		r = msb_ns__strs_add(procs, id);
		if (r < 0)
			r = msb_ns__strs_refusal(err, r, procs, "oci", "processes");
	}
	msb_client__procs_free(ps, n);
	return r;
}

int msb_oci__gvisor_fingerprint(msb_client *c, int dfd, const char *dir, const char *guest_base,
				msb_fingerprint *out, msb_error **err)
{
	msb_ns_strs paths = {.max = MSB_NS_FINGERPRINT_MAX_PATHS,
			     .max_bytes = MSB_NS_FINGERPRINT_MAX_PATH_BYTES,
			     .max_len = MSB_NS_FINGERPRINT_MAX_PATH_LEN};
	msb_ns_strs procs = {.max = MSB_NS_FINGERPRINT_MAX_PROCS,
			     .max_bytes = MSB_NS_FINGERPRINT_MAX_PROC_BYTES,
			     .max_len = SIZE_MAX};
	msb_fingerprint host = {0};
	int r = specials(c, guest_base, &paths, err);
	if (r == 0)
		r = processes(c, &procs, err);
	if (r == 0)
		r = msb_ns__snapshot_fingerprint_paths(dfd, dir, guest_base, &host, err);
	/* The host's paths move into the list (add takes each, or frees it). */
	char **hp = host.changed_paths;
	host.changed_paths = NULL;
	for (size_t i = 0; hp && hp[i]; i++) {
		if (r < 0) {
			free(hp[i]);
			continue;
		}
		r = msb_ns__strs_add(&paths, hp[i]);
		if (r < 0)
			r = msb_ns__strs_refusal(err, r, &paths, "oci", "changed paths");
	}
	free(hp);
	msb_fingerprint_clear(&host);
	if (r < 0) {
		msb_ns__strs_clear(&paths);
		msb_ns__strs_clear(&procs);
		return r;
	}
	return msb_ns__strs_fingerprint(&paths, &procs, out, err);
}
