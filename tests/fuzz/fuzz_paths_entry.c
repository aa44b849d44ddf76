/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz entry: the guest path helpers of msb/paths.h and their internal
 * counterpart in the ns file plane (msb_ns__relative), checked against a
 * model written here from their documented contracts.
 *
 * Input: one flag byte, then up to three NUL-separated strings: a guest
 * path, a working directory and a storage base (missing ones default to
 * "/m/w" and "/m"). The flag byte picks include_self and seeds a stand-in
 * stat callback that answers each absolute path with a kind (or an error)
 * derived from a hash of the path.
 *
 * Properties (abort on failure):
 *  - normpath: idempotent; "" is "."; absolute iff the input is; no empty,
 *    "." or trailing components; ".." only leading, and never in an absolute
 *    result;
 *  - confine: accepted iff there is no backslash, the working directory is
 *    absolute, and the model's join lands on the working directory or
 *    beneath it; then the result is exactly the model's;
 *  - relative_to: for absolute operands, the remainder joined back onto the
 *    base gives the path, and NULL means "not beneath" by the model;
 *  - directory_chain: every directory from the top down to the model's
 *    join, each the previous plus one component;
 *  - refuse_symlinked_parents / confine_write_path: the same outcome as the
 *    model's walk with the same stat answers, errors passed through;
 *  - msb_ns__relative: the base joined with the result is the confined
 *    path, and the result is relative and normalised.
 */
#include <stdlib.h>
#include <string.h>

#include <msb/msb.h>
#include <msb/paths.h>

#include "backends/ns/ns_files.h"

#include "fuzz_target.h"

#define LSTAT_ERROR (-4242)

/* ---- the model ------------------------------------------------------------- */

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);
	if (!s)
		abort();
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

static char *norm(const char *p)
{
	char *n = msb_guest_normpath(p);
	if (!n)
		abort();
	return n;
}

/* posixpath.join(wd, path), normalised. */
static char *model_join(const char *wd, const char *path)
{
	if (path[0] == '/')
		return norm(path);
	char *j = join(wd, path);
	char *n = norm(j);
	free(j);
	return n;
}

/* Is normalised absolute `p` the normalised absolute `base` or beneath it? */
static bool beneath(const char *p, const char *base)
{
	if (strcmp(base, "/") == 0)
		return p[0] == '/';
	size_t bl = strlen(base);
	return strncmp(p, base, bl) == 0 && (p[bl] == 0 || p[bl] == '/');
}

static void check_normalised(const char *in, const char *n)
{
	if (!*in) {
		if (strcmp(n, ".") != 0)
			abort();
		return;
	}
	if ((in[0] == '/') != (n[0] == '/'))
		abort();
	char *again = norm(n);
	if (strcmp(again, n) != 0)
		abort(); /* not idempotent */
	free(again);
	if (strcmp(n, "/") == 0 || strcmp(n, ".") == 0)
		return;
	bool absolute = n[0] == '/';
	bool leading = true; /* still in the run of leading ".." */
	const char *p = n + absolute;
	for (;;) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == 0)
			abort(); /* "//" or a trailing "/" */
		if (l == 1 && p[0] == '.')
			abort();
		bool dotdot = l == 2 && p[0] == '.' && p[1] == '.';
		if (dotdot && (absolute || !leading))
			abort();
		leading = leading && dotdot;
		if (!e)
			break;
		p = e + 1;
	}
}

/* ---- the stand-in stat ------------------------------------------------------- */

