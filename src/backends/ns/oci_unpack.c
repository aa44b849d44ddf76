/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unpacking one OCI layer. libarchive only reads: the tar format, with gzip
 * or zstd decompressed in-process (an external decompressor is refused). Every
 * entry is created here, relative to directory fds below the layer's own
 * (temporary) directory: parents are resolved with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) and the
 * entry is made by its last component alone, so no entry, link or earlier
 * symlink can make a write land outside that directory. libarchive's
 * archive_write_disk (with ARCHIVE_EXTRACT_SECURE_*) is not used: it works
 * from the process's current directory, which a library cannot change.
 *
 * Refused (MSB_E_VALUE, naming the entry): absolute and `..` entries, entries
 * below a symlink, relative symlinks that climb out of the tree, hardlinks to
 * anything but a non-directory of this layer, device nodes (a 0/0 character
 * device is a whiteout), unknown entry types, too many entries or bytes, a
 * truncated or corrupt stream, a digest or size mismatch.
 *
 * Whiteouts become overlayfs ones: `.wh.NAME` a 0/0 character device NAME,
 * `.wh..wh..opq` the xattr user.overlay.opaque=y on its directory (the sandbox
 * mounts its overlay with `userxattr`). Set-id bits and xattrs of entries are
 * dropped: no_new_privs makes the first inert inside, and user.overlay.*
 * xattrs from a layer would steer the overlay.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "backends/ns/archive_lazy.h"
#include "backends/ns/oci.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/syscalls.h"

#define READ_CHUNK (128 * 1024)
#define OPAQUE_XATTR "user.overlay.opaque"
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define PATH_MAX_LEN 4095
#define NOBODY 65534u

struct src {
	int fd;
	msb_sha256 hash;
	uint64_t total;
	msb_oci_progress *progress; /* may be NULL */
	int err;		    /* -errno of a failed read */
	uint8_t buf[READ_CHUNK];
};

struct dirmeta {
	char *path; /* relative; "" is the layer's root */
	mode_t mode;
	uint32_t uid, gid;
	struct timespec mtime;
};

struct unpack {
	int root;
	const msb_oci_owner *owner;
	const char *what;
	struct archive *a;
	uint64_t entries;
	uint64_t bytes;
	struct dirmeta *dirs;
	size_t n_dirs, cap_dirs;
	msb_error **err;
};

static int refuse(struct unpack *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct unpack *u, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!msg)
		return msb__error_nomem(u->err);
	return msb_error_set(u->err, MSB_E_VALUE, "oci layer %s: %s", u->what, msg);
}

static int sys_fail(struct unpack *u, int r, const char *op, const char *path)
{
	return msb__error_errno(u->err, r, "oci layer %s: %s `%s`", u->what, op, path);
}

/* ---- the blob: read, hashed on the way ------------------------------------ */

