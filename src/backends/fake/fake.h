/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the in-process fake: what fake_backend.c needs from
 * fake_sandbox.c, and the store (fake_store.c) under the fake sandbox. */
#ifndef MSB_BACKENDS_FAKE_FAKE_H
#define MSB_BACKENDS_FAKE_FAKE_H

#include <sys/types.h>

#include <msb/testing.h>

/* ---- the store (fake_store.c) ----------------------------------------------- */

struct node {
	char *path;
	msb_entry_kind kind;
	uint8_t *data; /* regular files only */
	size_t len;
};

struct store {
	struct node *v; /* sorted by strcmp(path) */
	size_t n;
	size_t cap;
};

/* Index of `path`, or -1 with *pos (may be NULL) the insertion point. */
ssize_t msb_fake__store_find(const struct store *s, const char *path, size_t *pos);
const struct node *msb_fake__store_get(const struct store *s, const char *path);
/* Insert or replace; copies path and data. 0 or -ENOMEM. */
int msb_fake__store_put(struct store *s, const char *path, msb_entry_kind kind, const uint8_t *data,
			size_t len);
void msb_fake__store_del_at(struct store *s, size_t i);
/* Remove `path`, and everything below it when it is a directory. */
void msb_fake__store_del_tree(struct store *s, const char *path);
void msb_fake__store_free(struct store *s);
/* A deep copy into *to (0), or -ENOMEM with *to empty. */
int msb_fake__store_copy(const struct store *from, struct store *to);
/* The unconfined, no-follow stat the path helpers walk with (9.31);
 * `userdata` is the store. */
int msb_fake__store_lstat(void *userdata, const char *abs_path, bool *present, msb_entry_kind *kind,
			  msb_error **err);
/* Create every missing ancestor of `path` (root excluded, path included when
 * `self`) as a directory, stopping under a stored non-directory. */
int msb_fake__store_make_dirs(struct store *s, const char *path, bool self);
/* `path` is strictly below `dir`; an immediate child of it. */
bool msb_fake__path_below(const char *path, const char *dir);
bool msb_fake__path_child(const char *path, const char *dir);

/* ---- the fake sandbox (fake_sandbox.c) -------------------------------------- */

/* A handle onto `fs` that reports `backend_name` (copied) as its backend and
 * names it in its refusals. Takes a new reference on fs. */
int msb_fake__sandbox_handle(msb_fake_sandbox *fs, const char *backend_name, msb_sandbox **out,
			     msb_error **err);

/* 10.1-10.3: make sure the storage base exists as a directory; a link or a
 * non-directory at it or above it is refused. */
int msb_fake__ensure_base(msb_fake_sandbox *fs, msb_error **err);

/* The emulated POSIX guest (msb_fake_sandbox_options.posix_guest). Each
 * helper takes the fake's lock itself; links are never followed. */
/* 1 and the entry (*data malloc()ed for files, may be NULL) when present,
 * 0 when absent, -ENOMEM. */
int msb_fake__guest_get(msb_fake_sandbox *fs, const char *abs, msb_entry_kind *kind, uint8_t **data,
			size_t *len);
/* A regular file or a link at abs: 0, -ENOENT (parent missing), -ENOTDIR
 * (parent not a directory), -EISDIR (a directory is there), -ENOMEM. */
int msb_fake__guest_put(msb_fake_sandbox *fs, const char *abs, msb_entry_kind kind,
			const uint8_t *data, size_t len);
/* mkdir -p: 0, -ENOTDIR (a non-directory on the way or at abs), -ENOMEM. */
int msb_fake__guest_mkdirs(msb_fake_sandbox *fs, const char *abs);
/* Run one command of the emulated guest; `wd` is absolute. */
int msb_fake__guest_exec(msb_fake_sandbox *fs, const msb_exec_request *req, const char *wd,
			 uint64_t budget, msb_exec_result *out, msb_error **err);

#endif
