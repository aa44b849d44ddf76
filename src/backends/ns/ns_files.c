/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` file plane on the host (DESIGN §5, checklist §9). Every call opens
 * the storage base, then walks the target's directories one component at a
 * time with openat2(RESOLVE_STRICT) from the fd it already holds: a link
 * anywhere is refused by the kernel (ELOOP), never followed, and a directory
 * the guest swaps for a link after we opened it cannot move the walk out of
 * the base (the fd we hold is the directory, whatever its name now points
 * at). The leaf is then opened, stat'ed, created or unlinked relative to its
 * parent's fd without following it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <msb/paths.h>

#include "ns_files.h"
#include "util/fault.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* What walk() returns, without setting an error, when a component is missing
 * and it was not asked to create it: callers decide what absence means. */
#define NS_MISSING (-ENOENT)

/* The host's budget for one list_dir (docs/security.md, "Budgets on guest
 * bytes"): at most NS_LIST_MAX entries and NS_LIST_MAX_BYTES of their paths
 * (as returned, relative to the working directory, NULs included); past
 * either the listing is refused (MSB_E_OS) before the next entry is held. */
#define NS_LIST_MAX 65536
#define NS_LIST_MAX_BYTES ((size_t)16 << 20)

int msb_ns__relative(const ns_files *f, const char *path, const char *working_directory, char **rel,
		     char **wd_rel, msb_error **err)
{
	const char *wd = working_directory && *working_directory ? working_directory : ".";
	/* The working directory, as a guest path beneath the base. */
	_cleanup_free_ char *wd_abs = NULL;
	int r = msb_confine_guest_path(wd, f->guest_base, &wd_abs, err);
	if (r < 0)
		return msb_error_wrap(err, "working directory `%s`", wd);
	_cleanup_free_ char *abs = NULL;
	r = msb_confine_guest_path(path, wd_abs, &abs, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *from_base = NULL;
	r = msb_guest_path_relative_to(abs, f->guest_base, &from_base, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *wd_from_base = NULL;
	r = msb_guest_path_relative_to(wd_abs, f->guest_base, &wd_from_base, err);
	if (r < 0)
		return r;
	if (!from_base || !wd_from_base)
		return msb_error_set(err, MSB_E_VALUE, "`%s` escapes the working directory", path);
	*rel = TAKE_PTR(from_base);
	if (wd_rel)
		*wd_rel = TAKE_PTR(wd_from_base);
	return 0;
}

/* ---- resolution ------------------------------------------------------------ */

/* One call's target: the storage base held open, and the path split. */
typedef struct ns_target {
	const ns_files *f;
	const char *shown; /* the path as the caller gave it, for messages */
	int basefd;	   /* O_PATH */
	uid_t uid;	   /* the base's owner: the guest's root */
	gid_t gid;
	char *rel;	  /* the target relative to the base; "" = the base */
	char *wd_rel;	  /* the working directory relative to the base */
	char *dir;	  /* the target's parent relative to the base */
	const char *leaf; /* the target's last component (inside rel); "" = the base */
} ns_target;

static void target_clear(ns_target *t)
{
	if (t->basefd >= 0)
		close(t->basefd);
	free(t->rel);
	free(t->wd_rel);
	free(t->dir);
	t->basefd = -1;
	t->rel = t->wd_rel = t->dir = NULL;
}

static int target_open(const ns_files *f, const char *path, const char *working_directory,
		       ns_target *t, msb_error **err)
{
	*t = (ns_target){.f = f, .shown = path, .basefd = -1};
	int r = msb_ns__relative(f, path, working_directory, &t->rel, &t->wd_rel, err);
	if (r < 0)
		return r;
	t->dir = msb__strdup(t->rel);
	if (!t->dir)
		return msb__error_nomem(err);
	char *slash = strrchr(t->dir, '/');
	if (slash) {
		*slash = '\0';
		t->leaf = t->rel + (slash - t->dir) + 1;
	} else {
		t->dir[0] = '\0';
		t->leaf = t->rel;
	}
	/* guest-names: ok - the storage base itself is in the host-private state dir; the walk
	 * beneath it is fd-relative */
	t->basefd = f->has_base_fd
			    ? fcntl(f->base_fd, F_DUPFD_CLOEXEC, 3)
			    : open(f->host_base, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->basefd < 0)
		return msb__error_errno(err, errno, "the storage base is gone");
	struct stat st;
	if (fstat(t->basefd, &st) < 0)
		return msb__error_errno(err, errno, "the storage base is gone");
	t->uid = st.st_uid;
	t->gid = st.st_gid;
	return 0;
}

/* `rel` (base-relative, at or beneath the working directory) relative to the
 * working directory; "." for the working directory itself. */
static char *wd_relative(const ns_target *t, const char *rel)
{
	size_t n = strlen(t->wd_rel);
	if (n == 0)
		return msb__strdup(*rel ? rel : ".");
	return msb__strdup(rel[n] ? rel + n + 1 : ".");
}

static int openat2_retry(int dirfd, const char *name, const struct open_how *how)
{
	int fd;
	/* EAGAIN: a concurrent rename made the kernel unsure; try again. */
	for (int i = 0; i < 16; i++)
		if ((fd = msb__sys_openat2(dirfd, name, how)) != -EAGAIN)
			break;
	return fd;
}

/* Open one component beneath dirfd as a directory (O_PATH). A trailing link
 * fails with ELOOP: O_NOFOLLOW is left out on purpose, since O_PATH with it
 * would hand back the link itself. */
static int open_dir(int dirfd, const char *name)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_STRICT,
	};
	return openat2_retry(dirfd, name, &how);
}

/* Open one component beneath dirfd, never following a link (ELOOP). */
static int open_leaf(int dirfd, const char *name, uint64_t flags, uint64_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
		.mode = mode,
		.resolve = RESOLVE_STRICT,
	};
	return openat2_retry(dirfd, name, &how);
}

static int walk_error(const ns_target *t, int e, const char *dir_rel, size_t upto, msb_error **err)
{
	const char *g = t->f->guest_base;
	int n = (int)upto;
	bool self = dir_rel[upto] == '\0' && strcmp(dir_rel, t->rel) == 0;
	switch (e) {
	case -ELOOP:
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s/%.*s` is a link: refusing to follow it to reach `%s`", g,
				     n, dir_rel, t->shown);
	case -ENOTDIR:
		if (self)
			return msb_error_set(err, MSB_E_NOT_DIRECTORY, "`%s` is not a directory",
					     t->shown);
		return msb_error_set(err, MSB_E_NOT_DIRECTORY,
				     "`%s/%.*s` is not a directory (on the way to `%s`)", g, n,
				     dir_rel, t->shown);
	case -EXDEV:
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s/%.*s` leaves the working directory (on the way to `%s`)",
				     g, n, dir_rel, t->shown);
	default:
		return msb__error_errno(err, e, "cannot open `%s/%.*s` (on the way to `%s`)", g, n,
					dir_rel, t->shown);
	}
}

/*
 * Open the directory `dir_rel` (relative to the base) by walking it from the
 * base one component at a time. Returns an O_PATH fd, an MSB_E_* code with
 * *err set, or NS_MISSING (no error set) when a component is absent and
 * `create` is false. With `create`, missing directories are made, owned by
 * the guest's root; everything the call creates is a real directory (9.18).
 */
static int walk(const ns_target *t, const char *dir_rel, bool create, msb_error **err)
{
	int cur = fcntl(t->basefd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return msb__error_errno(err, errno, "cannot open the storage base");
	const char *p = dir_rel;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		size_t upto = (size_t)(end - dir_rel);
		char comp[NAME_MAX + 1];
		if (n > NAME_MAX) {
			close(cur);
			return walk_error(t, -ENAMETOOLONG, dir_rel, upto, err);
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		int next = open_dir(cur, comp);
		/* The guest may remove what we just made: try a few times. */
		for (int tries = 0; next == -ENOENT && create && tries < 8; tries++) {
			bool made = mkdirat(cur, comp, 0755) == 0;
			if (!made && errno != EEXIST) {
				int e = -errno;
				close(cur);
				return msb__error_errno(err, e, "cannot create `%s/%.*s`",
							t->f->guest_base, (int)upto, dir_rel);
			}
			next = open_dir(cur, comp);
			if (made && next >= 0 &&
			    fchownat(next, "", t->uid, t->gid, AT_EMPTY_PATH) < 0) {
				int e = -errno;
				close(next);
				close(cur);
				return msb__error_errno(err, e, "cannot own `%s/%.*s`",
							t->f->guest_base, (int)upto, dir_rel);
			}
		}
		close(cur);
		if (next == -ENOENT && !create)
			return NS_MISSING;
		if (next < 0)
			return walk_error(t, next, dir_rel, upto, err);
		cur = next;
		p = *end ? end + 1 : end;
	}
	return cur;
}

static msb_entry_kind kind_of(mode_t mode)
{
	if (S_ISREG(mode))
		return MSB_ENTRY_FILE;
	if (S_ISDIR(mode))
		return MSB_ENTRY_DIRECTORY;
	if (S_ISLNK(mode))
		return MSB_ENTRY_SYMLINK;
	return MSB_ENTRY_OTHER;
}

/* Takes `path`. */
static void fill_entry(msb_entry *e, char *path, const struct stat *st)
{
	*e = (msb_entry){
		.path = path,
		.kind = kind_of(st->st_mode),
		.size_known = S_ISREG(st->st_mode),
		.size_bytes = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0,
	};
}

/* ---- write_file ---------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *data, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		off += (size_t)n;
	}
	return 0;
}

/* Own the new file as the guest's root and write the bytes. */
static int fill(const ns_target *t, int fd, const uint8_t *data, size_t len, msb_error **err)
{
	if (fchown(fd, t->uid, t->gid) < 0)
		return msb__error_errno(err, errno, "cannot own `%s`", t->shown);
	/* In two halves, for the fault point between them (docs/internals/faults.md). */
	int w = write_all(fd, data, len / 2);
	if (w == 0) {
		msb__fault_point("write_file.partial");
		w = write_all(fd, data + len / 2, len - len / 2);
	}
	if (w < 0)
		return msb__error_errno(err, w, "cannot write `%s`", t->shown);
	return 0;
}

/* Where the filesystem has no O_TMPFILE: a temporary sibling, created with
 * O_EXCL and never followed, renamed into place. A writer killed mid-way
 * leaves it behind (.msb-write-*): the anonymous file above does not. */
static int write_named_temp(const ns_target *t, int parent, const uint8_t *data, size_t len,
			    msb_error **err)
{
	char tmp[48];
	uint8_t rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return msb__error_errno(err, errno, "no randomness for a temporary name");
	snprintf(tmp, sizeof(tmp), ".msb-write-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
		 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	int fd = open_leaf(parent, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return msb__error_errno(err, fd, "cannot create `%s`", t->shown);
	int r = fill(t, fd, data, len, err);
	if (close(fd) < 0 && r == 0)
		r = msb__error_errno(err, errno, "cannot write `%s`", t->shown);
	if (r == 0 && renameat(parent, tmp, parent, t->leaf) < 0)
		r = msb__error_errno(err, errno, "cannot place `%s`", t->shown);
	if (r < 0)
		unlinkat(parent, tmp, 0);
	return r;
}

/* A reference on the file about to be replaced, so that its last one is
 * dropped by the caller's close and not by the rename (for a 64 MiB file,
 * freeing its pages and blocks was two thirds of a write_file's time). An
 * O_PATH no-follow open of one name in a held directory: a link the guest
 * swapped in is held as the link itself, a different file is let go. Only
 * ever closed, never read or written. */
static void hold_replaced(int parent, const char *leaf, const struct stat *st, int *out)
{
	struct stat now;
	/* guest-names: ok - one component under a held fd, O_PATH|O_NOFOLLOW */
	int fd = openat(parent, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev) {
		close(fd);
		return;
	}
	*out = fd;
}

int msb_ns__write_file(const ns_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *working_directory, msb_error **err)
{
	if (f->replaced)
		*f->replaced = -1;
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, path, working_directory, &t, err);
	if (r < 0)
		return r;
	if (strcmp(t.rel, t.wd_rel) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s` names the working directory itself, not a file", path);
	_cleanup_close_ int parent = walk(&t, t.dir, true, err);
	if (parent < 0)
		return parent;

	/* Refuse a link or a non-file at the destination up front. Should the
	 * guest swap one in after this check, the rename below replaces the
	 * link itself (never its target) or fails on a directory. */
	struct stat st;
	if (fstatat(parent, t.leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return msb_error_set(err, MSB_E_VALUE,
					     "`%s` is a link: it is refused, never followed", path);
		if (S_ISDIR(st.st_mode))
			return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
		if (!S_ISREG(st.st_mode))
			return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
		if (f->replaced && (uint64_t)st.st_size >= NS_RELEASE_LATER_MIN)
			hold_replaced(parent, t.leaf, &st, f->replaced);
	}

	/* The bytes go to an anonymous file (O_TMPFILE) that gets its name only
	 * once it is whole: a writer killed mid-way (issue 15: SIGKILL of `msb
	 * serve` left 29 of 40 MiB under a temporary name, seen by the guest and
	 * by fingerprints) leaves nothing. */
	int fd = msb__tmpfile_open(parent, 0644);
	if (fd == -EOPNOTSUPP || fd == -EISDIR || fd == -EINVAL)
		return write_named_temp(&t, parent, data, len, err);
	if (fd < 0)
		return msb__error_errno(err, fd, "cannot create `%s`", path);
	r = fill(&t, fd, data, len, err);
	/* Into place: linked straight at the leaf when it is absent; else linked
	 * under a private name and renamed over it, which replaces a link the
	 * guest swapped in since the check (the link itself, never its target)
	 * and fails on a directory. */
	if (r == 0 && (r = msb__tmpfile_link(fd, parent, t.leaf, true, ".msb-write-")) < 0)
		r = msb__error_errno(err, r, "cannot place `%s`", path);
	close(fd);
	return r;
}

