/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process fake's store: its guest's entries in an array sorted by
 * normalised absolute path, with the no-follow stat the path helpers walk
 * with. Not locked: the fake sandbox holds its lock around every call.
 */
#include <string.h>

#include "fake.h"
#include "util/util.h"

/* Index of `path`, or -1 with *pos the insertion point. */
ssize_t msb_fake__store_find(const struct store *s, const char *path, size_t *pos)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->v[mid].path, path);
		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return -1;
}

const struct node *msb_fake__store_get(const struct store *s, const char *path)
{
	ssize_t i = msb_fake__store_find(s, path, NULL);
	return i < 0 ? NULL : &s->v[i];
}

static void node_clear(struct node *n)
{
	free(n->path);
	free(n->data);
	memset(n, 0, sizeof(*n));
}

/* Insert or replace; copies path and data. 0 or -ENOMEM. */
int msb_fake__store_put(struct store *s, const char *path, msb_entry_kind kind, const uint8_t *data,
			size_t len)
{
	_cleanup_free_ uint8_t *copy = NULL;
	if (kind == MSB_ENTRY_FILE) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return -ENOMEM;
		if (len)
			memcpy(copy, data, len);
	} else {
		len = 0;
	}

	size_t pos = 0;
	ssize_t i = msb_fake__store_find(s, path, &pos);
	if (i >= 0) {
		struct node *n = &s->v[i];
		free(n->data);
		n->kind = kind;
		n->data = TAKE_PTR(copy);
		n->len = len;
		return 0;
	}
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct node *v = msb__reallocarray(s->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	memmove(&s->v[pos + 1], &s->v[pos], (s->n - pos) * sizeof(*s->v));
	s->v[pos] = (struct node){TAKE_PTR(p), kind, TAKE_PTR(copy), len};
	s->n++;
	return 0;
}

void msb_fake__store_del_at(struct store *s, size_t i)
{
	node_clear(&s->v[i]);
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
	s->n--;
}

bool msb_fake__path_below(const char *path, const char *dir)
{
	size_t dl = strlen(dir);
	if (dl == 1 && dir[0] == '/')
		return path[0] == '/' && path[1] != '\0';
	return strncmp(path, dir, dl) == 0 && path[dl] == '/';
}

/* An immediate child of `dir`. */
bool msb_fake__path_child(const char *path, const char *dir)
{
	if (!msb_fake__path_below(path, dir))
		return false;
	const char *rest = path + (strcmp(dir, "/") == 0 ? 1 : strlen(dir) + 1);
	return strchr(rest, '/') == NULL;
}

/* Remove `path`, and everything below it when it is a directory. */
void msb_fake__store_del_tree(struct store *s, const char *path)
{
	ssize_t at = msb_fake__store_find(s, path, NULL);
	bool dir = at >= 0 && s->v[at].kind == MSB_ENTRY_DIRECTORY;
	for (size_t i = s->n; i-- > 0;) {
		if (strcmp(s->v[i].path, path) == 0 ||
		    (dir && msb_fake__path_below(s->v[i].path, path)))
			msb_fake__store_del_at(s, i);
	}
}

void msb_fake__store_free(struct store *s)
{
	for (size_t i = 0; i < s->n; i++)
		node_clear(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int msb_fake__store_copy(const struct store *from, struct store *to)
{
	memset(to, 0, sizeof(*to));
	for (size_t i = 0; i < from->n; i++) {
		const struct node *n = &from->v[i];
		if (msb_fake__store_put(to, n->path, n->kind, n->data, n->len) < 0) {
			msb_fake__store_free(to);
			return -ENOMEM;
		}
	}
	return 0;
}

/* The unconfined, no-follow stat the path helpers walk with (9.31). */
int msb_fake__store_lstat(void *userdata, const char *abs_path, bool *present, msb_entry_kind *kind,
			  msb_error **err)
{
	const struct store *s = userdata;
	if (strcmp(abs_path, "/") == 0) {
		*present = true;
		*kind = MSB_ENTRY_DIRECTORY;
		return 0;
	}
	const struct node *n = msb_fake__store_get(s, abs_path);
	*present = n != NULL;
	if (n)
		*kind = n->kind;
	return 0;
}

/* Create every missing ancestor of `path` (root excluded, path included when
 * `self`) as a directory, stopping under a stored non-directory. */
int msb_fake__store_make_dirs(struct store *s, const char *path, bool self)
{
	size_t n = strlen(path);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		if (i == n && !self)
			break;
		if (i == 1)
			continue; /* "/" */
		_cleanup_free_ char *p = msb__strndup(path, i);
		if (!p)
			return -ENOMEM;
		const struct node *at = msb_fake__store_get(s, p);
		if (at) {
			if (at->kind != MSB_ENTRY_DIRECTORY)
				return 0;
			continue;
		}
		if (msb_fake__store_put(s, p, MSB_ENTRY_DIRECTORY, NULL, 0) < 0)
			return -ENOMEM;
	}
	return 0;
}
