/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fingerprint and reset of an `ns` sandbox, served on the host.
 *
 * Fingerprint. Every writable place of a sandbox is one the host can read
 * without asking the guest: the overlay's upper directory and /dev/shm (the
 * shim holds both tmpfs mounts and hands them over on its control socket),
 * and the storage base `<state>/work`. Each is walked with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) and never follows a link the guest made. The init's mount
 * table must show no other writable storage (18.15: refuse what the diff
 * cannot see). Processes are read from the host's /proc: every process of
 * the sandbox's pid namespace (or one nested in it) but the init and the
 * workloads' reaper.
 *
 * Reset. The shim restarts the sandbox from its configuration (msb-shim's
 * "reset"), under the state directory's lock.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>

#include "backends/ns/boundary/boundary.h"
#include "ns_int.h"
#include "ns_snapshot.h"
#include "util/fault.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define CONTROL_TIMEOUT 10.0
#define MOUNTINFO_MAX (4u << 20)
#define CMDLINE_MAX 4096
#define STATUS_MAX (64u << 10)

/* ---- the shim's control socket ------------------------------------------------ */

int msb_ns__control(int dfd, const char *dir, const char *req, int64_t deadline, int fds[2],
		    char *reply, size_t size, msb_error **err)
{
	/* Through the directory's descriptor: the shim of this instance, never
	 * one that a later acquire started under the same name. */
	(void)dir;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd,
		 MSB_NS_STATE_CONTROL);
	_cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return msb__error_errno(err, errno, "ns: the shim's control socket");
	while (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && msb__now_ns() < deadline) {
			struct timespec ts = {0, 5000000};
			nanosleep(&ts, NULL);
			continue;
		}
		if (errno == ENOENT || errno == ECONNREFUSED)
			return msb_error_set(
				err, MSB_E_RUNTIME,
				"ns: the sandbox's shim does not answer (not running)");
		return msb__error_errno(err, errno, "ns: connect to the shim");
	}
	char line[64];
	int len = snprintf(line, sizeof(line), "%s\n", req);
	if (send(s, line, (size_t)len, MSG_NOSIGNAL) != len)
		return msb__error_errno(err, errno, "ns: send to the shim");

	size_t got = 0;
	int nfds = 0;
	while (got < size - 1 && !memchr(reply, '\n', got)) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0)
			return msb_error_set(err, MSB_E_TIMEOUT,
					     "ns: the shim did not answer `%s` in time", req);
		struct pollfd p = {.fd = s, .events = POLLIN};
		int pr = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(2 * sizeof(int))];
		} u;
		struct iovec iov = {.iov_base = reply + got, .iov_len = size - 1 - got};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf)};
		ssize_t r = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		for (struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm;
		     cm = CMSG_NXTHDR(&msg, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (fds && nfds < 2)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	reply[got] = '\0';
	char *nl = strchr(reply, '\n');
	if (!nl) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns: the shim closed the control connection without an "
				     "answer to `%s`",
				     req);
	}
	*nl = '\0';
	if (fds && strcmp(reply, "ok") == 0 && nfds != 2) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return msb_error_set(err, MSB_E_RUNTIME, "ns: the shim sent %d of 2 fds", nfds);
	}
	if (fds && strcmp(reply, "ok") != 0)
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	return 0;
}

/* ---- walking a writable tree -------------------------------------------------- */

static int open_dir_beneath(int base, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	return msb__sys_openat2(base, rel[0] ? rel : ".", &how);
}

/*
 * Every entry below `base`, as prefix + relative path. Directories are
 * opened from `base` by their relative path each time (one fd at a time);
 * one replaced by a link or removed meanwhile is reported, not entered.
 */
