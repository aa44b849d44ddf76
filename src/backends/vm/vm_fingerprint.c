/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fingerprint of a `vm` sandbox (docs/vm.md, docs/internals/vm.md "The
 * fingerprint"). The host cannot see the guest's files or processes, so the
 * guest's agent walks them (the file request `layer`, agent/layer.c): the
 * writable layer's entries but those its init made at boot, /dev/shm, the
 * processes of the workloads' namespace. The answer is the guest's, read
 * here as untrusted: one exec budget over all of it, then every record
 * counted against the `ns` fingerprint's budgets (ns_snapshot.h) before it
 * is held, and anything malformed is a protocol error.
 */
#include <stdio.h>

#include "backends/ns/ns_snapshot.h"
#include "vm_files.h"

#define LAYER_TIMEOUT 120.0

int msb_vm__fingerprint_parse(const uint8_t *bytes, size_t len,
			      const struct msb_ns_fingerprint_budget *budget, msb_fingerprint *out,
			      msb_error **err)
{
	static const msb_ns_fingerprint_budget defaults = MSB_NS_FINGERPRINT_BUDGET_INIT;
	const msb_ns_fingerprint_budget *b = budget ? budget : &defaults;
	msb_ns_strs paths = {
		.max = b->max_paths, .max_bytes = b->max_path_bytes, .max_len = b->max_path_len};
	msb_ns_strs procs = {
		.max = b->max_procs, .max_bytes = b->max_proc_bytes, .max_len = SIZE_MAX};
	const char *p = (const char *)bytes, *end = p + len;
	int r = 0;
	while (r == 0 && p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t n = nul ? (size_t)(nul - p) : 0;
		char tag = *p;
		bool ok = nul && n >= 2 && (tag == 'p' || tag == 'r') &&
			  (tag == 'r' || (p[1] == '/' && n - 1 <= b->max_path_len));
		if (!ok) {
			r = msb_error_set(err, MSB_E_PROTOCOL,
					  "vm fingerprint: the guest's answer is malformed");
			break;
		}
		msb_ns_strs *l = tag == 'p' ? &paths : &procs;
		int a = msb_ns__strs_add(l, strndup(p + 1, n - 1));
		if (a < 0)
			r = msb_ns__strs_refusal(err, a, l, "vm",
						 tag == 'p' ? "changed paths" : "processes");
		p = nul + 1;
	}
	if (r < 0) {
		msb_ns__strs_clear(&paths);
		msb_ns__strs_clear(&procs);
		return r;
	}
	return msb_ns__strs_fingerprint(&paths, &procs, out, err);
}

int msb_vm__fingerprint(const vm_files *f, msb_fingerprint *out, msb_error **err)
{
	static const msb_ns_fingerprint_budget b = MSB_NS_FINGERPRINT_BUDGET_INIT;
	/* Every record's tag and NUL on top of the bytes the budgets count. */
	uint64_t budget = (uint64_t)b.max_path_bytes + b.max_proc_bytes + 2 * b.max_paths +
			  2 * (uint64_t)b.max_procs;
	const char *argv[] = {"layer", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = LAYER_TIMEOUT;
	req.max_output_bytes = budget;
	msb_exec_result res;
	memset(&res, 0, sizeof(res));
	int r = f->run(f->ud, &req, &res, err);
	if (r < 0)
		return msb_error_wrap(err, "vm fingerprint: cannot attest");
	if (res.truncated) {
		r = msb_error_set(err, MSB_E_RUNTIME,
				  "vm fingerprint: cannot attest: the guest's answer is over %llu "
				  "bytes",
				  (unsigned long long)budget);
	} else if (res.exit_code != 0) {
		/* The agent's one line, shown as data. */
		char why[301];
		size_t n = 0;
		for (size_t i = 0; i < res.stderr_len && n < sizeof(why) - 1; i++) {
			unsigned char c = res.stderr_bytes[i];
			if (c == '\n')
				break;
			why[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		}
		why[n] = '\0';
		r = msb_error_set(err, MSB_E_RUNTIME, "vm fingerprint: %s (status %d)",
				  n ? why : "the guest's walk failed", res.exit_code);
	} else {
		r = msb_vm__fingerprint_parse(res.stdout_bytes, res.stdout_len, NULL, out, err);
	}
	msb_exec_result_clear(&res);
	return r;
}
