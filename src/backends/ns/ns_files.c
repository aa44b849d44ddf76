/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <msb/paths.h>

#include "ns_files.h"
#include "util/syscalls.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

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

static int open_beneath(int dirfd, const char *name, uint64_t flags, uint64_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | O_NOFOLLOW,
		.mode = mode,
		.resolve = RESOLVE_STRICT,
	};
	return msb__sys_openat2(dirfd, name, &how);
}

/* Open each component of `dir_rel` beneath basefd as a directory, creating
 * missing ones (owned by uid/gid). A link anywhere is refused. */
static int walk_parents(int basefd, const char *dir_rel, bool create, uid_t uid, gid_t gid,
			const char *shown, msb_error **err)
{
	int cur = fcntl(basefd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return msb__error_errno(err, errno, "cannot open the storage base");
	_cleanup_free_ char *copy = msb__strdup(dir_rel);
	if (!copy) {
		close(cur);
		return msb__error_nomem(err);
	}
	char *save = NULL;
	for (char *comp = strtok_r(copy, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		int next = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY, 0);
		if (next == -ENOENT && create) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				int e = errno;
				close(cur);
				return msb__error_errno(err, e, "cannot create a parent of `%s`",
							shown);
			}
			if (fchownat(cur, comp, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
				int e = errno;
				close(cur);
				return msb__error_errno(err, e, "cannot own a parent of `%s`",
							shown);
			}
			next = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY, 0);
		}
		if (next < 0) {
			close(cur);
			if (next == -ELOOP || next == -EXDEV)
				return msb_error_set(err, MSB_E_VALUE,
						     "`%s` passes through a linked parent", shown);
			if (next == -ENOTDIR)
				return msb_error_set(err, MSB_E_NOT_DIRECTORY,
						     "a parent of `%s` is not a directory", shown);
			return msb__error_errno(err, next, "cannot open a parent of `%s`", shown);
		}
		close(cur);
		cur = next;
	}
	return cur;
}

int msb_ns__write_file(const ns_files *f, const char *path, const uint8_t *data, size_t len,
		       const char *working_directory, msb_error **err)
{
	_cleanup_free_ char *rel = NULL, *wd_rel = NULL;
	int r = msb_ns__relative(f, path, working_directory, &rel, &wd_rel, err);
	if (r < 0)
		return r;
	if (strcmp(rel, wd_rel) == 0)
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s` names the working directory itself, not a file", path);
	_cleanup_close_ int basefd = open(f->host_base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (basefd < 0)
		return msb__error_errno(err, errno, "the storage base is gone");
	struct stat base_st;
	if (fstat(basefd, &base_st) < 0)
		return msb__error_errno(err, errno, "the storage base is gone");

	char *slash = strrchr(rel, '/');
	const char *leaf = slash ? slash + 1 : rel;
	if (slash)
		*slash = '\0';
	_cleanup_close_ int parent = walk_parents(basefd, slash ? rel : "", true, base_st.st_uid,
						  base_st.st_gid, path, err);
	if (parent < 0)
		return parent;

	struct stat st;
	if (fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return msb_error_set(err, MSB_E_VALUE,
					     "`%s` is a link: it is refused, never followed", path);
		if (S_ISDIR(st.st_mode))
			return msb_error_set(err, MSB_E_IS_DIRECTORY, "`%s` is a directory", path);
		if (!S_ISREG(st.st_mode))
			return msb_error_set(err, MSB_E_OS, "`%s` is not a regular file", path);
	}

	char tmp[48];
	uint8_t rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return msb__error_errno(err, errno, "no randomness for a temporary name");
	snprintf(tmp, sizeof(tmp), ".msb-write-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
		 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	int fd = open_beneath(parent, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return msb__error_errno(err, fd, "cannot create `%s`", path);
	r = 0;
	if (fchown(fd, base_st.st_uid, base_st.st_gid) < 0)
		r = msb__error_errno(err, errno, "cannot own `%s`", path);
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = msb__error_errno(err, errno, "cannot write `%s`", path);
		else
			off += (size_t)n;
	}
	if (close(fd) < 0 && r == 0)
		r = msb__error_errno(err, errno, "cannot write `%s`", path);
	if (r == 0 && renameat(parent, tmp, parent, leaf) < 0)
		r = msb__error_errno(err, errno, "cannot place `%s`", path);
	if (r < 0)
		unlinkat(parent, tmp, 0);
	return r;
}