static int walk(int base, const char *prefix, msb_ns_strs *out, const char *what, msb_error **err)
{
	/* Each queued directory is also one of `out`'s paths: out's budget bounds it. */
	msb_ns_strs queue = {.max = SIZE_MAX, .max_bytes = SIZE_MAX, .max_len = SIZE_MAX};
	int r = msb_ns__strs_add(&queue, strdup(""));
	for (size_t qi = 0; r == 0 && qi < queue.n; qi++) {
		const char *rel = queue.v[qi];
		int fd = open_dir_beneath(base, rel);
		if (fd < 0) {
			if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
				continue;
			r = msb__error_errno(err, fd,
					     "ns fingerprint: cannot attest: cannot read %s `%s`",
					     what, rel[0] ? rel : ".");
			break;
		}
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			r = msb__error_errno(err, errno, "ns fingerprint: %s", what);
			break;
		}
		struct dirent *de;
		while (r == 0 && (de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			char *child = rel[0] ? msb__asprintf("%s/%s", rel, de->d_name)
					     : strdup(de->d_name);
			if (!child) {
				r = msb__error_nomem(err);
				break;
			}
			r = msb_ns__strs_add(out, msb__asprintf("%s%s", prefix, child));
			if (r < 0) {
				free(child);
				r = msb_ns__strs_refusal(err, r, out, "ns", "changed paths");
				break;
			}
			bool dir = de->d_type == DT_DIR;
			if (de->d_type == DT_UNKNOWN) {
				struct stat st;
				dir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
					      0 &&
				      S_ISDIR(st.st_mode);
			}
			if (dir) {
				if (msb_ns__strs_add(&queue, child) < 0) {
					r = msb__error_nomem(err);
					break;
				}
			} else {
				free(child);
			}
		}
		closedir(d);
	}
	msb_ns__strs_clear(&queue);
	return r;
}

/* ---- the mount table: no writable storage the walk does not cover ------------- */

static void unescape(char *s)
{
	char *w = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*w++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

static bool kernel_state_fs(const char *fstype)
{
	static const char *const kinds[] = {"proc",   "sysfs",	 "devpts", "mqueue",
					    "cgroup", "cgroup2", NULL};
	for (size_t i = 0; kinds[i]; i++)
		if (strcmp(fstype, kinds[i]) == 0)
			return true;
	return false;
}

static bool device_bind(const char *mp)
{
	static const char *const nodes[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
					    "/dev/urandom", "/dev/tty",	 NULL};
	for (size_t i = 0; nodes[i]; i++)
		if (strcmp(mp, nodes[i]) == 0)
			return true;
	return false;
}

static int check_mounts(pid_t init, const char *work_dir, msb_error **err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)init);
	_cleanup_free_ char *buf = NULL;
	/* guest-names: ok - /proc/PID/mountinfo: procfs, names the kernel makes */
	int r = msb__read_file_at(AT_FDCWD, path, MOUNTINFO_MAX, &buf, NULL);
	if (r < 0)
		return msb__error_errno(err, r,
					"ns fingerprint: cannot attest: read the mount table");
	int roots = 0, shms = 0, works = 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* id parent maj:min root mountpoint options [optional...] - fstype source super */
		char *f[6] = {NULL};
		char *p = line;
		for (int i = 0; i < 6; i++) {
			f[i] = p;
			char *sp = strchr(p, ' ');
			if (!sp) {
				f[i] = NULL;
				break;
			}
			*sp = '\0';
			p = sp + 1;
		}
		char *dash = strstr(p, " - ");
		if (!f[5] || !(dash || strncmp(p, "- ", 2) == 0))
			return msb_error_set(
				err, MSB_E_RUNTIME,
				"ns fingerprint: cannot attest: unreadable mount table");
		char *fstype = dash ? dash + 3 : p + 2;
		char *sp = strchr(fstype, ' ');
		if (sp)
			*sp = '\0';
		char *mp = f[4];
		unescape(mp);
		bool ro = strcmp(f[5], "ro") == 0 || strncmp(f[5], "ro,", 3) == 0;
		if (strcmp(mp, "/") == 0) {
			roots++;
			if (strcmp(fstype, "overlay") != 0)
				return msb_error_set(err, MSB_E_RUNTIME,
						     "ns fingerprint: cannot attest: the root is "
						     "`%s`, not the sandbox's overlay",
						     fstype);
			continue;
		}
		if (strcmp(mp, "/dev/shm") == 0 && strcmp(fstype, "tmpfs") == 0) {
			shms++;
			continue;
		}
		if (strcmp(mp, work_dir) == 0) {
			works++;
			continue;
		}
		if (ro || kernel_state_fs(fstype) || device_bind(mp))
			continue;
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns fingerprint: cannot attest: a writable `%s` mount at `%s` "
				     "is not seen by the fingerprint",
				     fstype, mp);
	}
	if (roots != 1 || shms > 1 || works > 1)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns fingerprint: cannot attest: a mount stacked on the root, "
				     "/dev/shm or the storage base");
	return 0;
}