static uint32_t hash(const char *s, uint32_t seed)
{
	uint32_t h = 2166136261u ^ seed;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static int fake_lstat(void *userdata, const char *abs_path, bool *present, msb_entry_kind *kind,
		      msb_error **err)
{
	if (abs_path[0] != '/')
		abort(); /* the walks ask about absolute paths only */
	uint32_t h = hash(abs_path, *(const uint8_t *)userdata);
	switch (h % 11) {
	case 0:
		*present = false;
		return 0;
	case 1:
		*present = true;
		*kind = MSB_ENTRY_SYMLINK;
		return 0;
	case 2:
		*present = true;
		*kind = MSB_ENTRY_FILE;
		return 0;
	case 3:
		if ((h >> 8) % 4 == 0)
			return msb_error_set(err, LSTAT_ERROR, "stat of `%s` failed", abs_path);
		break;
	default:
		break;
	}
	*present = true;
	*kind = MSB_ENTRY_DIRECTORY;
	return 0;
}

/* The walk of 10.15 as documented, over the model's chain. */
static int model_walk(uint8_t seed, const char *resolved, bool include_self)
{
	char *last = strdup(resolved);
	if (!last)
		abort();
	if (!include_self) {
		char *slash = strrchr(last, '/');
		if (slash == last)
			last[1] = 0;
		else
			*slash = 0;
	}
	int rc = 0;
	for (char *p = last + 1; strcmp(last, "/") != 0; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = 0;
		bool present = false;
		msb_entry_kind kind = MSB_ENTRY_OTHER;
		msb_error *err = NULL;
		rc = fake_lstat(&seed, last, &present, &kind, &err);
		msb_error_free(err);
		*p = c;
		if (rc < 0 || !present) {
			rc = rc < 0 ? rc : 0;
			break;
		}
		if (kind == MSB_ENTRY_SYMLINK) {
			rc = MSB_E_VALUE;
			break;
		}
		if (kind != MSB_ENTRY_DIRECTORY) {
			rc = MSB_E_NOT_DIRECTORY;
			break;
		}
		if (!c)
			break;
	}
	free(last);
	return rc;
}

static void refused(int rc, msb_error **err)
{
	if (rc >= 0 || !*err || msb_error_code(*err) != rc || !*msb_error_message(*err))
		abort();
	msb_error_free(*err);
	*err = NULL;
}

/* ---- the checks ---------------------------------------------------------------- */

static bool check_confine(const char *path, const char *wd)
{
	msb_error *err = NULL;
	char *out = NULL;
	int rc = msb_confine_guest_path(path, wd, &out, &err);
	bool ok = !strchr(path, '\\') && !strchr(wd, '\\') && wd[0] == '/';
	char *nwd = ok ? norm(wd) : NULL;
	char *want = ok ? model_join(nwd, path) : NULL;
	ok = ok && beneath(want, nwd);
	if (!ok) {
		if (out)
			abort();
		refused(rc, &err);
	} else if (rc != 0 || !out || strcmp(out, want) != 0) {
		abort();
	}
	free(out);
	free(nwd);
	free(want);
	return ok;
}

static void check_relative_to(const char *path, const char *base)
{
	msb_error *err = NULL;
	char *out = NULL;
	int rc = msb_guest_path_relative_to(path, base, &out, &err);
	if (strchr(path, '\\') || strchr(base, '\\')) {
		refused(rc, &err);
		return;
	}
	if (rc != 0)
		abort();
	if (path[0] == '/' && base[0] == '/') {
		char *np = norm(path), *nb = norm(base);
		if (!out) {
			if (beneath(np, nb))
				abort();
		} else {
			char *back = *out ? model_join(nb, out) : strdup(nb);
			if (!back || strcmp(back, np) != 0 || (*out && out[0] == '/'))
				abort();
			free(back);
		}
		free(np);
		free(nb);
	}
	free(out);
}

static void check_chain(const char *path, const char *wd)
{
	msb_error *err = NULL;
	char **chain = NULL;
	int rc = msb_guest_directory_chain(path, wd, &chain, &err);
	if (strchr(path, '\\') || strchr(wd, '\\') || wd[0] != '/') {
		if (chain)
			abort();
		refused(rc, &err);
		return;
	}
	if (rc != 0 || !chain)
		abort();
	char *nwd = norm(wd);
	char *want = model_join(nwd, path);
	size_t n = 0;
	for (; chain[n]; n++) {
		const char *c = chain[n];
		if (c[0] != '/' || strcmp(c, "/") == 0)
			abort();
		const char *prev = n ? chain[n - 1] : "";
		size_t pl = strlen(prev);
		/* the previous one plus "/" and one component */
		if (strncmp(c, prev, pl) != 0 || c[pl] != '/' || !c[pl + 1] ||
		    strchr(c + pl + 1, '/'))
			abort();
	}
	if (strcmp(want, "/") == 0 ? n != 0 : (n == 0 || strcmp(chain[n - 1], want) != 0))
		abort();
	msb_strv_free(chain);
	free(nwd);
	free(want);
}

static void check_walks(uint8_t seed, const char *path, const char *wd, bool include_self,
			bool confined)
{
	msb_error *err = NULL;
	int rc = msb_refuse_symlinked_parents(fake_lstat, &seed, path, wd, include_self, &err);
	bool valid = !strchr(path, '\\') && !strchr(wd, '\\') && wd[0] == '/';
	char *nwd = valid ? norm(wd) : NULL;
	char *resolved = valid ? model_join(nwd, path) : NULL;
	if (!valid) {
		refused(rc, &err);
	} else {
		int want = model_walk(seed, resolved, include_self);
		if (rc != want)
			abort();
		if (rc < 0)
			refused(rc, &err);
	}

	char *out = NULL;
	rc = msb_confine_guest_write_path(fake_lstat, &seed, path, wd, &out, &err);
	if (!confined || strcmp(resolved, nwd) == 0) {
		if (out)
			abort();
		refused(rc, &err);
	} else {
		int want = model_walk(seed, resolved, false);
		if (want == 0) {
			bool present = false;
			msb_entry_kind kind = MSB_ENTRY_OTHER;
			msb_error *e2 = NULL;
			want = fake_lstat(&seed, resolved, &present, &kind, &e2);
			msb_error_free(e2);
			if (want == 0 && present && kind == MSB_ENTRY_SYMLINK)
				want = MSB_E_VALUE;
		}
		if (rc != want)
			abort();
		if (rc < 0)
			refused(rc, &err);
		else if (!out || strcmp(out, resolved) != 0)
			abort();
	}
	free(out);
	free(nwd);
	free(resolved);
}

static void check_ns_relative(const char *path, const char *wd, const char *base)
{
	if (base[0] != '/' || strchr(base, '\\'))
		return; /* the backend's guest base is an absolute path it chose */
	char *nbase = norm(base);
	ns_files f = {.host_base = "/nonexistent/msb-fuzz", .guest_base = nbase};
	msb_error *err = NULL;
	char *rel = NULL, *wd_rel = NULL;
	int rc = msb_ns__relative(&f, path, wd, &rel, &wd_rel, &err);
	/* the model: the working directory confined to the base, then the path
	 * confined to the working directory */
	const char *w = *wd ? wd : ".";
	char *wd_abs = NULL, *abs = NULL;
	msb_error *e2 = NULL;
	bool ok = msb_confine_guest_path(w, nbase, &wd_abs, &e2) == 0 &&
		  msb_confine_guest_path(path, wd_abs, &abs, &e2) == 0;
	msb_error_free(e2);
	if (!ok) {
		if (rel || wd_rel)
			abort();
		refused(rc, &err);
	} else {
		if (rc != 0 || !rel || !wd_rel || rel[0] == '/' || wd_rel[0] == '/')
			abort();
		char *back = *rel ? model_join(nbase, rel) : strdup(nbase);
		char *wback = *wd_rel ? model_join(nbase, wd_rel) : strdup(nbase);
		if (!back || !wback || strcmp(back, abs) != 0 || strcmp(wback, wd_abs) != 0)
			abort();
		if (*rel) {
			char *n = norm(rel);
			if (strcmp(n, rel) != 0)
				abort();
			free(n);
		}
		free(back);
		free(wback);
	}
	free(rel);
	free(wd_rel);
	free(wd_abs);
	free(abs);
	free(nbase);
}

int msb_fuzz_target_one(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t flags = data[0];
	/* a private NUL-terminated copy, split at NULs */
	char *buf = malloc(size + 1);
	if (!buf)
		abort();
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;
	char *parts[3] = {buf, NULL, NULL};
	const char *end = buf + size - 1;
	for (int i = 1; i < 3; i++) {
		char *z = parts[i - 1] + strlen(parts[i - 1]);
		if (z >= end)
			break;
		parts[i] = z + 1;
	}
	const char *path = parts[0];
	const char *wd = parts[1] ? parts[1] : "/m/w";
	const char *base = parts[2] ? parts[2] : "/m";

	for (int i = 0; i < 3; i++) {
		if (!parts[i])
			continue;
		char *n = norm(parts[i]);
		check_normalised(parts[i], n);
		free(n);
	}
	bool confined = check_confine(path, wd);
	check_relative_to(path, wd);
	check_relative_to(path, base);
	check_chain(path, wd);
	check_walks(flags, path, wd, flags & 1, confined);
	check_ns_relative(path, wd, base);
	free(buf);
	return confined;
}
