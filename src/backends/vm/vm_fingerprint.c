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

struct list {
	char **v;
	size_t n, cap, bytes, max, max_bytes;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_clear(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* -E2BIG past the budget (nothing more is held), -ENOMEM. */
static int add(struct list *l, const char *p, size_t len)
{
	if (l->n >= l->max || len + 1 > l->max_bytes - l->bytes)
		return -E2BIG;
	if (l->n + 1 >= l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		char **nv = msb__reallocarray(l->v, ncap, sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	char *s = strndup(p, len);
	if (!s)
		return -ENOMEM;
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
	l->bytes += len + 1;
	return 0;
}

/* Sorted, duplicates dropped; an msb_strv (empty, never NULL). */
static char **finish(struct list *l)
{
	if (!l->v && !(l->v = calloc(1, sizeof(char *))))
		return NULL;
	qsort(l->v, l->n, sizeof(char *), cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (k > 0 && strcmp(l->v[k - 1], l->v[i]) == 0) {
			free(l->v[i]);
			continue;
		}
		l->v[k++] = l->v[i];
	}
	l->v[k] = NULL;
	char **v = l->v;
	memset(l, 0, sizeof(*l));
	return v;
}

int msb_vm__fingerprint_parse(const uint8_t *bytes, size_t len,
			      const struct msb_ns_fingerprint_budget *budget, msb_fingerprint *out,
			      msb_error **err)
{
	static const msb_ns_fingerprint_budget defaults = MSB_NS_FINGERPRINT_BUDGET_INIT;
	const msb_ns_fingerprint_budget *b = budget ? budget : &defaults;
	struct list paths = {.max = b->max_paths, .max_bytes = b->max_path_bytes};
	struct list procs = {.max = b->max_procs, .max_bytes = b->max_proc_bytes};
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
		struct list *l = tag == 'p' ? &paths : &procs;
		int a = add(l, p + 1, n - 1);
		if (a == -ENOMEM)
			r = msb__error_nomem(err);
		else if (a < 0)
			r = msb_error_set(err, MSB_E_RUNTIME,
					  "vm fingerprint: cannot attest: more %s than the budget "
					  "allows (%zu entries, %zu bytes)",
					  tag == 'p' ? "changed paths" : "processes", l->max,
					  l->max_bytes);
		p = nul + 1;
	}
	if (r < 0) {
		list_clear(&paths);
		list_clear(&procs);
		return r;
	}
	char **cp = finish(&paths);
	char **rp = finish(&procs);
	if (!cp || !rp) {
		msb_strv_free(cp);
		msb_strv_free(rp);
		list_clear(&paths);
		list_clear(&procs);
		return msb__error_nomem(err);
	}
	out->changed_paths = cp;
	out->running_programs = rp;
	return 0;
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
