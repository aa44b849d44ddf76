/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The filesystem sink (checklist 12.22, 12.26-12.29): artifacts land under
 * one host directory, every component resolved with openat2 beneath it and
 * never through a link, written to an anonymous file and linked into place.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>

#include <msb/outputs.h>

#include "util/fs.h"
#include "util/syscalls.h"
#include "util/util.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

struct fs_sink {
	int root_fd;
	char *root; /* absolute, resolved once */
	msb_fs_sink_options opts;
};

static void fs_sink_free(void *ud)
{
	struct fs_sink *s = ud;
	if (!s)
		return;
	if (s->root_fd >= 0)
		close(s->root_fd);
	free(s->root);
	free(s);
}

static int not_confined(msb_error **err, const char *name)
{
	/* The message names the artifact, never a host path (12.26). */
	msb_error_set(err, MSB_E_LANDING_NOT_CONFINED,
		      "artifact `%s` would land outside the sink's root (a link or an escape on "
		      "its way)",
		      name);
	msb__error_set_path(err, name);
	return MSB_E_LANDING_NOT_CONFINED;
}

static int landing_exists(msb_error **err, const char *name, const char *what)
{
	msb_error_set(err, MSB_E_LANDING_EXISTS, "artifact `%s`: %s", name, what);
	msb__error_set_path(err, name);
	return MSB_E_LANDING_EXISTS;
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
static int walk_parents(struct fs_sink *s, const char *name, int *dirfd, const char **leaf,
			msb_error **err)
{
	_cleanup_close_ int cur = fcntl(s->root_fd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return msb__error_errno(err, -errno, "artifact `%s`: the sink's root", name);
	const char *seg = name;
	for (const char *slash; (slash = strchr(seg, '/'));) {
		_cleanup_free_ char *part = msb__strndup(seg, (size_t)(slash - seg));
		if (!part)
			return msb__error_nomem(err);
		if (mkdirat(cur, part, 0755) < 0 && errno != EEXIST)
			return msb__error_errno(err, -errno, "artifact `%s`: creating a parent",
						name);
		int next = open_dir_beneath(cur, part);
		if (next == -ELOOP || next == -EXDEV)
			return not_confined(err, name);
		if (next == -ENOTDIR)
			return landing_exists(err, name, "a parent exists and is not a directory");
		if (next < 0)
			return msb__error_errno(err, next, "artifact `%s`: opening a parent", name);
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
static int land(struct fs_sink *s, int dirfd, const char *leaf, const msb_artifact *a)
{
	bool replace = s->opts.existing == MSB_LANDING_REPLACE;
	unsigned mode = s->opts.file_mode ? s->opts.file_mode : 0644;
	_cleanup_close_ int fd = msb__tmpfile_open(dirfd, mode);
	if (fd >= 0) {
		int r = write_all(fd, a->content, a->len);
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
	int r = write_all(fd, a->content, a->len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat2(dirfd, tmp, dirfd, leaf, replace ? 0 : RENAME_NOREPLACE) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dirfd, tmp, 0);
	return r;
}

static int default_display(const msb_artifact *a, char **out)
{
	*out = msb__asprintf("%s (%zu bytes)", a->name, a->len);
	return *out ? 0 : -ENOMEM;
}

static int fs_deliver(void *ud, const msb_artifact *a, const char *call_id,
		      msb_landed_artifact *out, msb_error **err)
{
	struct fs_sink *s = ud;
	int r = msb_validate_artifact_name(a->name, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dirfd = -1;
	const char *leaf = NULL;
	r = walk_parents(s, a->name, &dirfd, &leaf, err);
	if (r < 0)
		return r;
	/* The leaf itself must not be a link (checked again by the rename,
	 * which replaces a link rather than following it). */
	struct stat st;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return not_confined(err, a->name);
		if (s->opts.existing == MSB_LANDING_REFUSE)
			return landing_exists(err, a->name, "the destination exists");
		if (S_ISDIR(st.st_mode))
			return landing_exists(err, a->name, "the destination is a directory");
	}
	r = land(s, dirfd, leaf, a);
	if (r == -EEXIST)
		return landing_exists(err, a->name, "the destination exists");
	if (r == -EISDIR)
		return landing_exists(err, a->name, "the destination is a directory");
	if (r < 0)
		return msb__error_errno(err, r, "artifact `%s`: landing it", a->name);
	out->handle = msb__asprintf("%s/%s", s->root, a->name);
	if (!out->handle)
		return msb__error_nomem(err);
	if (s->opts.display)
		r = s->opts.display(s->opts.display_userdata, a, out->handle, &out->display, err);
	else if (default_display(a, &out->display) < 0)
		r = msb__error_nomem(err);
	if (r == 0 && !out->display)
		r = msb_error_set(err, MSB_E_VALUE, "the sink's display gave no text for `%s`",
				  a->name);
	if (r < 0)
		return r;
	out->name = msb__strdup(a->name);
	return out->name ? 0 : msb__error_nomem(err);
}

int msb_fs_sink_new(const char *root, const msb_fs_sink_options *opts, msb_output_sink **out,
		    msb_error **err)
{
	static const msb_fs_sink_options defaults = MSB_FS_SINK_OPTIONS_INIT;
	if (!root || !*root || !out)
		return msb_error_set(err, MSB_E_VALUE, "file system sink: no root");
	if (opts && opts->version != MSB_FS_SINK_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "file system sink: options version %u",
				     opts->version);
	struct fs_sink *s = calloc(1, sizeof(*s));
	msb_output_sink *sink = calloc(1, sizeof(*sink));
	if (!s || !sink) {
		free(s);
		free(sink);
		return msb__error_nomem(err);
	}
	s->opts = opts ? *opts : defaults;
	s->root_fd = -1;
	/* guest-names: ok - the sink's root is the host's choice, resolved once; artifacts land
	 * beneath its fd */
	s->root = realpath(root, NULL);
	if (!s->root) {
		int e = errno;
		fs_sink_free(s);
		free(sink);
		return msb__error_errno(err, -e, "file system sink: root `%s`", root);
	}
	/* guest-names: ok - the sink's root, resolved once */
	s->root_fd = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->root_fd < 0) {
		int e = errno;
		fs_sink_free(s);
		free(sink);
		return msb__error_errno(err, -e, "file system sink: root `%s`", root);
	}
	*sink = (msb_output_sink)MSB_OUTPUT_SINK_INIT;
	sink->userdata = s;
	sink->deliver = fs_deliver;
	sink->free = fs_sink_free;
	*out = sink;
	return 0;
}