/* ---- processes ---------------------------------------------------------------- */

struct ns_id {
	dev_t dev;
	ino_t ino;
};

static int ns_of(int procfd, const char *pid, const char *kind, struct ns_id *out)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/ns/%s", pid, kind);
	struct stat st;
	/* guest-names: ok - /proc/PID/ns/KIND: the namespace links are meant to be followed */
	if (fstatat(procfd, path, &st, 0) < 0)
		return -errno;
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	return 0;
}

/* "NSpid:" of /proc/PID/status: how deep, and the innermost pid. */
static int nspid(int procfd, const char *pid, int *depth, long *inner)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/status", pid);
	_cleanup_free_ char *s = NULL;
	int r = msb__read_file_at(procfd, path, STATUS_MAX, &s, NULL);
	if (r < 0)
		return r;
	char *p = strstr(s, "\nNSpid:");
	if (!p)
		return -EINVAL;
	p += 7;
	*depth = 0;
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		*inner = v;
		(*depth)++;
		p = end;
	}
	return *depth > 0 ? 0 : -EINVAL;
}

/* Is the pid namespace of PID `levels` below `want`? */
static bool nested_in(int procfd, const char *pid, int levels, const struct ns_id *want)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/ns/pid", pid);
	/* guest-names: ok - /proc/PID/ns/pid: procfs, followed on purpose */
	int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	for (int i = 0; i < levels; i++) {
		int up = ioctl(fd, NS_GET_PARENT);
		close(fd);
		if (up < 0)
			return false;
		fd = up;
	}
	struct stat st;
	bool same = fstat(fd, &st) == 0 && st.st_dev == want->dev && st.st_ino == want->ino;
	close(fd);
	return same;
}