/* ---- stat_file ----------------------------------------------------------------- */

int msb_ns__stat_file(const ns_files *f, const char *path, const char *working_directory,
		      bool *present, msb_entry *out, msb_error **err)
{
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, path, working_directory, &t, err);
	if (r < 0)
		return r;
	struct stat st;
	if (!*t.rel) {
		if (fstat(t.basefd, &st) < 0)
			return msb__error_errno(err, errno, "the storage base is gone");
	} else {
		_cleanup_close_ int dir = walk(&t, t.dir, false, err);
		if (dir == NS_MISSING) {
			*present = false;
			return 0;
		}
		if (dir < 0)
			return dir;
		if (fstatat(dir, t.leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT) {
				*present = false;
				return 0;
			}
			return msb__error_errno(err, errno, "cannot stat `%s`", path);
		}
	}
	char *name = wd_relative(&t, t.rel);
	if (!name)
		return msb__error_nomem(err);
	fill_entry(out, name, &st);
	*present = true;
	return 0;
}

/* ---- read_file ----------------------------------------------------------------- */

static int cap_exceeded(const ns_target *t, const char *how, uint64_t max_bytes, msb_error **err)
{
	int r = msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED,
			      "`%s` %s the max_bytes_per_file cap of %" PRIu64 " bytes", t->shown,
			      how, max_bytes);
	_cleanup_free_ char *name = wd_relative(t, t->rel);
	msb__error_set_cap(err, "max_bytes_per_file", name ? name : t->shown);
	return r;
}

