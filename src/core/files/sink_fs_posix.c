/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink on Linux (sink_fs.h; checklist 12.26-12.29): every
 * component resolved with openat2 beneath the root and never through a
 * link, the bytes written to an anonymous file and linked into place.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/files/sink_fs.h"
#include "util/fs.h"
#include "util/syscalls.h"
#include "util/util.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

struct fs_sink_root {
	int fd;
};

int msb_fs_sink__root_open(const char *root, fs_sink_root **out, char **resolved)
{
	/* guest-names: ok - the sink's root is the host's choice, resolved once; artifacts land
	 * beneath its fd */
	_cleanup_free_ char *abs = realpath(root, NULL);
	if (!abs)
		return -errno;
	/* guest-names: ok - the sink's root, resolved once */
	int fd = open(abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fs_sink_root *r = malloc(sizeof(*r));
	if (!r) {
		close(fd);
		return -ENOMEM;
	}
	r->fd = fd;
	*out = r;
	*resolved = TAKE_PTR(abs);
	return 0;
}

void msb_fs_sink__root_close(fs_sink_root *r)
{
	if (!r)
		return;
	close(r->fd);
	free(r);
}

char *msb_fs_sink__handle(const char *root, const char *name)
{
	return msb__asprintf("%s/%s", root, name);
}

static int open_dir_beneath(int dirfd, const char *seg)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_STRICT,
	};
	return msb__sys_openat2(dirfd, seg, &how);
}

/* Walk (creating) the parents of `name` beneath the root; *dirfd receives
 * the parent's fd and *leaf points into name. */
static int walk_parents(fs_sink_root *root, const char *name, int *dirfd, const char **leaf,
			const char **stage)
{
	_cleanup_close_ int cur = fcntl(root->fd, F_DUPFD_CLOEXEC, 0);
	*stage = "the sink's root";
	if (cur < 0)
		return -errno;
	const char *seg = name;
	for (const char *slash; (slash = strchr(seg, '/'));) {
		_cleanup_free_ char *part = msb__strndup(seg, (size_t)(slash - seg));
		if (!part)
			return -ENOMEM;
		*stage = "creating a parent";
		if (mkdirat(cur, part, 0755) < 0 && errno != EEXIST)
			return -errno;
		int next = open_dir_beneath(cur, part);
		if (next == -ELOOP || next == -EXDEV)
			return FS_SINK_NOT_CONFINED;
		if (next == -ENOTDIR)
			return FS_SINK_PARENT_NOT_DIR;
		*stage = "opening a parent";
		if (next < 0)
			return next;
		close(cur);
		cur = next;
		seg = slash + 1;
	}
	*dirfd = TAKE_FD(cur);
	*leaf = seg;
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Write the artifact and give it its name dirfd/leaf. The bytes go to an
 * anonymous file (O_TMPFILE) named only once they are whole and synced, so a
 * process killed mid-way leaves nothing in the sink (issue 15); where the
 * filesystem cannot, to a hidden sibling renamed into place. Neither follows
 * a link at the leaf: a link is replaced (REPLACE) or refused (-EEXIST).
 */
static int place(int dirfd, const char *leaf, const uint8_t *p, size_t n, unsigned mode,
		 bool replace)
{
	_cleanup_close_ int fd = msb__tmpfile_open(dirfd, mode);
	if (fd >= 0) {
		int r = write_all(fd, p, n);
		if (r == 0 && fsync(fd) < 0)
			r = -errno;
		return r < 0 ? r : msb__tmpfile_link(fd, dirfd, leaf, replace, ".msb-landing-");
	}
	if (fd != -EOPNOTSUPP && fd != -EISDIR && fd != -EINVAL)
		return fd;
	uint8_t rnd[6];
	if (getentropy(rnd, sizeof(rnd)) < 0)
		return -errno;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".msb-landing-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, p, n);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat2(dirfd, tmp, dirfd, leaf, replace ? 0 : RENAME_NOREPLACE) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dirfd, tmp, 0);
	return r;
}

int msb_fs_sink__land(fs_sink_root *r, const char *name, const uint8_t *p, size_t n, unsigned mode,
		      msb_landing_existing existing, const char **stage)
{
	_cleanup_close_ int dirfd = -1;
	const char *leaf = NULL;
	int rc = walk_parents(r, name, &dirfd, &leaf, stage);
	if (rc != 0)
		return rc;
	/* The leaf itself must not be a link (checked again by the rename,
	 * which replaces a link rather than following it). */
	struct stat st;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return FS_SINK_NOT_CONFINED;
		if (existing == MSB_LANDING_REFUSE)
			return FS_SINK_EXISTS;
		if (S_ISDIR(st.st_mode))
			return FS_SINK_IS_DIR;
	}
	*stage = "landing it";
	rc = place(dirfd, leaf, p, n, mode, existing == MSB_LANDING_REPLACE);
	if (rc == -EEXIST)
		return FS_SINK_EXISTS;
	if (rc == -EISDIR)
		return FS_SINK_IS_DIR;
	return rc;
}
