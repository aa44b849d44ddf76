/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rootfs of an oci sandbox (oci_rootfs.h), built by msb-oci-shim in its
 * private mount namespace with the new mount API: every mount is attached
 * fd-relative below the state directory, which is host-private (0711, no
 * guest ever sees its path).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "backends/oci/oci_rootfs.h"
#include "backends/oci/oci_shim.h"
#include "util/syscalls.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static int fail(oci_rootfs *rf, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(oci_rootfs *rf, int r, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (r < 0)
		snprintf(rf->err, sizeof(rf->err), "%s: %s", what, strerror(-r));
	else
		snprintf(rf->err, sizeof(rf->err), "%s", what);
	return r < 0 ? r : -EIO;
}

int oci_rootfs_private(char *err, size_t size)
{
	if (unshare(CLONE_NEWNS) < 0) {
		snprintf(err, size, "unshare a mount namespace: %s", strerror(errno));
		return -errno;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		snprintf(err, size, "make / private: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

void oci_rootfs_hide_hybrid_cgroup2(void)
{
	struct statfs st;
	if (statfs("/sys/fs/cgroup", &st) < 0 || st.f_type != TMPFS_MAGIC)
		return; /* unified (v2 only) or no cgroupfs: crun is content */
	if (statfs("/sys/fs/cgroup/unified", &st) < 0 || st.f_type != CGROUP2_SUPER_MAGIC)
		return;
	/* Covered by an empty read-only tmpfs rather than unmounted: an
	 * unmount costs the kernel an RCU grace period (ms here, on every
	 * start); a mount does not. crun then sees no cgroup2 there, and
	 * neither does the shim's cgroup plan (no cgroup.controllers). */
	if (mount("msb-hidden", "/sys/fs/cgroup/unified", "tmpfs",
		  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,nr_inodes=1,mode=0555") < 0)
		umount2("/sys/fs/cgroup/unified", MNT_DETACH);
}

/* ---- mounts -------------------------------------------------------------------- */

struct fs_opt {
	const char *key;
	const char *value; /* NULL: a flag */
};

/* A fresh `fstype` attached at dirfd/name; *root (optional) gets its root fd. */
static int new_mount(oci_rootfs *rf, const char *fstype, const struct fs_opt *opts, unsigned attrs,
		     int dirfd, const char *name, int *root)
{
	_cleanup_close_ int fs = msb__sys_fsopen(fstype, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(rf, fs, "%s: fsopen %s", name, fstype);
	for (size_t i = 0; opts && opts[i].key; i++) {
		int r = opts[i].value
				? msb__sys_fsconfig(fs, FSCONFIG_SET_STRING, opts[i].key,
						    opts[i].value, 0)
				: msb__sys_fsconfig(fs, FSCONFIG_SET_FLAG, opts[i].key, NULL, 0);
		if (r < 0)
			return fail(rf, r, "%s: %s option %s", name, fstype, opts[i].key);
	}
	int r = msb__sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
	if (r < 0) {
		char log[200] = "";
		ssize_t n = read(fs, log, sizeof(log) - 1);
		log[n > 0 ? n : 0] = '\0';
		char *nl = strchr(log, '\n');
		if (nl)
			*nl = '\0';
		return fail(rf, r, "%s: create %s%s%s", name, fstype, log[0] ? " " : "", log);
	}
	_cleanup_close_ int mnt = msb__sys_fsmount(fs, FSMOUNT_CLOEXEC, attrs);
	if (mnt < 0)
		return fail(rf, mnt, "%s: fsmount %s", name, fstype);
	r = msb__sys_move_mount(mnt, "", dirfd, name, MOVE_MOUNT_F_EMPTY_PATH);
	if (r < 0)
		return fail(rf, r, "%s: attach %s", name, fstype);
	if (root) {
		*root = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*root < 0)
			return fail(rf, -errno, "%s: open", name);
	}
	return 0;
}

/* Under a memory limit the tmpfs mounts hold at most a share of it, as on
 * ns (docs/ns.md "Memory covers files in tmpfs"): their pages belong to no
 * process, so a fill must end in ENOSPC, never in an OOM kill of the agent. */
static uint64_t tmpfs_size(const msb_ns_config *cfg, uint64_t asked, unsigned share, uint64_t floor)
{
	uint64_t mem = cfg->memory_max;
	if (!mem || asked <= mem / share)
		return asked;
	return mem / share > floor ? mem / share : floor;
}

static int mkdir_owned(oci_rootfs *rf, int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
		return fail(rf, -errno, "mkdir %s", name);
	_cleanup_close_ int fd =
		openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(rf, -errno, "open %s", name);
	if (fchown(fd, rf->cfg->uid_base, rf->cfg->gid_base) < 0 || fchmod(fd, mode) < 0)
		return fail(rf, -errno, "own %s", name);
	return 0;
}

/* ---- skel/ --------------------------------------------------------------------- */

static const char *const host_top[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32", NULL};
static const char *const host_etc[] = {"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
				       "os-release",   "localtime",   NULL};

/* A host entry in skel/: a link as the host has it, else an empty directory
 * or file the bundle binds the host's onto. *bind says which. */
static int stub(oci_rootfs *rf, int dirfd, const char *name, const char *src, bool *bind)
{
	*bind = false;
	struct stat st;
	/* guest-names: ok - the host's own /usr, /bin, /etc entries */
	if (lstat(src, &st) < 0)
		return errno == ENOENT ? 0 : fail(rf, -errno, "stat %s", src);
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		/* guest-names: ok - the host's own entry */
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail(rf, -errno, "readlink %s", src);
		target[n] = '\0';
		if (symlinkat(target, dirfd, name) < 0 ||
		    fchownat(dirfd, name, rf->cfg->uid_base, rf->cfg->gid_base,
			     AT_SYMLINK_NOFOLLOW) < 0)
			return fail(rf, -errno, "symlink %s", src);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		*bind = true;
		return mkdir_owned(rf, dirfd, name, 0755);
	}
	if (S_ISREG(st.st_mode)) {
		int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				0644);
		if (fd < 0)
			return fail(rf, -errno, "create %s", src);
		int r = fchown(fd, rf->cfg->uid_base, rf->cfg->gid_base) < 0 || fchmod(fd, 0644) < 0
				? -errno
				: 0;
		close(fd);
		if (r < 0)
			return fail(rf, r, "own %s", src);
		*bind = true;
	}
	return 0;
}

static int write_owned(oci_rootfs *rf, int dirfd, const char *name, const char *content)
{
	_cleanup_close_ int fd =
		openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(rf, -errno, "write /etc/%s", name);
	size_t len = strlen(content);
	while (len > 0) {
		ssize_t w = write(fd, content, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return fail(rf, -errno, "write /etc/%s", name);
		content += w;
		len -= (size_t)w;
	}
	if (fchown(fd, rf->cfg->uid_base, rf->cfg->gid_base) < 0 || fchmod(fd, 0644) < 0)
		return fail(rf, -errno, "own /etc/%s", name);
	return 0;
}

/* The copy's budget: entries (and KiB of file content) over all of them. */
#define COPY_MAX 16384
#define COPY_DEPTH 8

static int copy_file(oci_rootfs *rf, int src, int to, const char *name, mode_t mode)
{
	_cleanup_close_ int fd =
		openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(rf, -errno, "copy /etc: create %s", name);
	char buf[16384];
	for (;;) {
		ssize_t n = read(src, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(rf, -errno, "copy /etc: read %s", name);
		if (n == 0)
			break;
		rf->copied += ((size_t)n + 1023) / 1024;
		if (rf->copied > COPY_MAX)
			return fail(rf, -EFBIG, "copy /etc: more than the budget at %s", name);
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return fail(rf, -errno, "copy /etc: write %s", name);
			off += w;
		}
	}
	if (fchmod(fd, mode) < 0)
		return fail(rf, -errno, "copy /etc: chmod %s", name);
	return 0;
}

/* The host's entry `name` of the directory `src` (its own, trusted; never
 * followed) copied to at/name: directories, regular files and links, set-id
 * bits dropped; other kinds left out. Called as the guest's root
 * (host_etc_entry): what it creates is the guest's, and what others may not
 * read on the host is not read. */
static int copy_entry(oci_rootfs *rf, int src, int at, const char *name, unsigned char type,
		      int depth)
{
	/* A link, as the directory listing says: no stat (most of the copy is
	 * /etc/alternatives' links). */
	struct stat st = {.st_mode = S_IFLNK};
	if (type != DT_LNK && fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(rf, -errno, "copy /etc: stat %s", name);
	if (++rf->copied > COPY_MAX || depth > COPY_DEPTH)
		return fail(rf, -EFBIG, "copy /etc: more than the budget at %s", name);
	mode_t mode = st.st_mode & 0777;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(rf, -errno, "copy /etc: readlink %s", name);
		target[n] = '\0';
		if (symlinkat(target, at, name) < 0)
			return fail(rf, -errno, "copy /etc: symlink %s", name);
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int fd = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(rf, -errno, "copy /etc: open %s", name);
		return copy_file(rf, fd, at, name, mode);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	int r = 0;
	if (mkdirat(at, name, 0700) < 0)
		return fail(rf, -errno, "copy /etc: mkdir %s", name);
	_cleanup_close_ int to = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int from = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (to >= 0 && fchmod(to, mode | 0700) < 0) {
		r = -errno;
		if (from >= 0)
			close(from);
		return fail(rf, r, "copy /etc: chmod %s", name);
	}
	if (to < 0 || from < 0) {
		r = -errno;
		if (from >= 0)
			close(from);
		return fail(rf, r, "copy /etc: open %s", name);
	}
	DIR *d = fdopendir(from);
	if (!d) {
		r = -errno;
		close(from);
		return fail(rf, r, "copy /etc: list %s", name);
	}
	struct dirent *de;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = copy_entry(rf, dirfd(d), to, de->d_name, de->d_type, depth + 1);
	closedir(d);
	return r;
}

/* A host /etc entry into skel's etc/: a copy (copy_etc), else a stub for
 * its bind. */
static int host_etc_entry(oci_rootfs *rf, int etc, int host_etc_fd, const char *name)
{
	if (!rf->copy_etc) {
		char src[64];
		bool bind;
		snprintf(src, sizeof(src), "/etc/%s", name);
		return stub(rf, etc, name, src, &bind);
	}
	/* As the guest's root (file system ids only: no chown per entry, and
	 * the capabilities that override file permissions are off meanwhile);
	 * back to root whatever happens. */
	setfsgid(rf->cfg->gid_base);
	setfsuid(rf->cfg->uid_base);
	int r = copy_entry(rf, host_etc_fd, etc, name, DT_UNKNOWN, 0);
	setfsuid(0);
	setfsgid(0);
	if ((uid_t)setfsuid((uid_t)-1) != 0)
		return fail(rf, -EPERM, "copy /etc: the file system ids stayed the guest's");
	return r;
}

/* Every python3* entry of the host's /etc (the interpreter's site config). */
static int python_etc(char ***out)
{
	/* guest-names: ok - the host's /etc */
	DIR *d = opendir("/etc");
	if (!d)
		return -errno;
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strncmp(de->d_name, "python3", 7) == 0 && strlen(de->d_name) <= 32)
			r = msb__strv_push(out, de->d_name);
	closedir(d);
	msb__strv_sort(*out);
	return r;
}

/* /etc/hosts and /etc/hostname for the host name `name`. */
static void name_files(const char *name, char hosts[256], char hostname[96])
{
	snprintf(hosts, 256, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		 name);
	snprintf(hostname, 96, "%s\n", name);
}

static int fill_etc(oci_rootfs *rf, int etc)
{
	char hosts[256], hostname[96];
	name_files(rf->cfg->hostname, hosts, hostname);
	const char *const files[][2] = {
		{"passwd", "root:x:0:0:root:/root:/bin/sh\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{"group", "root:x:0:\nnogroup:x:65534:\n"},
		{"hosts", hosts},
		{"hostname", hostname},
		{"resolv.conf", ""},
		{"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
				  "networks: files\nprotocols: files\nservices: files\n"
				  "ethers: files\nrpc: files\n"},
		{NULL, NULL},
	};
	int r;
	for (size_t i = 0; files[i][0]; i++)
		if ((r = write_owned(rf, etc, files[i][0], files[i][1])) < 0)
			return r;
	if (symlinkat("../proc/self/mounts", etc, "mtab") < 0 ||
	    fchownat(etc, "mtab", rf->cfg->uid_base, rf->cfg->gid_base, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(rf, -errno, "symlink /etc/mtab");
	/* guest-names: ok - the host's own /etc */
	_cleanup_close_ int host = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (host < 0)
		return fail(rf, -errno, "open the host's /etc");
	for (size_t i = 0; host_etc[i]; i++)
		if ((r = host_etc_entry(rf, etc, host, host_etc[i])) < 0)
			return r;
	_cleanup_strv_ char **py = NULL;
	if ((r = python_etc(&py)) < 0)
		return fail(rf, r, "list /etc");
	for (size_t i = 0; py && py[i]; i++)
		if ((r = host_etc_entry(rf, etc, host, py[i])) < 0)
			return r;
	return 0;
}

/* mkdir -p of a guest path (relative) in skel/, each level owned. */
static int skel_path(oci_rootfs *rf, int skel, const char *rel, mode_t mode)
{
	char path[1024];
	if (strlen(rel) >= sizeof(path))
		return fail(rf, -ENAMETOOLONG, "skeleton %s", rel);
	snprintf(path, sizeof(path), "%s", rel);
	_cleanup_close_ int dir = fcntl(skel, F_DUPFD_CLOEXEC, 3);
	if (dir < 0)
		return fail(rf, -errno, "skeleton");
	char *save = NULL;
	for (char *part = strtok_r(path, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		bool last = save == NULL || *save == '\0';
		int r = mkdir_owned(rf, dir, part, last ? mode : 0755);
		if (r < 0)
			return r;
		int next = openat(dir, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return fail(rf, -errno, "skeleton %s", rel);
		close(dir);
		dir = next;
	}
	return 0;
}

static int fill_skel(oci_rootfs *rf, int skel)
{
	static const struct {
		const char *path;
		mode_t mode;
	} common[] = {{"proc", 0555},
		      /* gVisor makes every mount point in the root before it
		       * mounts: /dev/shm and /dev/pts must exist there already, or
		       * they land in the writable layer (and in a fingerprint) */
		      {"dev", 0755},
		      {"dev/shm", 0755},
		      {"dev/pts", 0755},
		      {"sys", 0555},
		      {"tmp", 01777},
		      {"root", 0700},
		      {OCI_AGENT_DIR, 0755},
		      {NULL, 0}},
	  host[] = {{"usr", 0755},	{"etc", 0755},	{"run", 0755}, {"var", 0755},
		    {"var/tmp", 01777}, {"home", 0755}, {NULL, 0}};
	int r;
	for (size_t i = 0; common[i].path; i++)
		if ((r = skel_path(rf, skel, common[i].path, common[i].mode)) < 0)
			return r;
	if ((r = skel_path(rf, skel, rf->cfg->work_dir + 1, 0755)) < 0)
		return r;
	/* The agent binary's mount point. */
	_cleanup_close_ int adir =
		openat(skel, OCI_AGENT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int afd = adir < 0 ? -1
			   : openat(adir, OCI_AGENT_NAME,
				    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0555);
	if (afd < 0)
		return fail(rf, -errno, "skeleton: the agent's mount point");
	r = fchown(afd, rf->cfg->uid_base, rf->cfg->gid_base) < 0 || fchmod(afd, 0555) < 0 ? -errno
											   : 0;
	close(afd);
	if (r < 0)
		return fail(rf, r, "skeleton: the agent's mount point");
	if (rf->cfg->image != MSB_NS_IMAGE_HOST)
		return 0;
	for (size_t i = 0; host[i].path; i++)
		if ((r = skel_path(rf, skel, host[i].path, host[i].mode)) < 0)
			return r;
	bool bind;
	for (size_t i = 0; host_top[i]; i++) {
		char src[32];
		snprintf(src, sizeof(src), "/%s", host_top[i]);
		if ((r = stub(rf, skel, host_top[i], src, &bind)) < 0)
			return r;
	}
	_cleanup_close_ int etc =
		openat(skel, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return fail(rf, -errno, "skeleton: open /etc");
	return fill_etc(rf, etc);
}

/* Replace the contents of skel's etc/NAME in place (the same inode: the
 * overlay keeps the lower file it looked up). */
static int rewrite_etc(oci_rootfs *rf, int etc, const char *name, const char *text)
{
	_cleanup_close_ int fd = openat(etc, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(rf, -errno, "rewrite /etc/%s", name);
	size_t len = strlen(text);
	while (len > 0) {
		ssize_t w = write(fd, text, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(rf, w < 0 ? -errno : -EIO, "rewrite /etc/%s", name);
		text += w;
		len -= (size_t)w;
	}
	return 0;
}

int oci_rootfs_rename_host(oci_rootfs *rf, const char *hostname)
{
	if (rf->layer_fd < 0)
		return fail(rf, -EBADF, "the root is not built");
	if (rf->cfg->image != MSB_NS_IMAGE_HOST)
		return 0; /* an image's /etc is its own */
	_cleanup_close_ int etc =
		openat(rf->layer_fd, "skel/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return fail(rf, -errno, "skeleton: open /etc");
	char hosts[256], line[96];
	name_files(hostname, hosts, line);
	int r = rewrite_etc(rf, etc, "hostname", line);
	return r < 0 ? r : rewrite_etc(rf, etc, "hosts", hosts);
}

int oci_rootfs_host_binds(bool with_etc, char ***out)
{
	_cleanup_strv_ char **v = NULL;
	int r = msb__strv_push(&v, "/usr");
	struct stat st;
	for (size_t i = 0; r == 0 && host_top[i]; i++) {
		char src[32];
		snprintf(src, sizeof(src), "/%s", host_top[i]);
		/* guest-names: ok - the host's own entries */
		if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode))
			r = msb__strv_push(&v, src);
	}
	_cleanup_strv_ char **py = NULL;
	if (r == 0 && with_etc)
		r = python_etc(&py);
	for (size_t i = 0; r == 0 && with_etc && host_etc[i]; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/etc/%s", host_etc[i]);
		/* guest-names: ok - the host's own entries */
		if (lstat(src, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			r = msb__strv_push(&v, src);
	}
	for (size_t i = 0; r == 0 && py && py[i]; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/etc/%s", py[i]);
		/* guest-names: ok - the host's own entries */
		if (lstat(src, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			r = msb__strv_push(&v, src);
	}
	if (r < 0)
		return r;
	*out = TAKE_PTR(v);
	return 0;
}

/* ---- the overlay --------------------------------------------------------------- */

static int mount_overlay(oci_rootfs *rf, int layer)
{
	const msb_ns_config *cfg = rf->cfg;
	_cleanup_strv_ char **lowers = NULL;
	int r = 0;
	if (cfg->image == MSB_NS_IMAGE_DIR)
		r = msb__strv_push(&lowers, cfg->image_path);
	for (size_t i = 0; r == 0 && cfg->image == MSB_NS_IMAGE_OCI && i < cfg->n_layers; i++)
		r = msb__strv_push(&lowers, cfg->layers[i]);
	_cleanup_free_ char *skel = msb__asprintf("/proc/self/fd/%d/skel", layer);
	_cleanup_free_ char *upper = msb__asprintf("/proc/self/fd/%d/upper", layer);
	_cleanup_free_ char *work = msb__asprintf("/proc/self/fd/%d/work", layer);
	if (r < 0 || !skel || !upper || !work || msb__strv_push(&lowers, skel) < 0)
		return fail(rf, -ENOMEM, "overlay");
	size_t n = 0;
	while (lowers[n])
		n++;
	/* One "lowerdir" when it fits fsconfig's 256-byte strings and no path
	 * holds the separators; else one "lowerdir+" each (kernel 6.8+). */
	_cleanup_free_ char *joined = msb__strv_join(lowers, ":");
	bool one = joined && strlen(joined) < 256;
	for (size_t i = 0; one && i < n; i++)
		if (strchr(lowers[i], ':') || strchr(lowers[i], ','))
			one = false;
	struct fs_opt *opts = calloc(n + 5, sizeof(*opts));
	if (!opts || !joined) {
		free(opts);
		return fail(rf, -ENOMEM, "overlay");
	}
	size_t k = 0;
	if (one)
		opts[k++] = (struct fs_opt){"lowerdir", joined};
	else
		for (size_t i = 0; i < n; i++)
			opts[k++] = (struct fs_opt){"lowerdir+", lowers[i]};
	opts[k++] = (struct fs_opt){"upperdir", upper};
	opts[k++] = (struct fs_opt){"workdir", work};
	/* OCI layers mark opaque directories with user.overlay.opaque. */
	opts[k++] = (struct fs_opt){"userxattr", NULL};
	r = new_mount(rf, "overlay", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, rf->dfd,
		      OCI_STATE_ROOTFS, NULL);
	free(opts);
	return r;
}

int oci_rootfs_build(oci_rootfs *rf)
{
	const msb_ns_config *cfg = rf->cfg;
	rf->err[0] = '\0';
	static const char *const points[] = {OCI_STATE_LAYER, OCI_STATE_ROOTFS, OCI_STATE_SHM,
					     NULL};
	for (size_t i = 0; points[i]; i++)
		if (mkdirat(rf->dfd, points[i], 0700) < 0 && errno != EEXIST)
			return fail(rf, -errno, "mkdir %s", points[i]);

	char size[32];
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)tmpfs_size(cfg, cfg->rootfs_size, 2, 1u << 20));
	struct fs_opt lopts[] = {{"size", size}, {"mode", "0755"}, {NULL, NULL}};
	int r = new_mount(rf, "tmpfs", lopts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, rf->dfd,
			  OCI_STATE_LAYER, &rf->layer_fd);
	if (r < 0)
		return r;
	if ((r = mkdir_owned(rf, rf->layer_fd, MSB_NS_LAYER_UPPER, 0755)) < 0 ||
	    (r = mkdir_owned(rf, rf->layer_fd, "skel", 0755)) < 0)
		return r;
	if (mkdirat(rf->layer_fd, "work", 0700) < 0)
		return fail(rf, -errno, "mkdir the overlay's work dir");
	_cleanup_close_ int skel =
		openat(rf->layer_fd, "skel", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (skel < 0)
		return fail(rf, -errno, "open skel");
	if ((r = fill_skel(rf, skel)) < 0)
		return r;
	if ((r = mount_overlay(rf, rf->layer_fd)) < 0)
		return r;

	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)tmpfs_size(cfg, cfg->shm_size, 8, 1u << 16));
	struct fs_opt sopts[] = {{"size", size}, {"mode", "1777"}, {NULL, NULL}};
	r = new_mount(rf, "tmpfs", sopts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
		      rf->dfd, OCI_STATE_SHM, &rf->shm_fd);
	if (r < 0)
		return r;
	if (fchown(rf->shm_fd, cfg->uid_base, cfg->gid_base) < 0 || fchmod(rf->shm_fd, 01777) < 0)
		return fail(rf, -errno, "own /dev/shm");
	return 0;
}

int oci_rootfs_private_tmpfs(int dfd, const char *name, int *fd, char *err, size_t size)
{
	oci_rootfs rf = OCI_ROOTFS_INIT(NULL, dfd);
	if (mkdirat(dfd, name, 0711) < 0 && errno != EEXIST) {
		int r = -errno;
		snprintf(err, size, "mkdir %s: %s", name, strerror(errno));
		return r;
	}
	static const struct fs_opt opts[] = {
		{"size", "1m"}, {"nr_inodes", "4096"}, {"mode", "0711"}, {NULL, NULL}};
	int r = new_mount(&rf, "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, dfd, name, fd);
	if (r < 0)
		snprintf(err, size, "%s", rf.err);
	return r;
}

void oci_rootfs_private_release(int dfd, const char *name)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dfd, name);
	while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
}

void oci_rootfs_teardown(oci_rootfs *rf, bool unmount)
{
	if (rf->layer_fd >= 0)
		close(rf->layer_fd);
	if (rf->shm_fd >= 0)
		close(rf->shm_fd);
	rf->layer_fd = rf->shm_fd = -1;
	if (!unmount)
		return;
	/* The overlay first: it holds the layer's tmpfs. */
	static const char *const points[] = {OCI_STATE_ROOTFS, OCI_STATE_LAYER, OCI_STATE_SHM,
					     NULL};
	for (size_t i = 0; points[i]; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", rf->dfd, points[i]);
		/* Unmounts a mount of our own namespace, never a guest's name: the
		 * mount points are the shim's. */
		while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			;
	}
}
