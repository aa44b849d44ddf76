/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fingerprint's lists under a budget (ns_snapshot.h): the ns host walk,
 * the oci backend's and the vm guest's answers all hold what they read of a
 * guest in these, and refuse past the budget before holding more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ns_snapshot.h"
#include "util/util.h"

int msb_ns__strs_add(msb_ns_strs *s, char *str)
{
	if (!str)
		return -ENOMEM;
	size_t len = strlen(str);
	int r = s->n >= s->max			 ? -E2BIG
		: len > s->max_len		 ? -ENAMETOOLONG
		: len >= s->max_bytes - s->bytes ? -EFBIG
						 : 0;
	if (r == 0 && s->n + 1 >= s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		char **v = msb__reallocarray(s->v, cap, sizeof(*v));
		if (v) {
			s->v = v;
			s->cap = cap;
		} else {
			r = -ENOMEM;
		}
	}
	if (r < 0) {
		free(str);
		return r;
	}
	s->bytes += len + 1;
	s->v[s->n++] = str;
	s->v[s->n] = NULL;
	return 0;
}

int msb_ns__strs_refusal(msb_error **err, int r, const msb_ns_strs *s, const char *who,
			 const char *things)
{
	if (r == -E2BIG)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s fingerprint: cannot attest: more than %zu %s", who, s->max,
				     things);
	if (r == -ENAMETOOLONG)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s fingerprint: cannot attest: one of the %s is longer than "
				     "%zu bytes",
				     who, things, s->max_len);
	if (r == -EFBIG)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "%s fingerprint: cannot attest: more than %zu bytes of %s",
				     who, s->max_bytes, things);
	return msb__error_nomem(err);
}

void msb_ns__strs_clear(msb_ns_strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, duplicates dropped; an msb_strv (empty, never NULL) or NULL when
 * out of memory (s then unchanged). */
static char **finish(msb_ns_strs *s)
{
	if (!s->v && !(s->v = calloc(1, sizeof(char *))))
		return NULL;
	qsort(s->v, s->n, sizeof(char *), cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (k > 0 && strcmp(s->v[k - 1], s->v[i]) == 0) {
			free(s->v[i]);
			continue;
		}
		s->v[k++] = s->v[i];
	}
	s->v[k] = NULL;
	char **v = s->v;
	memset(s, 0, sizeof(*s));
	return v;
}

int msb_ns__strs_fingerprint(msb_ns_strs *paths, msb_ns_strs *procs, msb_fingerprint *out,
			     msb_error **err)
{
	char **cp = finish(paths);
	char **rp = cp ? finish(procs) : NULL;
	if (!cp || !rp) {
		msb_strv_free(cp);
		msb_ns__strs_clear(paths);
		msb_ns__strs_clear(procs);
		return msb__error_nomem(err);
	}
	out->changed_paths = cp;
	out->running_programs = rp;
	return 0;
}
