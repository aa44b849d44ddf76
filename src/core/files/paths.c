/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest path helpers (checklist 10.12-10.18).
 *
 * Guest paths use POSIX grammar whatever the host is (10.18): "/" is the only
 * separator and a backslash is refused everywhere, because some guests and
 * some transports treat it as a separator and a lexical check that ignores it
 * would let "a\..\..\x" through. Everything here is lexical except the two
 * walks, which ask the caller's unconfined, no-follow stat (9.31).
 */
#include <msb/paths.h>

#include "util/util.h"

static bool has_backslash(const char *s)
{
	return strchr(s, '\\') != NULL;
}

static int refuse_backslash(const char *what, const char *s, msb_error **err)
{
	return msb_error_set(err, MSB_E_VALUE, "%s `%s` contains a backslash", what, s);
}

/*
 * posixpath.normpath, except that a leading "//" collapses to "/" like every
 * other run of slashes: POSIX leaves "//" implementation-defined and Linux
 * guests treat it as "/", so keeping it would only make one directory look
 * like two.
 */
char *msb_guest_normpath(const char *path)
{
	if (!path)
		return NULL;
	size_t n = strlen(path);
	if (n == 0)
		return strdup(".");

	bool absolute = path[0] == '/';
	/* Component start offsets and lengths; at most n/2 + 1 components. */
	size_t max = n / 2 + 1;
	_cleanup_free_ size_t *start = msb__reallocarray(NULL, max, sizeof(size_t));
	_cleanup_free_ size_t *len = msb__reallocarray(NULL, max, sizeof(size_t));
	if (!start || !len)
		return NULL;

	size_t depth = 0;
	size_t i = 0;
	while (i < n) {
		while (i < n && path[i] == '/')
			i++;
		if (i >= n)
			break;
		size_t s = i;
		while (i < n && path[i] != '/')
			i++;
		size_t l = i - s;
		if (l == 1 && path[s] == '.')
			continue;
		if (l == 2 && path[s] == '.' && path[s + 1] == '.') {
			bool top_is_dotdot = depth > 0 && len[depth - 1] == 2 &&
					     path[start[depth - 1]] == '.' &&
					     path[start[depth - 1] + 1] == '.';
			if (depth > 0 && !top_is_dotdot) {
				depth--;
				continue;
			}
			if (absolute)
				continue; /* "/.." is "/" */
		}
		start[depth] = s;
		len[depth] = l;
		depth++;
	}

	/* The result is never longer than the input (plus "." or "/"). */
	char *out = malloc(n + 2);
	if (!out)
		return NULL;
	size_t o = 0;
	if (absolute)
		out[o++] = '/';
	for (size_t k = 0; k < depth; k++) {
		if (k > 0)
			out[o++] = '/';
		memcpy(out + o, path + start[k], len[k]);
		o += len[k];
	}
	if (o == 0)
		out[o++] = '.';
	out[o] = '\0';
	return out;
}

/* Normalise an absolute, backslash-free guest path; `what` names it in errors. */
static int normalise_absolute(const char *what, const char *p, char **out, msb_error **err)
{
	if (!p)
		return msb_error_set(err, MSB_E_VALUE, "%s is NULL", what);
	if (has_backslash(p))
		return refuse_backslash(what, p, err);
	if (p[0] != '/')
		return msb_error_set(err, MSB_E_VALUE, "%s `%s` is not an absolute guest path",
				     what, p);
	char *n = msb_guest_normpath(p);
	if (!n)
		return msb__error_nomem(err);
	*out = n;
	return 0;
}

/* posixpath.join(wd, path) then normpath: an absolute path replaces wd. */
static char *join_normalised(const char *wd, const char *path)
{
	if (path[0] == '/')
		return msb_guest_normpath(path);
	_cleanup_free_ char *joined = msb__asprintf("%s/%s", wd, path);
	if (!joined)
		return NULL;
	return msb_guest_normpath(joined);
}

/* The remainder of `path` below `base` (both normalised, absolute): "" for
 * equal, NULL when path is not base or beneath it. Borrowed from path. */
static const char *remainder_below(const char *path, const char *base)
{
	size_t bl = strlen(base);
	if (strcmp(path, base) == 0)
		return path + strlen(path);
	if (bl == 1 && base[0] == '/')
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, base, bl) == 0 && path[bl] == '/')
		return path + bl + 1;
	return NULL;
}