#define NS_HUGE_PAGE ((size_t)2 << 20)

/* A buffer for `size` bytes that free() releases. A large one is aligned to
 * and advised for transparent huge pages: a 64 MiB read then takes ~32 page
 * faults instead of 16384, which in a VM with costly faults is most of the
 * read's time (docs/performance.md, "File transfer"). The advice is only a hint. */
static void *alloc_read_buffer(size_t size)
{
	if (size < NS_HUGE_PAGE)
		return malloc(size ? size : 1);
	void *p = NULL;
	if (posix_memalign(&p, NS_HUGE_PAGE, size) != 0)
		return NULL;
	(void)madvise(p, size & ~(NS_HUGE_PAGE - 1), MADV_HUGEPAGE);
	return p;
}

static ssize_t read_retry(int fd, void *buf, size_t len)
{
	ssize_t n;
	while ((n = read(fd, buf, len)) < 0 && errno == EINTR)
		;
	return n < 0 ? -errno : n;
}

int msb_ns__read_file(const ns_files *f, const char *path, const char *working_directory,
		      uint64_t max_bytes, uint8_t **data, size_t *len, msb_error **err)
{
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, path, working_directory, &t, err);
	if (r < 0)
		return r;
	if (!*t.rel)
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	_cleanup_close_ int dir = walk(&t, t.dir, false, err);
	if (dir == NS_MISSING)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", path);
	if (dir < 0)
		return dir;
	/* O_NONBLOCK: a fifo planted (or swapped in) here must not hang us. */
	_cleanup_close_ int fd = open_leaf(dir, t.leaf, O_RDONLY | O_NONBLOCK, 0);
	if (fd == -ENOENT)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s`", path);
	if (fd == -ELOOP)
		return msb_error_set(err, MSB_E_OS, "`%s` is a link: refusing to read through it",
				     path);
	if (fd == -ENXIO || fd == -ENODEV)
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
	if (fd < 0)
		return msb__error_errno(err, fd, "cannot open `%s`", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return msb__error_errno(err, errno, "cannot stat `%s`", path);
	if (S_ISDIR(st.st_mode))
		return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
	if (!S_ISREG(st.st_mode))
		return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);

	/* The cap is checked on the size first, then on every byte read: a
	 * file growing while it is read is refused, never truncated. */
	uint64_t size = (uint64_t)st.st_size;
	if (max_bytes > MSB_NS_MAX_FILE_BYTES)
		max_bytes = MSB_NS_MAX_FILE_BYTES;
	if (size > max_bytes) {
		char how[64];
		snprintf(how, sizeof(how), "is %" PRIu64 " bytes, over", size);
		return cap_exceeded(&t, how, max_bytes, err);
	}
	uint64_t limit = max_bytes < SIZE_MAX ? max_bytes : SIZE_MAX;
	size_t cap = (size_t)size;
	_cleanup_free_ uint8_t *buf = alloc_read_buffer(cap);
	if (!buf)
		return msb__error_nomem(err);
	size_t got = 0;
	for (;;) {
		ssize_t n;
		if (got == cap) {
			/* At the size seen: one more byte says whether it grew. */
			uint8_t extra;
			n = read_retry(fd, &extra, 1);
			if (n < 0)
				return msb__error_errno(err, (int)n, "cannot read `%s`", path);
			if (n == 0)
				break;
			if (got >= limit)
				return cap_exceeded(&t, "grew past", max_bytes, err);
			size_t ncap = cap < 65536 ? 65536 : cap * 2;
			if (ncap > limit || ncap < cap)
				ncap = (size_t)limit;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb)
				return msb__error_nomem(err);
			buf = nb;
			cap = ncap;
			buf[got++] = extra;
			continue;
		}
		/* The first read takes half, for the fault point after it
		 * (docs/internals/faults.md). */
		n = read_retry(fd, buf + got, got == 0 && cap > 1 ? cap / 2 : cap - got);
		if (n < 0)
			return msb__error_errno(err, (int)n, "cannot read `%s`", path);
		if (n == 0)
			break;
		got += (size_t)n;
		msb__fault_point("read_file.partial");
	}
	*data = TAKE_PTR(buf);
	*len = got;
	return 0;
}

/* ---- list_dir ------------------------------------------------------------------ */

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const msb_entry *)a)->path, ((const msb_entry *)b)->path);
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* Charge one more entry named `nm` to a listing's budget, or refuse it. */
static int list_budget(const char *path, const char *prefix, bool at_wd, const char *nm,
		       size_t count, size_t *bytes, msb_error **err)
{
	if (count == NS_LIST_MAX)
		return msb_error_set(err, MSB_E_OS, "`%s` has more than %d entries", path,
				     NS_LIST_MAX);
	size_t len = (at_wd ? 0 : strlen(prefix) + 1) + strlen(nm) + 1;
	if (len > NS_LIST_MAX_BYTES - *bytes)
		return msb_error_set(err, MSB_E_OS,
				     "`%s` has more than %zu bytes of entry paths to list", path,
				     NS_LIST_MAX_BYTES);
	*bytes += len;
	return 0;
}

int msb_ns__list_dir(const ns_files *f, const char *path, const char *working_directory,
		     msb_entry **entries, size_t *n, msb_error **err)
{
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, path, working_directory, &t, err);
	if (r < 0)
		return r;
	/* The walk includes the listed directory itself (9.24). */
	_cleanup_close_ int dir = walk(&t, t.rel, false, err);
	if (dir == NS_MISSING)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such directory `%s`", path);
	if (dir < 0)
		return dir;
	int rd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rd < 0)
		return msb__error_errno(err, errno, "cannot list `%s`", path);
	__attribute__((cleanup(closedirp))) DIR *d = fdopendir(rd);
	if (!d) {
		int e = errno;
		close(rd);
		return msb__error_errno(err, e, "cannot list `%s`", path);
	}
	_cleanup_free_ char *prefix = wd_relative(&t, t.rel);
	if (!prefix)
		return msb__error_nomem(err);
	bool at_wd = strcmp(prefix, ".") == 0;

	msb_entry *v = NULL;
	size_t count = 0, cap = 0, bytes = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		const char *nm = de->d_name;
		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue; /* removed while we listed */
			r = msb__error_errno(err, errno, "cannot stat an entry of `%s`", path);
			goto fail;
		}
		if ((r = list_budget(path, prefix, at_wd, nm, count, &bytes, err)) < 0)
			goto fail;
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			msb_entry *nv = msb__reallocarray(v, ncap, sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
			cap = ncap;
		}
		char *p = at_wd ? msb__strdup(nm) : msb__asprintf("%s/%s", prefix, nm);
		if (!p)
			goto nomem;
		fill_entry(&v[count++], p, &st);
		errno = 0;
	}
	if (errno != 0) {
		r = msb__error_errno(err, errno, "cannot list `%s`", path);
		goto fail;
	}
	if (count > 1)
		qsort(v, count, sizeof(*v), entry_cmp);
	*entries = v;
	*n = count;
	return 0;

nomem:
	r = msb__error_nomem(err);
fail:
	msb_entries_free(v, count);
	return r;
}

/* ---- remove and reclaim -------------------------------------------------------- */

/* Remove the target: missing is success, a link or file is unlinked (never
 * followed), a directory only when `recursive`, and then without following a
 * link or crossing a mount anywhere inside it. */
static int remove_target(const ns_target *t, bool recursive, const char *op, msb_error **err)
{
	_cleanup_close_ int dir = walk(t, t->dir, false, err);
	if (dir == NS_MISSING)
		return 0;
	if (dir < 0)
		return msb_error_wrap(err, "%s", op);
	struct stat st;
	if (fstatat(dir, t->leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return msb__error_errno(err, errno, "%s: cannot stat `%s`", op, t->shown);
	}
	int r;
	if (S_ISDIR(st.st_mode)) {
		if (!recursive)
			return msb_error_set(err, MSB_E_OS,
					     "%s: `%s` is a directory: removing it needs recursive",
					     op, t->shown);
		r = msb__rm_rf_at(dir, t->leaf);
	} else {
		r = unlinkat(dir, t->leaf, 0) < 0 && errno != ENOENT ? -errno : 0;
	}
	if (r == -EXDEV)
		return msb_error_set(err, MSB_E_OS,
				     "%s: `%s` holds a mount point: refusing to cross it", op,
				     t->shown);
	if (r < 0)
		return msb__error_errno(err, r, "%s: cannot remove `%s`", op, t->shown);
	return 0;
}

int msb_ns__remove(const ns_files *f, const char *path, const char *working_directory,
		   bool recursive, msb_error **err)
{
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, path, working_directory, &t, err);
	if (r < 0)
		return msb_error_wrap(err, "remove");
	if (strcmp(t.rel, t.wd_rel) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "remove: refusing to remove the working directory `%s` itself",
				     path);
	return remove_target(&t, recursive, "remove", err);
}

int msb_ns__reclaim(const ns_files *f, const char *directory, const char *working_directory,
		    msb_error **err)
{
	/* The reach rule (9.27): a descendant of the working directory, resolved
	 * beneath the base by the host, removed without following a link or
	 * crossing a mount - nothing the guest could not have removed itself. */
	_cleanup_(target_clear) ns_target t = {.basefd = -1};
	int r = target_open(f, directory, working_directory, &t, err);
	if (r < 0)
		return msb_error_wrap(err, "reclaim");
	if (strcmp(t.rel, t.wd_rel) == 0)
		return msb_error_set(
			err, MSB_E_VALUE,
			"reclaim: refusing to remove the working directory `%s` itself", directory);
	return remove_target(&t, true, "reclaim", err);
}