static char *identity(int procfd, const char *pid, long inner)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/stat", pid);
	_cleanup_free_ char *stat = NULL;
	if (msb__read_file_at(procfd, path, 4096, &stat, NULL) < 0)
		return NULL;
	char *open = strchr(stat, '(');
	char *close_ = strrchr(stat, ')');
	if (!open || !close_ || close_ < open)
		return NULL;
	const char *p = close_ + 1;
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	unsigned long long start = strtoull(p, NULL, 10);

	snprintf(path, sizeof(path), "%s/cmdline", pid);
	/* guest-names: ok - /proc/PID/cmdline: procfs, no link */
	_cleanup_close_ int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
	char argv[CMDLINE_MAX + 1];
	ssize_t n = fd < 0 ? -1 : read(fd, argv, CMDLINE_MAX);
	if (n < 0)
		n = 0;
	while (n > 0 && argv[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (argv[i] == '\0')
			argv[i] = ' ';
	argv[n] = '\0';
	if (n == 0) { /* a zombie or a kernel-side process: its name */
		*close_ = '\0';
		return msb__asprintf("%ld:%llu:[%s]", inner, start, open + 1);
	}
	return msb__asprintf("%ld:%llu:%s", inner, start, argv);
}

static int processes(pid_t init, msb_ns_strs *out, msb_error **err)
{
	/* guest-names: ok - the host's /proc */
	_cleanup_close_ int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return msb__error_errno(err, errno, "ns fingerprint: open /proc");
	char ipid[16];
	snprintf(ipid, sizeof(ipid), "%d", (int)init);
	struct ns_id pidns, mntns;
	int depth = 0;
	long inner = 0;
	if (ns_of(procfd, ipid, "pid", &pidns) < 0 || ns_of(procfd, ipid, "mnt", &mntns) < 0 ||
	    nspid(procfd, ipid, &depth, &inner) < 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns fingerprint: the sandbox's init is gone");
	/* Most of /proc is the host's own pid namespace: one stat rules it out. */
	struct ns_id own = {0, 0};
	ns_of(procfd, "self", "pid", &own);
	int dup = fcntl(procfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dup < 0 ? NULL : fdopendir(dup);
	if (!d) {
		if (dup >= 0)
			close(dup);
		return msb__error_errno(err, errno, "ns fingerprint: list /proc");
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == init)
			continue;
		struct ns_id ns;
		if (ns_of(procfd, de->d_name, "pid", &ns) < 0)
			continue; /* gone, or not ours to look at (not in a sandbox of ours) */
		if (ns.dev == own.dev && ns.ino == own.ino)
			continue;
		bool member = ns.dev == pidns.dev && ns.ino == pidns.ino;
		int pdepth = 0;
		long pinner = 0;
		int sq = nspid(procfd, de->d_name, &pdepth, &pinner);
		if (sq == -EFBIG && member) {
			/* Past the read's budget: not skipped, refused. */
			r = msb_error_set(
				err, MSB_E_RUNTIME,
				"ns fingerprint: cannot attest: the status of process %s is "
				"over %u bytes",
				de->d_name, STATUS_MAX);
			break;
		}
		if (sq < 0)
			continue;
		if (!member && pdepth > depth)
			member = nested_in(procfd, de->d_name, pdepth - depth, &pidns);
		if (!member)
			continue;
		/* The init of the workloads' namespace, one level down, is the
		 * agent's reaper (agent/pidns.c): a part of the agent. Workloads
		 * cannot make a namespace of their own (seccomp), so nothing
		 * else is pid 1 there. */
		if (pdepth == depth + 1 && pinner == 1)
			continue;
		struct ns_id m;
		if (ns_of(procfd, de->d_name, "mnt", &m) == 0 &&
		    (m.dev != mntns.dev || m.ino != mntns.ino)) {
			r = msb_error_set(err, MSB_E_RUNTIME,
					  "ns fingerprint: cannot attest: process %ld runs in "
					  "another mount namespace",
					  pinner);
			break;
		}
		char *id = identity(procfd, de->d_name, pinner);
		if (!id)
			continue; /* exited meanwhile */
		int q = msb_ns__strs_add(out, id);
		if (q < 0) {
			r = msb_ns__strs_refusal(err, q, out, "ns", "processes");
			break;
		}
	}
	closedir(d);
	return r;
}

/* ---- fingerprint ---------------------------------------------------------------- */

int msb_ns__snapshot_fingerprint(int dfd, const char *dir, const char *work_dir, bool *supported,
				 msb_fingerprint *out, msb_error **err)
{
	return msb_ns__snapshot_fingerprint_within(dfd, dir, work_dir, NULL, supported, out, err);
}

static int fingerprint(int dfd, const char *dir, const char *work_dir,
		       const msb_ns_fingerprint_budget *budget, bool host_kernel, bool *supported,
		       msb_fingerprint *out, msb_error **err);

int msb_ns__snapshot_fingerprint_within(int dfd, const char *dir, const char *work_dir,
					const msb_ns_fingerprint_budget *budget, bool *supported,
					msb_fingerprint *out, msb_error **err)
{
	return fingerprint(dfd, dir, work_dir, budget, true, supported, out, err);
}

int msb_ns__snapshot_fingerprint_paths(int dfd, const char *dir, const char *work_dir,
				       msb_fingerprint *out, msb_error **err)
{
	bool supported = false;
	return fingerprint(dfd, dir, work_dir, NULL, false, &supported, out, err);
}

static int fingerprint(int dfd, const char *dir, const char *work_dir,
		       const msb_ns_fingerprint_budget *budget, bool host_kernel, bool *supported,
		       msb_fingerprint *out, msb_error **err)
{
	static const msb_ns_fingerprint_budget defaults = MSB_NS_FINGERPRINT_BUDGET_INIT;
	const msb_ns_fingerprint_budget *b = budget ? budget : &defaults;
	pid_t init;
	uint64_t start;
	int r = msb_ns__read_pid_file(dfd, MSB_NS_STATE_INIT_PID, &init, &start);
	_cleanup_close_ int pidfd = r < 0 ? r : msb_ns__pidfd_if_same(init, start);
	if (pidfd < 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns fingerprint: the sandbox `%s` is not running", dir);

	int fds[2] = {-1, -1};
	char reply[MSB_NS_CONTROL_LINE_MAX];
	r = msb_ns__control(dfd, dir, MSB_NS_CONTROL_FDS,
			    msb__now_ns() + (int64_t)(CONTROL_TIMEOUT * 1e9), fds, reply,
			    sizeof(reply), err);
	if (r < 0)
		return msb_error_wrap(err, "ns fingerprint: cannot attest");
	_cleanup_close_ int layer = fds[0], shm = fds[1];
	if (strcmp(reply, "ok") != 0)
		return msb_error_set(err, MSB_E_RUNTIME, "ns fingerprint: cannot attest: shim: %s",
				     strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply);

	msb_ns_strs paths = {
		.max = b->max_paths, .max_bytes = b->max_path_bytes, .max_len = b->max_path_len};
	/* One identity is bounded where it is read (CMDLINE_MAX). */
	msb_ns_strs procs = {
		.max = b->max_procs, .max_bytes = b->max_proc_bytes, .max_len = SIZE_MAX};
	_cleanup_free_ char *work_prefix = msb__asprintf("%s/", work_dir);
	_cleanup_close_ int upper =
		openat(layer, MSB_NS_LAYER_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int work =
		openat(dfd, MSB_NS_STATE_WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int shmdir = openat(shm, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!work_prefix)
		r = msb__error_nomem(err);
	else if (upper < 0 || work < 0 || shmdir < 0)
		r = msb__error_errno(err, errno,
				     "ns fingerprint: cannot attest: open the writable storage");
	if (r == 0 && host_kernel)
		r = check_mounts(init, work_dir, err);
	if (r == 0)
		r = walk(upper, "/", &paths, "the writable layer", err);
	if (r == 0)
		r = walk(work, work_prefix, &paths, "the storage base", err);
	if (r == 0)
		r = walk(shmdir, "/dev/shm/", &paths, "/dev/shm", err);
	if (r == 0 && host_kernel)
		r = processes(init, &procs, err);
	/* The same init throughout: what was read belongs to this sandbox. */
	if (r == 0 && msb__sys_pidfd_send_signal(pidfd, 0, 0) < 0)
		r = msb_error_set(err, MSB_E_RUNTIME,
				  "ns fingerprint: the sandbox stopped while it was read");
	if (r < 0) {
		msb_ns__strs_clear(&paths);
		msb_ns__strs_clear(&procs);
		return r;
	}
	if ((r = msb_ns__strs_fingerprint(&paths, &procs, out, err)) < 0)
		return r;
	*supported = true;
	return 0;
}

/* ---- reset ---------------------------------------------------------------------- */

int msb_ns__snapshot_reset(int sandbox_dfd, const char *dir, double timeout, msb_error **err)
{
	int64_t deadline = msb__now_ns() + (int64_t)(timeout * 1e9);
	/* An open file description of our own: the lock goes with it. */
	_cleanup_close_ int dfd = openat(sandbox_dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return msb__error_errno(err, errno, "ns reset: the sandbox `%s`", dir);
	/* Acquire and disposal hold this lock; wait for it within the timeout. */
	while (flock(dfd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return msb__error_errno(err, errno, "ns reset: lock `%s`", dir);
		if (msb__now_ns() >= deadline)
			return msb_error_set(err, MSB_E_TIMEOUT,
					     "ns reset: the sandbox stayed locked for %g s",
					     timeout);
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	int64_t shim = 0;
	msb_ns__shim_alive(dfd, &shim, NULL);
	if (shim == 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns reset: the sandbox `%s` is not running", dir);
	msb__fault_point("reset.begin");
	char reply[MSB_NS_CONTROL_LINE_MAX];
	int r = msb_ns__control(dfd, dir, MSB_NS_CONTROL_RESET, deadline, NULL, reply,
				sizeof(reply), err);
	if (r < 0)
		return r == MSB_E_TIMEOUT ? r : msb_error_wrap(err, "ns reset failed");
	if (strcmp(reply, "ok") != 0)
		return msb_error_set(err, MSB_E_RUNTIME,
				     "ns reset failed, the sandbox was taken down: %s",
				     strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply);
	return 0;
}