int msb_confine_guest_path(const char *path, const char *wd, char **out, msb_error **err)
{
	if (!path)
		return msb_error_set(err, MSB_E_VALUE, "guest path is NULL");
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (has_backslash(path))
		return refuse_backslash("guest path", path, err);
	_cleanup_free_ char *base = NULL;
	int r = normalise_absolute("working directory", wd, &base, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *resolved = join_normalised(base, path);
	if (!resolved)
		return msb__error_nomem(err);
	if (!remainder_below(resolved, base))
		return msb_error_set(err, MSB_E_VALUE,
				     "guest path `%s` resolves outside the working directory `%s`",
				     path, base);
	*out = TAKE_PTR(resolved);
	return 0;
}

int msb_guest_path_relative_to(const char *path, const char *base, char **out, msb_error **err)
{
	if (!path || !base)
		return msb_error_set(err, MSB_E_VALUE, "guest path is NULL");
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (has_backslash(path))
		return refuse_backslash("guest path", path, err);
	if (has_backslash(base))
		return refuse_backslash("base", base, err);
	_cleanup_free_ char *np = msb_guest_normpath(path);
	_cleanup_free_ char *nb = msb_guest_normpath(base);
	if (!np || !nb)
		return msb__error_nomem(err);

	const char *rest = NULL;
	if (strcmp(np, nb) == 0) {
		rest = "";
	} else if (strcmp(nb, ".") == 0) {
		/* Everything relative that does not climb is below ".". */
		if (np[0] != '/' && !(np[0] == '.' && np[1] == '.' && (np[2] == '/' || !np[2])))
			rest = np;
	} else if ((np[0] == '/') == (nb[0] == '/')) {
		rest = remainder_below(np, nb);
	}
	if (!rest) {
		*out = NULL;
		return 0;
	}
	char *r = strdup(rest);
	if (!r)
		return msb__error_nomem(err);
	*out = r;
	return 0;
}

int msb_guest_directory_chain(const char *path, const char *wd, char ***out, msb_error **err)
{
	if (!path)
		return msb_error_set(err, MSB_E_VALUE, "guest path is NULL");
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	if (has_backslash(path))
		return refuse_backslash("guest path", path, err);
	_cleanup_free_ char *base = NULL;
	int r = normalise_absolute("working directory", wd, &base, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *resolved = join_normalised(base, path);
	if (!resolved)
		return msb__error_nomem(err);

	/* Every prefix ending before a "/" (and the whole path), root excluded. */
	_cleanup_strv_ char **chain = calloc(1, sizeof(char *));
	if (!chain)
		return msb__error_nomem(err);
	size_t n = strlen(resolved);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && resolved[i] != '/')
			continue;
		if (i == 1 && n == 1)
			break; /* the root alone */
		char *prefix = msb__strndup(resolved, i);
		if (!prefix || msb__strv_push_take(&chain, prefix) < 0) {
			free(prefix);
			return msb__error_nomem(err);
		}
	}
	*out = TAKE_PTR(chain);
	return 0;
}

static int lstat_kind(msb_guest_lstat_fn lstat, void *userdata, const char *abs_path, bool *present,
		      msb_entry_kind *kind, msb_error **err)
{
	*present = false;
	*kind = MSB_ENTRY_OTHER;
	return lstat(userdata, abs_path, present, kind, err);
}

/* The parent of a normalised absolute path ("/" for a top-level entry). */
static char *parent_of(const char *abs)
{
	const char *slash = strrchr(abs, '/');
	if (!slash || slash == abs)
		return strdup("/");
	return msb__strndup(abs, (size_t)(slash - abs));
}

int msb_refuse_symlinked_parents(msb_guest_lstat_fn lstat, void *userdata, const char *path,
				 const char *wd, bool include_self, msb_error **err)
{
	if (!lstat)
		return msb_error_set(err, MSB_E_VALUE, "the stat callback is NULL");
	if (!path)
		return msb_error_set(err, MSB_E_VALUE, "guest path is NULL");
	if (has_backslash(path))
		return refuse_backslash("guest path", path, err);
	_cleanup_free_ char *base = NULL;
	int r = normalise_absolute("working directory", wd, &base, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *resolved = join_normalised(base, path);
	if (!resolved)
		return msb__error_nomem(err);
	_cleanup_free_ char *last = include_self ? strdup(resolved) : parent_of(resolved);
	if (!last)
		return msb__error_nomem(err);
	if (strcmp(last, "/") == 0)
		return 0;

	_cleanup_strv_ char **chain = NULL;
	r = msb_guest_directory_chain(last, "/", &chain, err);
	if (r < 0)
		return r;
	for (size_t i = 0; chain[i]; i++) {
		bool present;
		msb_entry_kind kind;
		r = lstat_kind(lstat, userdata, chain[i], &present, &kind, err);
		if (r < 0)
			return r;
		if (!present)
			return 0; /* nothing below a missing component exists */
		if (kind == MSB_ENTRY_DIRECTORY)
			continue;
		if (kind == MSB_ENTRY_SYMLINK)
			return msb_error_set(err, MSB_E_VALUE,
					     "`%s` is a link: refusing to follow it to reach `%s`",
					     chain[i], resolved);
		return msb_error_set(err, MSB_E_NOT_DIRECTORY,
				     "`%s` is not a directory (on the way to `%s`)", chain[i],
				     resolved);
	}
	return 0;
}

int msb_confine_guest_write_path(msb_guest_lstat_fn lstat, void *userdata, const char *path,
				 const char *wd, char **out, msb_error **err)
{
	if (!lstat)
		return msb_error_set(err, MSB_E_VALUE, "the stat callback is NULL");
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "output pointer is NULL");
	_cleanup_free_ char *resolved = NULL;
	int r = msb_confine_guest_path(path, wd, &resolved, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *base = msb_guest_normpath(wd);
	if (!base)
		return msb__error_nomem(err);
	if (strcmp(resolved, base) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "guest path `%s` is the working directory `%s` itself", path,
				     base);
	r = msb_refuse_symlinked_parents(lstat, userdata, resolved, base, false, err);
	if (r < 0)
		return r;
	bool present;
	msb_entry_kind kind;
	r = lstat_kind(lstat, userdata, resolved, &present, &kind, err);
	if (r < 0)
		return r;
	if (present && kind == MSB_ENTRY_SYMLINK)
		return msb_error_set(err, MSB_E_VALUE,
				     "destination `%s` is a link: refusing to follow it", resolved);
	*out = TAKE_PTR(resolved);
	return 0;
}