static la_ssize_t src_read(struct archive *a, void *ud, const void **buf)
{
	struct src *s = ud;
	ssize_t n;
	do
		n = read(s->fd, s->buf, sizeof(s->buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		s->err = -errno;
		archive_set_error(a, errno, "read the blob");
		return -1;
	}
	msb__sha256_update(&s->hash, s->buf, (size_t)n);
	s->total += (uint64_t)n;
	if (s->progress) {
		msb_oci_progress *pr = s->progress;
		pr->p.layer_bytes += (uint64_t)n;
		pr->p.bytes += (uint64_t)n;
		if (pr->p.layer_bytes - pr->reported >= MSB_OCI_PROGRESS_STEP)
			msb_ns__oci_report(pr);
	}
	*buf = s->buf;
	return n;
}

/* The rest of the blob after the archive's end (padding, trailing bytes). */
static int src_drain(struct src *s)
{
	for (;;) {
		ssize_t n = read(s->fd, s->buf, sizeof(s->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		msb__sha256_update(&s->hash, s->buf, (size_t)n);
		s->total += (uint64_t)n;
	}
}

static void hex_of(const uint8_t d[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = '\0';
}

/* ---- names ------------------------------------------------------------------ */

/*
 * Normalise an entry name into out (relative, no "." or empty components, no
 * trailing slash; "" is the root). Absolute names and `..` components are
 * refused: an OCI layer's names are relative to the image root.
 */
static int normalise(struct unpack *u, const char *name, char *out, size_t size)
{
	if (!name)
		return refuse(u, "an entry has no readable name");
	if (name[0] == '/')
		return refuse(u, "absolute entry `%s`", name);
	size_t len = 0;
	const char *c = name;
	while (*c) {
		while (*c == '/')
			c++;
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0)
			break;
		if (n == 1 && c[0] == '.') {
			c += n;
			continue;
		}
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return refuse(u, "entry `%s` has a `..` component", name);
		if (n > 255)
			return refuse(u, "entry `%.64s...` has a component longer than 255 bytes",
				      name);
		if (len + (len ? 1 : 0) + n >= size || len + n > PATH_MAX_LEN)
			return refuse(u, "entry `%.64s...` is longer than %d bytes", name,
				      PATH_MAX_LEN);
		if (len)
			out[len++] = '/';
		memcpy(out + len, c, n);
		len += n;
		c += n;
	}
	out[len] = '\0';
	return 0;
}

/* Split a normalised non-root path into parent ("" = root) and last name. */
static const char *split(char *path)
{
	char *slash = strrchr(path, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return slash + 1;
}

/* Does a relative symlink at `entry` with `target` climb above the root?
 * Absolute targets are resolved inside the guest's root, never the host's. */
static bool link_escapes(const char *entry, const char *target)
{
	if (target[0] == '/')
		return false;
	long depth = 0;
	for (const char *p = entry; *p; p++)
		if (*p == '/')
			depth++; /* components of the entry's directory */
	const char *c = target;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 2 && c[0] == '.' && c[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n > 0 && !(n == 1 && c[0] == '.')) {
			depth++;
		}
		c += n;
		if (*c == '/')
			c++;
	}
	return false;
}

/* ---- ownership -------------------------------------------------------------- */

static void host_ids(const struct unpack *u, int64_t uid, int64_t gid, uid_t *hu, gid_t *hg)
{
	uint32_t gu = uid >= 0 && uid < 65536 ? (uint32_t)uid : NOBODY;
	uint32_t gg = gid >= 0 && gid < 65536 ? (uint32_t)gid : NOBODY;
	*hu = (uid_t)(u->owner->id_base + gu);
	*hg = (gid_t)(u->owner->id_base + gg);
}

static int chown_fd(struct unpack *u, int fd, const char *name, int flags, int64_t uid, int64_t gid,
		    const char *path)
{
	if (!u->owner->shift)
		return 0;
	uid_t hu;
	gid_t hg;
	host_ids(u, uid, gid, &hu, &hg);
	if (fchownat(fd, name, hu, hg, flags) < 0)
		return sys_fail(u, -errno, "chown", path);
	return 0;
}

/* ---- directories -------------------------------------------------------------- */

static int open_beneath(int root, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	return msb__sys_openat2(root, rel[0] ? rel : ".", &how);
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static int set_opaque(struct unpack *u, int dirfd, const char *name, const char *path)
{
	_cleanup_close_ int fd =
		openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sys_fail(u, -errno, "open", path);
	if (fsetxattr(fd, OPAQUE_XATTR, "y", 1, 0) < 0)
		return msb__error_errno(u->err, errno,
					"oci layer %s: cannot mark `%s` opaque (xattr %s; the "
					"state root's filesystem needs user xattrs)",
					u->what, path, OPAQUE_XATTR);
	return 0;
}

/* mkdir of one component; a whiteout of this layer in its place is replaced
 * by an opaque directory (what was below stays deleted). */
static int make_dir(struct unpack *u, int parent, const char *name, const char *path, bool *made)
{
	*made = false;
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		if (!is_whiteout(&st))
			return refuse(u, "`%s` is needed as a directory but is not one", path);
		if (unlinkat(parent, name, 0) < 0)
			return sys_fail(u, -errno, "replace the whiteout", path);
		if (mkdirat(parent, name, 0700) < 0)
			return sys_fail(u, -errno, "mkdir", path);
		*made = true;
		return set_opaque(u, parent, name, path);
	}
	if (errno != ENOENT)
		return sys_fail(u, -errno, "stat", path);
	if (mkdirat(parent, name, 0700) < 0)
		return sys_fail(u, -errno, "mkdir", path);
	*made = true;
	return 0;
}

static int remember_dir(struct unpack *u, const char *path, mode_t mode, int64_t uid, int64_t gid,
			struct timespec mtime)
{
	for (size_t i = 0; i < u->n_dirs; i++)
		if (strcmp(u->dirs[i].path, path) == 0) {
			u->dirs[i].mode = mode;
			u->dirs[i].uid = (uint32_t)uid;
			u->dirs[i].gid = (uint32_t)gid;
			u->dirs[i].mtime = mtime;
			return 0;
		}
	if (u->n_dirs == u->cap_dirs) {
		size_t cap = u->cap_dirs ? u->cap_dirs * 2 : 64;
		struct dirmeta *d = msb__reallocarray(u->dirs, cap, sizeof(*d));
		if (!d)
			return msb__error_nomem(u->err);
		u->dirs = d;
		u->cap_dirs = cap;
	}
	char *p = strdup(path);
	if (!p)
		return msb__error_nomem(u->err);
	u->dirs[u->n_dirs++] = (struct dirmeta){p, mode, (uint32_t)uid, (uint32_t)gid, mtime};
	return 0;
}

/* The directory `parent` (relative, normalised) as an O_PATH fd, made with
 * its missing components (0755, root's) when the layer did not list them. A
 * component that is a symlink or a file is refused. */
static int parent_dir(struct unpack *u, const char *parent)
{
	int fd = open_beneath(u->root, parent, O_PATH | O_DIRECTORY);
	if (fd >= 0 || fd != -ENOENT) {
		if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
			return refuse(u, "`%s` lies below a link or a non-directory", parent);
		return fd >= 0 ? fd : sys_fail(u, fd, "open", parent);
	}
	char path[PATH_MAX_LEN + 1];
	snprintf(path, sizeof(path), "%s", parent);
	int cur = fcntl(u->root, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return sys_fail(u, -errno, "dup", ".");
	char *c = path;
	while (*c) {
		char *e = strchr(c, '/');
		if (e)
			*e = '\0';
		bool made = false;
		int r = make_dir(u, cur, c, path, &made);
		if (r == 0 && made) {
			struct timespec now = {0, UTIME_OMIT};
			r = remember_dir(u, path, 0755, 0, 0, now);
		}
		int next =
			r < 0 ? -1 : openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (r == 0 && next < 0)
			r = errno == ELOOP || errno == ENOTDIR
				    ? refuse(u, "`%s` lies below a link or a non-directory", path)
				    : sys_fail(u, -errno, "open", path);
		close(cur);
		if (r < 0)
			return r;
		cur = next;
		if (!e)
			break;
		*e = '/';
		c = e + 1;
	}
	return cur;
}

/* Remove what is at parent/name (a directory with everything below), unless
 * it is a directory and `keep_dir`. Missing is fine. */
static int clear_slot(struct unpack *u, int parent, const char *name, const char *path,
		      bool keep_dir, bool *was_dir)
{
	struct stat st;
	*was_dir = false;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : sys_fail(u, -errno, "stat", path);
	if (keep_dir && is_whiteout(&st))
		return 0; /* make_dir turns it into an opaque directory */
	if (S_ISDIR(st.st_mode)) {
		*was_dir = true;
		if (keep_dir)
			return 0;
		int r = msb__rm_rf_at(parent, name);
		return r < 0 ? sys_fail(u, r, "replace", path) : 0;
	}
	if (unlinkat(parent, name, 0) < 0)
		return sys_fail(u, -errno, "replace", path);
	return 0;
}

/* ---- entries -------------------------------------------------------------- */

static struct timespec entry_mtime(struct archive_entry *e)
{
	struct timespec t = {0, UTIME_OMIT};
	if (archive_entry_mtime_is_set(e)) {
		t.tv_sec = archive_entry_mtime(e);
		t.tv_nsec = archive_entry_mtime_nsec(e);
		if (t.tv_nsec < 0 || t.tv_nsec > 999999999)
			t.tv_nsec = 0;
	}
	return t;
}

static mode_t safe_mode(mode_t m)
{
	return m & 01777; /* no set-id bits in the cache */
}

static int write_data(struct unpack *u, int fd, const char *path, int64_t size)
{
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(u->a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) /* truncated or corrupt */
			return refuse(u, "truncated or corrupt at `%s`: %s", path,
				      archive_error_string(u->a) ? archive_error_string(u->a)
								 : "read error");
		if (off < 0 || (uint64_t)off + len > MSB_OCI_MAX_LAYER_BYTES)
			return refuse(u, "`%s` is larger than the layer limit", path);
		u->bytes += len;
		if (u->bytes > MSB_OCI_MAX_LAYER_BYTES)
			return refuse(u, "unpacks to more than %llu bytes",
				      (unsigned long long)MSB_OCI_MAX_LAYER_BYTES);
		const uint8_t *p = buf;
		while (len > 0) {
			ssize_t w = pwrite(fd, p, len, off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return sys_fail(u, -errno, "write", path);
			p += w;
			len -= (size_t)w;
			off += w;
		}
	}
	if (size > 0 && ftruncate(fd, size) < 0) /* a sparse tail */
		return sys_fail(u, -errno, "write", path);
	return 0;
}

static int entry_file(struct unpack *u, struct archive_entry *e, int parent, const char *name,
		      const char *path)
{
	bool was_dir;
	int r = clear_slot(u, parent, name, path, false, &was_dir);
	if (r < 0)
		return r;
	int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
	if (size < 0 || (uint64_t)size > MSB_OCI_MAX_LAYER_BYTES)
		return refuse(u, "`%s` is larger than the layer limit", path);
	_cleanup_close_ int fd =
		openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sys_fail(u, -errno, "create", path);
	if ((r = write_data(u, fd, path, size)) < 0)
		return r;
	if ((r = chown_fd(u, fd, "", AT_EMPTY_PATH, archive_entry_uid(e), archive_entry_gid(e),
			  path)) < 0)
		return r;
	if (fchmod(fd, safe_mode(archive_entry_perm(e))) < 0)
		return sys_fail(u, -errno, "chmod", path);
	struct timespec ts[2] = {{0, UTIME_OMIT}, entry_mtime(e)};
	if (futimens(fd, ts) < 0)
		return sys_fail(u, -errno, "set the times of", path);
	return 0;
}

static int entry_dir(struct unpack *u, struct archive_entry *e, int parent, const char *name,
		     const char *path)
{
	bool was_dir, made;
	int r = clear_slot(u, parent, name, path, true, &was_dir);
	if (r == 0)
		r = make_dir(u, parent, name, path, &made);
	if (r < 0)
		return r;
	return remember_dir(u, path, archive_entry_perm(e), archive_entry_uid(e),
			    archive_entry_gid(e), entry_mtime(e));
}

static int entry_symlink(struct unpack *u, struct archive_entry *e, int parent, const char *name,
			 const char *path)
{
	const char *target = archive_entry_symlink(e);
	if (!target)
		target = archive_entry_symlink_utf8(e);
	if (!target || !target[0] || strlen(target) > PATH_MAX_LEN)
		return refuse(u, "symlink `%s` has no usable target", path);
	if (link_escapes(path, target))
		return refuse(u, "symlink `%s` -> `%s` points out of the tree", path, target);
	bool was_dir;
	int r = clear_slot(u, parent, name, path, false, &was_dir);
	if (r < 0)
		return r;
	if (symlinkat(target, parent, name) < 0)
		return sys_fail(u, -errno, "symlink", path);
	if ((r = chown_fd(u, parent, name, AT_SYMLINK_NOFOLLOW, archive_entry_uid(e),
			  archive_entry_gid(e), path)) < 0)
		return r;
	struct timespec ts[2] = {{0, UTIME_OMIT}, entry_mtime(e)};
	utimensat(parent, name, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int entry_hardlink(struct unpack *u, const char *link, int parent, const char *name,
			  const char *path)
{
	char target[PATH_MAX_LEN + 1];
	if (link[0] == '/' || strcmp(link, "..") == 0 || strncmp(link, "../", 3) == 0 ||
	    strstr(link, "/../") ||
	    (strlen(link) >= 3 && strcmp(link + strlen(link) - 3, "/..") == 0))
		return refuse(u, "hardlink `%s` -> `%s` points out of the tree", path, link);
	int r = normalise(u, link, target, sizeof(target));
	if (r < 0)
		return r;
	if (!target[0])
		return refuse(u, "hardlink `%s` names the root", path);
	char tparent_path[PATH_MAX_LEN + 1];
	snprintf(tparent_path, sizeof(tparent_path), "%s", target);
	const char *tname = split(tparent_path);
	_cleanup_close_ int tparent =
		open_beneath(u->root, tname ? tparent_path : "", O_PATH | O_DIRECTORY);
	if (tparent < 0)
		return refuse(u, "hardlink `%s` -> `%s`: the target is not in this layer", path,
			      link);
	if (!tname)
		tname = tparent_path;
	struct stat st;
	if (fstatat(tparent, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return refuse(u, "hardlink `%s` -> `%s`: the target is not in this layer", path,
			      link);
	if (S_ISDIR(st.st_mode) || is_whiteout(&st))
		return refuse(u, "hardlink `%s` -> `%s`: the target is not a file", path, link);
	struct stat cur;
	if (fstatat(parent, name, &cur, AT_SYMLINK_NOFOLLOW) == 0 && cur.st_dev == st.st_dev &&
	    cur.st_ino == st.st_ino)
		return 0;
	bool was_dir;
	if ((r = clear_slot(u, parent, name, path, false, &was_dir)) < 0)
		return r;
	if (linkat(tparent, tname, parent, name, 0) < 0)
		return sys_fail(u, -errno, "link", path);
	return 0;
}

static int entry_fifo(struct unpack *u, struct archive_entry *e, int parent, const char *name,
		      const char *path)
{
	bool was_dir;
	int r = clear_slot(u, parent, name, path, false, &was_dir);
	if (r < 0)
		return r;
	if (mkfifoat(parent, name, 0600) < 0)
		return sys_fail(u, -errno, "mkfifo", path);
	if ((r = chown_fd(u, parent, name, AT_SYMLINK_NOFOLLOW, archive_entry_uid(e),
			  archive_entry_gid(e), path)) < 0)
		return r;
	if (fchmodat(parent, name, safe_mode(archive_entry_perm(e)), 0) < 0)
		return sys_fail(u, -errno, "chmod", path);
	return 0;
}

/* `.wh.NAME`: NAME of the layers below is deleted. Only the layers below:
 * an entry NAME of this very layer stays (OCI image spec, "Whiteouts"). */
static int entry_whiteout(struct unpack *u, int parent, const char *name, const char *path)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return sys_fail(u, -errno, "stat", path);
	if (mknodat(parent, name, S_IFCHR | 0000, makedev(0, 0)) < 0)
		return sys_fail(u, -errno, "create the whiteout", path);
	return 0;
}

static bool valid_name(const char *n)
{
	return n[0] && strcmp(n, ".") != 0 && strcmp(n, "..") != 0 && !strchr(n, '/');
}

static int one_entry(struct unpack *u, struct archive_entry *e)
{
	char path[PATH_MAX_LEN + 1];
	const char *raw = archive_entry_pathname(e);
	if (!raw)
		raw = archive_entry_pathname_utf8(e);
	int r = normalise(u, raw, path, sizeof(path));
	if (r < 0)
		return r;
	mode_t type = archive_entry_filetype(e);
	const char *link = archive_entry_hardlink(e);
	if (!link)
		link = archive_entry_hardlink_utf8(e);
	if (!path[0]) { /* the root itself */
		if (link || type != AE_IFDIR)
			return refuse(u, "entry `%s` replaces the root with a non-directory", raw);
		return remember_dir(u, "", archive_entry_perm(e), archive_entry_uid(e),
				    archive_entry_gid(e), entry_mtime(e));
	}
	char parent_path[PATH_MAX_LEN + 1];
	memcpy(parent_path, path, strlen(path) + 1);
	const char *name = split(parent_path);
	if (!name) {
		name = path;
		parent_path[0] = '\0';
	}

	/* Whiteouts. */
	bool wh_opaque = strcmp(name, WH_OPAQUE) == 0;
	bool wh = !wh_opaque && strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) == 0;
	if (wh && !valid_name(name + strlen(WH_PREFIX)))
		return refuse(u, "whiteout `%s` names nothing", path);
	if (wh && strncmp(name + strlen(WH_PREFIX), WH_PREFIX, strlen(WH_PREFIX)) == 0)
		return refuse(u, "whiteout `%s` names another whiteout", path);
	bool dev_whiteout = type == AE_IFCHR && !link && archive_entry_rdevmajor(e) == 0 &&
			    archive_entry_rdevminor(e) == 0;
	if (!wh && !wh_opaque && !link && (type == AE_IFCHR || type == AE_IFBLK) && !dev_whiteout)
		return refuse(u, "device node `%s` (only whiteouts may be devices)", path);
	if (!wh && !wh_opaque && !link && type != AE_IFREG && type != AE_IFDIR &&
	    type != AE_IFLNK && type != AE_IFIFO && !dev_whiteout)
		return refuse(u, "entry `%s` has an unsupported type 0%o", path, (unsigned)type);

	_cleanup_close_ int parent = parent_dir(u, parent_path);
	if (parent < 0)
		return parent;
	if (wh_opaque) {
		/* The directory itself is this layer's; what lies below it in
		 * lower layers is hidden. */
		if (!parent_path[0])
			return 0; /* the image root has nothing below it */
		char dir_parent[PATH_MAX_LEN + 1];
		memcpy(dir_parent, parent_path, strlen(parent_path) + 1);
		const char *dname = split(dir_parent);
		if (!dname) {
			dname = parent_path;
			dir_parent[0] = '\0';
		}
		_cleanup_close_ int pp = open_beneath(u->root, dir_parent, O_PATH | O_DIRECTORY);
		if (pp < 0)
			return sys_fail(u, pp, "open", dir_parent);
		return set_opaque(u, pp, dname, parent_path);
	}
	if (wh)
		return entry_whiteout(u, parent, name + strlen(WH_PREFIX), path);
	if (dev_whiteout)
		return entry_whiteout(u, parent, name, path);
	if (link)
		return entry_hardlink(u, link, parent, name, path);
	switch (type) {
	case AE_IFDIR:
		return entry_dir(u, e, parent, name, path);
	case AE_IFLNK:
		return entry_symlink(u, e, parent, name, path);
	case AE_IFIFO:
		return entry_fifo(u, e, parent, name, path);
	default:
		return entry_file(u, e, parent, name, path);
	}
}

/* Directory modes, owners and times last (deepest first), so that a
 * read-only directory could still be filled. */
static int fix_dirs(struct unpack *u)
{
	for (size_t i = u->n_dirs; i-- > 0;) {
		struct dirmeta *d = &u->dirs[i];
		_cleanup_close_ int fd = open_beneath(u->root, d->path, O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			continue; /* replaced by a later entry */
		int r = chown_fd(u, fd, "", AT_EMPTY_PATH, d->uid, d->gid, d->path);
		if (r < 0)
			return r;
		if (fchmod(fd, safe_mode(d->mode)) < 0)
			return sys_fail(u, -errno, "chmod", d->path);
		struct timespec ts[2] = {{0, UTIME_OMIT}, d->mtime};
		futimens(fd, ts);
	}
	return 0;
}

static int open_archive(struct unpack *u, msb_oci_compression comp, struct src *s)
{
	struct archive *a = archive_read_new();
	if (!a)
		return msb__error_nomem(u->err);
	u->a = a;
	int r = archive_read_support_format_tar(a);
	if (r == ARCHIVE_OK && comp == MSB_OCI_TAR_GZIP)
		r = archive_read_support_filter_gzip(a);
	else if (r == ARCHIVE_OK && comp == MSB_OCI_TAR_ZSTD)
		r = archive_read_support_filter_zstd(a);
	if (r != ARCHIVE_OK) /* ARCHIVE_WARN: only an external program could decompress */
		return msb_error_set(u->err, MSB_E_RUNTIME,
				     "oci layer %s: libarchive cannot decompress it in-process",
				     u->what);
	if (archive_read_open(a, s, NULL, src_read, NULL) != ARCHIVE_OK)
		return refuse(u, "truncated or corrupt (no tar stream): %s",
			      archive_error_string(a) ? archive_error_string(a) : "unreadable");
	return 0;
}

int msb_ns__oci_unpack(int blob_fd, uint64_t size, const char *hex, msb_oci_compression comp,
		       const msb_oci_owner *owner, int dirfd, const char *what,
		       msb_oci_progress *progress, msb_error **err)
{
	int lr = msb_ns__archive_load(err);
	if (lr < 0)
		return lr;
	struct unpack u = {.root = dirfd, .owner = owner, .what = what, .err = err};
	struct src *s = calloc(1, sizeof(*s));
	if (!s)
		return msb__error_nomem(err);
	s->fd = blob_fd;
	s->progress = progress;
	msb__sha256_init(&s->hash);
	/* The root is the guest root's unless the layer says otherwise. */
	struct timespec omit = {0, UTIME_OMIT};
	int r = remember_dir(&u, "", 0755, 0, 0, omit);
	if (r == 0)
		r = open_archive(&u, comp, s);
	while (r == 0) {
		struct archive_entry *e;
		int ar = archive_read_next_header(u.a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar < ARCHIVE_WARN) {
			r = s->err ? sys_fail(&u, s->err, "read", "the blob")
				   : refuse(&u, "truncated or corrupt: %s",
					    archive_error_string(u.a) ? archive_error_string(u.a)
								      : "read error");
			break;
		}
		if (++u.entries > MSB_OCI_MAX_LAYER_ENTRIES) {
			r = refuse(&u, "more than %u entries", MSB_OCI_MAX_LAYER_ENTRIES);
			break;
		}
		r = one_entry(&u, e);
	}
	/* The whole blob is hashed even when unpacking stopped early: a digest
	 * mismatch is the cause to report of whatever else went wrong. */
	bool read_ok = s->err == 0;
	int dr = src_drain(s);
	if (r == 0 && dr < 0)
		r = sys_fail(&u, dr, "read", "the blob");
	if (read_ok && dr == 0) {
		uint8_t d[32];
		char got[65];
		msb__sha256_final(&s->hash, d);
		hex_of(d, got);
		if (s->total != size)
			r = refuse(&u,
				   "size mismatch: the blob has %llu bytes, the manifest says "
				   "%llu",
				   (unsigned long long)s->total, (unsigned long long)size);
		else if (strcmp(got, hex) != 0)
			r = refuse(&u, "digest mismatch: the blob is sha256:%s", got);
	}
	if (r == 0)
		r = fix_dirs(&u);
	if (u.a)
		archive_read_free(u.a);
	for (size_t i = 0; i < u.n_dirs; i++)
		free(u.dirs[i].path);
	free(u.dirs);
	free(s);
	return r;
}
