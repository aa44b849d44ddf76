/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's root filesystem, built by the child inside its own user and
 * mount namespaces with the new mount API (fsopen/fsmount, open_tree,
 * mount_setattr, move_mount): every mount target is an fd resolved with
 * openat2(RESOLVE_IN_ROOT) below the new root, so a symlink in a `dir:` image
 * cannot aim a mount outside it. Nothing here is visible to the host: the
 * child's mount namespace was made private first and the old root is
 * detached after pivot_root.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "backends/ns/boundary/boundary_int.h"
#include "proto/proto.h"
#include "util/syscalls.h"

struct fs_opt {
	const char *key;
	const char *value; /* NULL: a flag */
};

static int fail(msb_ns_rootfs *rf, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(msb_ns_rootfs *rf, int r, const char *fmt, ...)
{
	char what[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	msb_ns__fmt_err(rf->err, sizeof(rf->err), r, "%s", what);
	return r < 0 ? r : -EIO;
}

/* openat2 below `rootfd`, symlinks resolved as if rootfd were "/". */
static int open_in_root(int rootfd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	return msb__sys_openat2(rootfd, rel[0] ? rel : ".", &how);
}

/* mkdir -p of `rel` (relative, '/'-separated) below rootfd; returns an
 * O_PATH fd of the directory. Existing components are kept as they are. */
static int mkdir_in_root(int rootfd, const char *rel, mode_t mode)
{
	char path[1024];
	size_t n = strlen(rel);
	if (n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, rel, n + 1);
	for (size_t i = 0; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		char saved = path[i];
		path[i] = '\0';
		char *slash = strrchr(path, '/');
		const char *name = slash ? slash + 1 : path;
		_cleanup_close_ int parent = -1;
		if (slash) {
			*slash = '\0';
			parent = open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
			*slash = '/';
			if (parent < 0)
				return parent;
		}
		if (mkdirat(slash ? parent : rootfd, name, mode) < 0 && errno != EEXIST)
			return -errno;
		path[i] = saved;
	}
	return open_in_root(rootfd, rel, O_PATH | O_DIRECTORY);
}

/* Create an empty regular file to bind a file over; returns an O_PATH fd. */
static int touch_in(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int write_in(int dirfd, const char *name, const char *content, mode_t mode)
{
	_cleanup_close_ int fd =
		openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	size_t len = strlen(content);
	while (len > 0) {
		ssize_t w = write(fd, content, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		content += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The kernel's own words about a failed fs context ("e overlayfs: ..."). */
static void fs_log(int fsfd, char *buf, size_t size)
{
	buf[0] = '\0';
	ssize_t n = read(fsfd, buf, size - 1);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
}

/* A fresh filesystem mounted on target_fd; *mnt_out (optional) receives the
 * mount's root fd. */
static int new_mount(msb_ns_rootfs *rf, const char *fstype, const struct fs_opt *opts,
		     unsigned attrs, int target_dirfd, const char *target_path, int *mnt_out,
		     const char *what)
{
	char log[160];
	_cleanup_close_ int fs = msb__sys_fsopen(fstype, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(rf, fs, "%s: fsopen %s", what, fstype);
	for (size_t i = 0; opts && opts[i].key; i++) {
		int r = opts[i].value
				? msb__sys_fsconfig(fs, FSCONFIG_SET_STRING, opts[i].key,
						    opts[i].value, 0)
				: msb__sys_fsconfig(fs, FSCONFIG_SET_FLAG, opts[i].key, NULL, 0);
		if (r < 0) {
			fs_log(fs, log, sizeof(log));
			return fail(rf, r, "%s: %s option %s%s%s", what, fstype, opts[i].key,
				    log[0] ? " " : "", log);
		}
	}
	int r = msb__sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
	if (r < 0) {
		fs_log(fs, log, sizeof(log));
		return fail(rf, r, "%s: create %s%s%s", what, fstype, log[0] ? " " : "", log);
	}
	_cleanup_close_ int mnt = msb__sys_fsmount(fs, FSMOUNT_CLOEXEC, attrs);
	if (mnt < 0)
		return fail(rf, mnt, "%s: fsmount %s", what, fstype);
	unsigned mflags = MOVE_MOUNT_F_EMPTY_PATH | (target_path[0] ? 0 : MOVE_MOUNT_T_EMPTY_PATH);
	r = msb__sys_move_mount(mnt, "", target_dirfd, target_path, mflags);
	if (r < 0)
		return fail(rf, r, "%s: attach %s", what, fstype);
	if (mnt_out)
		*mnt_out = TAKE_FD(mnt);
	return 0;
}

/* Bind src (dirfd + path, or the fd itself with path "") onto target_fd
 * with `attrs` set on the whole (recursive) copy before it is attached. */
static int bind_mount(msb_ns_rootfs *rf, int src_dirfd, const char *src_path, unsigned attrs,
		      int target_fd, const char *what)
{
	unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE;
	if (!src_path[0])
		flags |= AT_EMPTY_PATH;
	_cleanup_close_ int tree = msb__sys_open_tree(src_dirfd, src_path, flags);
	if (tree < 0)
		return fail(rf, tree, "%s: clone mount", what);
	if (attrs) {
		struct mount_attr attr = {.attr_set = attrs};
		int r = msb__sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr);
		if (r < 0)
			return fail(rf, r, "%s: set mount attributes", what);
	}
	int r = msb__sys_move_mount(tree, "", target_fd, "",
				    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	if (r < 0)
		return fail(rf, r, "%s: attach", what);
	return 0;
}

/* Read-only bind of a path onto itself (below the new proc, say). */
static int make_readonly(msb_ns_rootfs *rf, int dirfd, const char *path, const char *what)
{
	_cleanup_close_ int target = openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0) {
		if (errno == ENOENT)
			return 0;
		return fail(rf, -errno, "%s: open", what);
	}
	return bind_mount(rf, target, "",
			  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				  MOUNT_ATTR_NOEXEC,
			  target, what);
}

/* Hide a path: /dev/null over a file, an empty read-only tmpfs over a
 * directory. Absent paths are fine. */
static int mask_path(msb_ns_rootfs *rf, int dirfd, const char *path)
{
	_cleanup_close_ int target = openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0) {
		if (errno == ENOENT)
			return 0;
		return fail(rf, -errno, "mask %s: open", path);
	}
	struct stat st;
	if (fstat(target, &st) < 0)
		return fail(rf, -errno, "mask %s: stat", path);
	if (S_ISDIR(st.st_mode)) {
		static const struct fs_opt opts[] = {
			{"size", "4k"}, {"nr_inodes", "1"}, {"mode", "0555"}, {NULL, NULL}};
		return new_mount(rf, "tmpfs", opts,
				 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					 MOUNT_ATTR_NOEXEC,
				 target, "", NULL, path);
	}
	return bind_mount(rf, AT_FDCWD, "/dev/null",
			  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, target, path);
}

/* The usual container runtime defaults. */
static const char *const proc_masked[] = {
	"acpi",	      "asound",	     "kcore",	    "keys", "latency_stats",
	"timer_list", "timer_stats", "sched_debug", "scsi", NULL,
};
static const char *const proc_readonly[] = {
	"bus", "fs", "irq", "sys", "sysrq-trigger", NULL,
};
static const char *const sys_masked[] = {
	"firmware",
	"devices/virtual/powercap",
	NULL,
};

static int setup_proc(msb_ns_rootfs *rf, int rootfd)
{
	_cleanup_close_ int target = mkdir_in_root(rootfd, "proc", 0555);
	if (target < 0)
		return fail(rf, target, "mkdir /proc");
	_cleanup_close_ int proc = -1;
	int r = new_mount(rf, "proc", NULL,
			  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, target, "",
			  &proc, "/proc");
	if (r < 0)
		return r;
	for (size_t i = 0; proc_masked[i]; i++)
		if ((r = mask_path(rf, proc, proc_masked[i])) < 0)
			return r;
	for (size_t i = 0; proc_readonly[i]; i++)
		if ((r = make_readonly(rf, proc, proc_readonly[i], proc_readonly[i])) < 0)
			return r;
	return 0;
}

static int setup_sys(msb_ns_rootfs *rf, int rootfd)
{
	_cleanup_close_ int target = mkdir_in_root(rootfd, "sys", 0555);
	if (target < 0)
		return fail(rf, target, "mkdir /sys");
	_cleanup_close_ int sys = -1;
	int r = new_mount(rf, "sysfs", NULL,
			  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				  MOUNT_ATTR_NOEXEC,
			  target, "", &sys, "/sys");
	if (r < 0)
		return r;
	for (size_t i = 0; sys_masked[i]; i++)
		if ((r = mask_path(rf, sys, sys_masked[i])) < 0)
			return r;
	return 0;
}

/*
 * Pages in the sandbox's tmpfs mounts are charged to its memory cgroup but
 * belong to no process. If the tmpfs mounts could hold the whole memory
 * limit, a workload filling them would leave the OOM killer nothing to kill
 * but live processes - the agent among them - and every later exec would die
 * at once. So under a memory limit the writable layer may hold at most half
 * of it and /dev/shm an eighth: a fill ends in ENOSPC, and what remains for
 * processes makes the workload's own largest process the OOM killer's pick.
 */
static uint64_t tmpfs_size(const msb_ns_rootfs *rf, uint64_t asked, unsigned share, uint64_t floor)
{
	uint64_t mem = rf->cfg->memory_max;
	if (!mem || asked <= mem / share)
		return asked;
	return mem / share > floor ? mem / share : floor;
}

static int setup_dev(msb_ns_rootfs *rf, int rootfd)
{
	static const char *const nodes[] = {"null",    "zero", "full", "random",
					    "urandom", "tty",  NULL};
	static const char *const links[][2] = {
		{"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
		{"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
		{"ptmx", "pts/ptmx"},	       {NULL, NULL},
	};
	_cleanup_close_ int target = mkdir_in_root(rootfd, "dev", 0755);
	if (target < 0)
		return fail(rf, target, "mkdir /dev");
	static const struct fs_opt dev_opts[] = {
		{"size", "64k"}, {"nr_inodes", "64"}, {"mode", "0755"}, {NULL, NULL}};
	_cleanup_close_ int dev = -1;
	int r = new_mount(rf, "tmpfs", dev_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, target, "",
			  &dev, "/dev");
	if (r < 0)
		return r;
	for (size_t i = 0; nodes[i]; i++) {
		char src[32];
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		_cleanup_close_ int node = touch_in(dev, nodes[i]);
		if (node < 0)
			return fail(rf, node, "create /dev/%s", nodes[i]);
		if ((r = bind_mount(rf, AT_FDCWD, src, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, node,
				    src)) < 0)
			return r;
	}
	for (size_t i = 0; links[i][0]; i++)
		if (symlinkat(links[i][1], dev, links[i][0]) < 0)
			return fail(rf, -errno, "symlink /dev/%s", links[i][0]);

	if (mkdirat(dev, "pts", 0755) < 0)
		return fail(rf, -errno, "mkdir /dev/pts");
	_cleanup_close_ int pts = openat(dev, "pts", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pts < 0)
		return fail(rf, -errno, "open /dev/pts");
	struct fs_opt pts_opts[] = {
		{"newinstance", NULL}, {"ptmxmode", "0666"}, {"mode", "0620"},
		{"gid", "5"},	       {NULL, NULL},
	};
	if (rf->single_id) /* gid 5 (tty) exists only with a range mapping */
		pts_opts[3] = (struct fs_opt){NULL, NULL};
	r = new_mount(rf, "devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, pts, "", NULL,
		      "/dev/pts");
	if (r < 0)
		return r;

	if (mkdirat(dev, "shm", 01777) < 0)
		return fail(rf, -errno, "mkdir /dev/shm");
	_cleanup_close_ int shm = openat(dev, "shm", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (shm < 0)
		return fail(rf, -errno, "open /dev/shm");
	char size[32];
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)tmpfs_size(rf, rf->cfg->shm_size, 8, 1u << 16));
	struct fs_opt shm_opts[] = {{"size", size}, {"mode", "1777"}, {NULL, NULL}};
	r = new_mount(rf, "tmpfs", shm_opts,
		      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, shm, "",
		      &rf->shm_fd, "/dev/shm");
	if (r < 0)
		return r;
	/* /dev itself is complete: read-only, so that the only writable storage
	 * is what the host can see (the upper dir, /dev/shm, the work dir). */
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	r = msb__sys_mount_setattr(dev, "", AT_EMPTY_PATH, &ro);
	return r < 0 ? fail(rf, r, "/dev: make read-only") : 0;
}

static int setup_work(msb_ns_rootfs *rf, int rootfd)
{
	_cleanup_close_ int target = mkdir_in_root(rootfd, rf->cfg->work_dir + 1, 0755);
	if (target < 0)
		return fail(rf, target, "mkdir %s", rf->cfg->work_dir);
	return bind_mount(rf, rf->work_fd, "", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, target,
			  "work dir");
}

/* ---- the root: an overlay for every image ------------------------------------
 *
 * The writable layer is a tmpfs (writable_bytes) mounted on the staging
 * directory, holding:
 *   upper/  the overlay's upper directory: exactly what changed since creation
 *   work/   the overlay's work directory
 *   skel/   the bottom lower layer: the mount points the boundary needs (and,
 *           for `host`, the synthesized tree), so that building the root never
 *           writes into upper/
 *   root/   where the overlay is mounted
 * Lower layers, top first: the image's (`dir:` PATH, or the unpacked `oci`
 * layers), then skel/. An image's own entries win over skel/'s. The tmpfs is
 * kept (rf->layer_fd) so that the shim can show upper/ to the host.
 */

static const char *const host_top[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32", NULL};

/* Non-secret host configuration the host's programs need: the alternatives
 * symlinks, the dynamic linker's cache and configuration, Python's site
 * configuration. Bound read-only when present. */
static const char *const host_etc[] = {"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
				       NULL};

enum host_phase {
	PHASE_STUB, /* in skel/: symlinks as the host has them, empty mount points */
	PHASE_BIND, /* in the overlay: the read-only binds onto those mount points */
};

static int host_entry(msb_ns_rootfs *rf, enum host_phase phase, int dirfd, const char *name,
		      const char *src)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return errno == ENOENT ? 0 : fail(rf, -errno, "stat %s", src);
	if (!S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;
	if (phase == PHASE_BIND) {
		if (S_ISLNK(st.st_mode))
			return 0;
		_cleanup_close_ int target = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0)
			return fail(rf, -errno, "open the mount point of %s", src);
		return bind_mount(rf, AT_FDCWD, src,
				  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, target,
				  src);
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail(rf, -errno, "readlink %s", src);
		target[n] = '\0';
		if (symlinkat(target, dirfd, name) < 0)
			return fail(rf, -errno, "symlink %s", src);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdirat(dirfd, name, 0755) < 0)
			return fail(rf, -errno, "mkdir %s", src);
		return 0;
	}
	_cleanup_close_ int fd = touch_in(dirfd, name);
	return fd < 0 ? fail(rf, fd, "create %s", src) : 0;
}

static int etc_entries(msb_ns_rootfs *rf, enum host_phase phase, int etc)
{
	int r;
	for (size_t i = 0; host_etc[i]; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/etc/%s", host_etc[i]);
		if ((r = host_entry(rf, phase, etc, host_etc[i], src)) < 0)
			return r;
	}
	/* os-release and localtime are symlinks into /usr on Debian; python3*
	 * holds the interpreter's site configuration. */
	if ((r = host_entry(rf, phase, etc, "os-release", "/etc/os-release")) < 0)
		return r;
	if ((r = host_entry(rf, phase, etc, "localtime", "/etc/localtime")) < 0)
		return r;
	DIR *d = opendir("/etc");
	if (!d)
		return fail(rf, -errno, "open /etc");
	struct dirent *de;
	r = 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "python3", 7) != 0 || strlen(de->d_name) > 32)
			continue;
		char src[64];
		snprintf(src, sizeof(src), "/etc/%s", de->d_name);
		if ((r = host_entry(rf, phase, etc, de->d_name, src)) < 0)
			break;
	}
	closedir(d);
	return r;
}

static int write_etc(msb_ns_rootfs *rf, int etc)
{
	char hosts[256];
	char hostname[96];
	/* The agent writes the same when it is given another name (IDENTITY). */
	snprintf(hosts, sizeof(hosts), MSB_PROTO_ETC_HOSTS_FMT, rf->cfg->hostname);
	snprintf(hostname, sizeof(hostname), "%s\n", rf->cfg->hostname);
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
	for (size_t i = 0; files[i][0]; i++) {
		int r = write_in(etc, files[i][0], files[i][1], 0644);
		if (r < 0)
			return fail(rf, r, "write /etc/%s", files[i][0]);
	}
	if (symlinkat("../proc/self/mounts", etc, "mtab") < 0)
		return fail(rf, -errno, "symlink /etc/mtab");
	return etc_entries(rf, PHASE_STUB, etc);
}

static int skel_dir(msb_ns_rootfs *rf, int skel, const char *path, mode_t mode)
{
	_cleanup_close_ int fd = mkdir_in_root(skel, path, 0755);
	if (fd < 0)
		return fail(rf, fd, "skeleton: mkdir /%s", path);
	/* mkdir honours the umask; the sticky bit needs an explicit chmod. */
	if (fchmodat(skel, path, mode, 0) < 0)
		return fail(rf, -errno, "skeleton: chmod /%s", path);
	return 0;
}

/* The bottom lower layer: mount points for every image; the whole
 * synthesized tree (minus the binds) for `host`. */
static int fill_skel(msb_ns_rootfs *rf, int skel)
{
	static const struct {
		const char *path;
		mode_t mode;
	} common[] = {{"proc", 0555}, {"dev", 0755},  {"sys", 0555},
		      {"tmp", 01777}, {"root", 0700}, {NULL, 0}},
	  host[] = {{"usr", 0755},	{"etc", 0755},	{"run", 0755}, {"var", 0755},
		    {"var/tmp", 01777}, {"home", 0755}, {NULL, 0}};
	int r;
	for (size_t i = 0; common[i].path; i++)
		if ((r = skel_dir(rf, skel, common[i].path, common[i].mode)) < 0)
			return r;
	if ((r = skel_dir(rf, skel, rf->cfg->work_dir + 1, 0755)) < 0)
		return r;
	if (rf->cfg->image != MSB_NS_IMAGE_HOST)
		return 0;
	for (size_t i = 0; host[i].path; i++)
		if ((r = skel_dir(rf, skel, host[i].path, host[i].mode)) < 0)
			return r;
	for (size_t i = 0; host_top[i]; i++) {
		char src[32];
		snprintf(src, sizeof(src), "/%s", host_top[i]);
		if ((r = host_entry(rf, PHASE_STUB, skel, host_top[i], src)) < 0)
			return r;
	}
	_cleanup_close_ int etc =
		openat(skel, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return fail(rf, -errno, "skeleton: open /etc");
	if ((r = write_etc(rf, etc)) < 0)
		return r;
	rf->etc_fd = TAKE_FD(etc);
	return 0;
}

/* `host`: the host's /usr, /bin, ... and /etc entries bound read-only onto
 * the mount points skel/ provides. */
static int bind_host(msb_ns_rootfs *rf, int root)
{
	_cleanup_close_ int usr =
		openat(root, "usr", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (usr < 0)
		return fail(rf, -errno, "open /usr");
	int r = bind_mount(rf, AT_FDCWD, "/usr",
			   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, usr, "/usr");
	if (r < 0)
		return r;
	for (size_t i = 0; host_top[i]; i++) {
		char src[32];
		snprintf(src, sizeof(src), "/%s", host_top[i]);
		if ((r = host_entry(rf, PHASE_BIND, root, host_top[i], src)) < 0)
			return r;
	}
	_cleanup_close_ int etc =
		openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return fail(rf, -errno, "open /etc");
	return etc_entries(rf, PHASE_BIND, etc);
}

/* "lowerdir": one option when the list fits fsconfig's 256-byte strings,
 * else one "lowerdir+" per layer (kernels that have it: 6.8 and later). */
#define MAX_LOWERS (MSB_NS_MAX_LAYERS + 1)

static int mount_overlay(msb_ns_rootfs *rf, int upper, int work, int skel, int target, int *root)
{
	int lowers[MAX_LOWERS];
	size_t n = 0;
	if (rf->cfg->image == MSB_NS_IMAGE_DIR)
		lowers[n++] = rf->image_fd;
	for (size_t i = 0; rf->cfg->image == MSB_NS_IMAGE_OCI && i < rf->cfg->n_layers; i++)
		lowers[n++] = rf->layer_fds[i];
	lowers[n++] = skel;

	char paths[MAX_LOWERS][24];
	char joined[256];
	size_t len = 0;
	bool fits = true;
	for (size_t i = 0; i < n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/proc/self/fd/%d", lowers[i]);
		int w = snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? ":" : "",
				 paths[i]);
		if (w < 0 || (size_t)w >= sizeof(joined) - len)
			fits = false;
		else
			len += (size_t)w;
	}
	char upath[24], wpath[24];
	snprintf(upath, sizeof(upath), "/proc/self/fd/%d", upper);
	snprintf(wpath, sizeof(wpath), "/proc/self/fd/%d", work);
	struct fs_opt opts[MAX_LOWERS + 4];
	size_t k = 0;
	if (fits) {
		opts[k++] = (struct fs_opt){"lowerdir", joined};
	} else {
		for (size_t i = 0; i < n; i++)
			opts[k++] = (struct fs_opt){"lowerdir+", paths[i]};
	}
	opts[k++] = (struct fs_opt){"upperdir", upath};
	opts[k++] = (struct fs_opt){"workdir", wpath};
	/* user.* xattrs: the only kind a user-namespace mount can write. */
	opts[k++] = (struct fs_opt){"userxattr", NULL};
	opts[k] = (struct fs_opt){NULL, NULL};
	return new_mount(rf, "overlay", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, target, "",
			 root, "overlay root");
}

static int build_root(msb_ns_rootfs *rf, int *rootfd_out)
{
	char size[32];
	snprintf(size, sizeof(size), "%llu",
		 (unsigned long long)tmpfs_size(rf, rf->cfg->rootfs_size, 2, 1u << 20));
	struct fs_opt topts[] = {{"size", size}, {"mode", "0755"}, {NULL, NULL}};
	_cleanup_close_ int layer = -1;
	/* Declared before the first goto: a jump past a cleanup variable's
	 * initialisation would close an indeterminate fd. */
	_cleanup_close_ int root = -1;
	int r = new_mount(rf, "tmpfs", topts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, rf->stage_fd,
			  "", &layer, "writable layer tmpfs");
	if (r < 0)
		return r;
	static const char *const sub[] = {MSB_NS_LAYER_UPPER, "work", "skel", "root", NULL};
	int fds[4] = {-1, -1, -1, -1};
	for (size_t i = 0; sub[i]; i++) {
		if (mkdirat(layer, sub[i], 0755) < 0 ||
		    (fds[i] = openat(layer, sub[i], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
			r = fail(rf, -errno, "writable layer: %s dir", sub[i]);
			goto close_fds;
		}
	}
	if ((r = fill_skel(rf, fds[2])) < 0)
		goto close_fds;
	if ((r = mount_overlay(rf, fds[0], fds[1], fds[2], fds[3], &root)) < 0)
		goto close_fds;
	if (rf->cfg->image == MSB_NS_IMAGE_HOST && (r = bind_host(rf, root)) < 0)
		goto close_fds;
	*rootfd_out = TAKE_FD(root);
	rf->layer_fd = TAKE_FD(layer);
	r = 0;
close_fds:
	for (size_t i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

static int open_checked(msb_ns_rootfs *rf, const char *path, dev_t dev, ino_t ino, const char *what)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail(rf, -errno, "open %s `%s`", what, path);
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		return fail(rf, -ESTALE, "%s `%s` changed under us", what, path);
	}
	return fd;
}

int msb_ns__rootfs_open(msb_ns_rootfs *rf)
{
	rf->err[0] = '\0';
	rf->stage_fd = open_checked(rf, rf->stage_path, rf->stage_dev, rf->stage_ino, "state dir");
	if (rf->stage_fd < 0)
		return rf->stage_fd;
	rf->work_fd = open_checked(rf, rf->work_path, rf->work_dev, rf->work_ino, "work dir");
	if (rf->work_fd < 0)
		return rf->work_fd;
	if (rf->cfg->image == MSB_NS_IMAGE_DIR) {
		rf->image_fd = open_checked(rf, rf->cfg->image_path, rf->image_dev, rf->image_ino,
					    "image");
		if (rf->image_fd < 0)
			return rf->image_fd;
	}
	for (size_t i = 0; rf->cfg->image == MSB_NS_IMAGE_OCI && i < rf->cfg->n_layers; i++) {
		rf->layer_fds[i] = open_checked(rf, rf->cfg->layers[i], rf->layer_dev[i],
						rf->layer_ino[i], "image layer");
		if (rf->layer_fds[i] < 0)
			return rf->layer_fds[i];
	}
	return 0;
}

int msb_ns__rootfs_build(msb_ns_rootfs *rf)
{
	rf->err[0] = '\0';
	_cleanup_close_ int root = -1;
	int r = build_root(rf, &root);
	if (r < 0)
		return r;
	if ((r = setup_proc(rf, root)) < 0 || (r = setup_dev(rf, root)) < 0 ||
	    (r = setup_sys(rf, root)) < 0 || (r = setup_work(rf, root)) < 0)
		return r;

	/* pivot_root(".", "."): the old root ends up stacked on the new one and
	 * is detached right away, so no path to the host's tree remains. */
	if (fchdir(root) < 0)
		return fail(rf, -errno, "chdir to the new root");
	if ((r = msb__sys_pivot_root(".", ".")) < 0)
		return fail(rf, r, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return fail(rf, -errno, "detach the old root");
	if (chdir("/") < 0)
		return fail(rf, -errno, "chdir /");
	return 0;
}
