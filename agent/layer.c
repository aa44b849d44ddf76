/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fingerprint of a `vm` guest, taken inside it (docs/internals/vm.md,
 * "The fingerprint"): the host cannot see the guest's files or processes,
 * so the file-plane request `layer` walks them here and the host counts
 * every byte of the answer against the `ns` fingerprint's budgets
 * (src/backends/vm/vm_fingerprint.c).
 *
 * What changed since the VM booted, as on `ns`:
 *  - every entry of the overlay's upper directory (the writable layer, which
 *    also holds the storage base and /tmp), whiteouts included, as
 *    "/PATH", but those the init itself made while building the root (the
 *    baseline, taken by vm_init.c before the chroot: same path, same inode)
 *    and the identity helper's /run/msb-instance-id and /run (the inodes it
 *    last wrote, in a page shared with it: vm_layer_marks);
 *  - every entry of /dev/shm, as "/dev/shm/PATH";
 *  - "PID:STARTTIME:ARGV" of every process in the workloads' pid namespace
 *    but its reaper and this walker (PID as the workloads see it,
 *    STARTTIME in clock ticks after boot).
 * Refused ("cannot attest", exit AGENT_FILE_OS) when the mount table shows
 * writable storage the walk does not cover, a directory cannot be read, or
 * the tree is deeper than LAYER_MAX_DEPTH.
 *
 * The walker is forked by the agent like a file request but keeps the upper
 * directory's descriptor (which no workload may hold: it leads into the
 * initramfs) and CAP_DAC_READ_SEARCH only (a workload's mode-0 directory
 * is listed, not hidden), and is not dumpable, so a workload can neither
 * trace it nor open its descriptors. No link is followed: every directory
 * is opened from its parent's descriptor by one name with O_NOFOLLOW, and
 * one on another device is not entered.
 *
 * Output: one record per entry, "p/PATH\0" or "rID\0".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef PR_CAPBSET_DROP
#define PR_CAPBSET_DROP 24
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

#define LAYER_MAX_DEPTH 512
#define LAYER_PATH_MAX 4096
#define LAYER_CMDLINE_MAX 4096
#define LAYER_MOUNTINFO_MAX ((size_t)1 << 20)
#define LAYER_STATUS_MAX 16384 /* /proc/PID/status and stat; ~1.5 KiB in practice */
#define CAP_DAC_READ_SEARCH_BIT 2
#define CAP_VERSION_3 0x20080522u

struct vm_layer vm_layer = {.upper_fd = -1};

/* ---- output ---------------------------------------------------------------- */

static char obuf[65536];
static size_t olen;

static int flush_out(void)
{
	size_t off = 0;
	while (off < olen) {
		ssize_t n = write(STDOUT_FILENO, obuf + off, olen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	olen = 0;
	return 0;
}

/* One record: tag, then the bytes of a and b, then NUL. */
static int emit(char tag, const char *a, const char *b)
{
	size_t la = strlen(a), lb = b ? strlen(b) : 0;
	if (2 + la + lb > sizeof(obuf))
		return -1;
	if (olen + 2 + la + lb > sizeof(obuf) && flush_out() < 0)
		return -1;
	obuf[olen++] = tag;
	memcpy(obuf + olen, a, la);
	olen += la;
	if (lb)
		memcpy(obuf + olen, b, lb);
	olen += lb;
	obuf[olen++] = '\0';
	return 0;
}

static int say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int say(const char *fmt, ...)
{
	char line[600];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n > 0) {
		if ((size_t)n > sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
		line[n++] = '\n';
		ssize_t w = write(STDERR_FILENO, line, (size_t)n);
		(void)w;
	}
	return AGENT_FILE_OS;
}

/* ---- the walk ---------------------------------------------------------------- */

/* Called for each entry below the walk's root: rel its path from there. A
 * nonzero return stops the walk with that status. */
typedef int (*entry_fn)(void *ud, const char *rel, const struct stat *st);

/* Every entry below the directory fd (takes it), depth first. */
static int walk(int fd, dev_t dev, char *rel, size_t len, int depth, entry_fn fn, void *ud)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return say("cannot attest: cannot read `/%s`: %s", rel, strerror(errno));
	}
	int status = 0;
	struct dirent *de;
	errno = 0;
	while (status == 0 && (de = readdir(d))) {
		const char *name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		size_t nlen = strlen(name);
		size_t clen = len + (len ? 1 : 0) + nlen;
		if (clen >= LAYER_PATH_MAX) {
			status = say("cannot attest: a path longer than %d bytes", LAYER_PATH_MAX);
			break;
		}
		if (len)
			rel[len] = '/';
		memcpy(rel + len + (len ? 1 : 0), name, nlen + 1);
		struct stat st;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rel[len] = '\0';
			continue; /* gone meanwhile */
		}
		status = fn(ud, rel, &st);
		if (status == 0 && S_ISDIR(st.st_mode) && st.st_dev == dev) {
			if (depth >= LAYER_MAX_DEPTH) {
				status = say("cannot attest: deeper than %d levels",
					     LAYER_MAX_DEPTH);
			} else {
				int c = openat(dirfd(d), name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (c < 0 && errno != ENOENT)
					status = say("cannot attest: cannot open `/%s`: %s", rel,
						     strerror(errno));
				else if (c >= 0)
					status = walk(c, dev, rel, clen, depth + 1, fn, ud);
			}
		}
		rel[len] = '\0';
		errno = 0;
	}
	if (status == 0 && errno)
		status = say("cannot attest: cannot list `/%s`: %s", rel, strerror(errno));
	closedir(d);
	return status;
}

static int walk_root(int base, entry_fn fn, void *ud)
{
	struct stat st;
	int fd = openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return say("cannot attest: open the writable storage: %s", strerror(e));
	}
	char *rel = malloc(LAYER_PATH_MAX);
	if (!rel) {
		close(fd);
		return say("cannot attest: out of memory");
	}
	rel[0] = '\0';
	int r = walk(fd, st.st_dev, rel, 0, 0, fn, ud);
	free(rel);
	return r;
}

/* ---- the baseline (vm_init.c, before the chroot) ------------------------------- */

static int base_add(void *ud, const char *rel, const struct stat *st)
{
	struct vm_layer *l = ud;
	if (l->n_base == VM_LAYER_BASE_MAX) {
		l->base_overflow = true;
		return 1;
	}
	char *p = strdup(rel);
	if (!p) {
		l->base_overflow = true;
		return 1;
	}
	l->base[l->n_base].ino = (uint64_t)st->st_ino;
	l->base[l->n_base].path = p;
	l->n_base++;
	return 0;
}

int vm_layer_setup(const char *upper)
{
	struct vm_layer *l = &vm_layer;
	l->upper_fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (l->upper_fd < 0)
		return -errno;
	/* The identity helper records what it writes here (vm_identity.c). */
	void *m = mmap(NULL, sizeof(*l->marks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	l->marks = m;
	/* A failure leaves the fingerprint refused, the VM serving. */
	if (walk_root(l->upper_fd, base_add, l) != 0)
		l->base_overflow = true;
	return 0;
}

/* ---- the request, in the forked child ------------------------------------------- */

static bool in_base(const struct vm_layer *l, const char *rel, const struct stat *st)
{
	for (size_t i = 0; i < l->n_base; i++)
		if (l->base[i].ino == (uint64_t)st->st_ino && strcmp(l->base[i].path, rel) == 0)
			return true;
	const struct vm_layer_marks *m = l->marks;
	uint64_t run = __atomic_load_n(&m->run_ino, __ATOMIC_ACQUIRE);
	uint64_t id = __atomic_load_n(&m->id_ino, __ATOMIC_ACQUIRE);
	if (S_ISDIR(st->st_mode) && run && (uint64_t)st->st_ino == run && !strcmp(rel, "run"))
		return true;
	return S_ISREG(st->st_mode) && id && (uint64_t)st->st_ino == id &&
	       !strcmp(rel, "run/" VM_LAYER_ID_FILE);
}

static int upper_entry(void *ud, const char *rel, const struct stat *st)
{
	if (in_base(ud, rel, st))
		return 0;
	return emit('p', "/", rel) < 0 ? say("write: %s", strerror(errno)) : 0;
}

static int shm_entry(void *ud, const char *rel, const struct stat *st)
{
	(void)ud;
	(void)st;
	return emit('p', "/dev/shm/", rel) < 0 ? say("write: %s", strerror(errno)) : 0;
}

static ssize_t read_at(int dir, const char *path, char *buf, size_t size)
{
	int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return (ssize_t)got;
}

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

static bool below(const char *mp, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(mp, dir, n) == 0 && (mp[n] == '\0' || mp[n] == '/');
}

/* No writable storage but what the walk covers: the root is the overlay,
 * /dev/shm a tmpfs; everything else read-only, kernel state, or a mask
 * inside /proc or /sys (the init's and the reaper's; workloads cannot mount). */
static int check_mounts(int proc)
{
	char *buf = malloc(LAYER_MOUNTINFO_MAX + 1);
	if (!buf)
		return say("cannot attest: out of memory");
	ssize_t n = read_at(proc, "self/mountinfo", buf, LAYER_MOUNTINFO_MAX);
	if (n < 0 || (size_t)n == LAYER_MOUNTINFO_MAX) {
		free(buf);
		return say("cannot attest: read the mount table");
	}
	buf[n] = '\0';
	static const char *const kernel[] = {"proc",   "sysfs",	  "devpts", "mqueue",
					     "cgroup", "cgroup2", NULL};
	const char *root = NULL;
	int status = 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); status == 0 && line;
	     line = strtok_r(NULL, "\n", &save)) {
		/* id parent maj:min root mountpoint options [optional...] - fstype ... */
		char *f[6] = {NULL};
		char *p = line;
		for (int i = 0; i < 6 && p; i++) {
			f[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		char *dash = p ? strstr(p, "- ") : NULL;
		if (!f[5] || !dash) {
			status = say("cannot attest: an unreadable mount table");
			break;
		}
		char *fstype = dash + 2;
		char *sp = strchr(fstype, ' ');
		if (sp)
			*sp = '\0';
		char *mp = f[4];
		unescape(mp);
		bool ro = !strcmp(f[5], "ro") || !strncmp(f[5], "ro,", 3);
		bool kstate = false;
		for (size_t i = 0; kernel[i]; i++)
			kstate = kstate || !strcmp(fstype, kernel[i]);
		if (!strcmp(mp, "/")) {
			root = fstype; /* the last one on / is the one seen */
			continue;
		}
		if ((!strcmp(mp, "/dev/shm") && !strcmp(fstype, "tmpfs")) || ro || kstate ||
		    below(mp, "/proc") || below(mp, "/sys"))
			continue;
		status = say("cannot attest: a writable `%s` mount at `%s` is not seen by the "
			     "fingerprint",
			     fstype, mp);
	}
	if (status == 0 && (!root || strcmp(root, "overlay") != 0))
		status = say("cannot attest: the root is `%s`, not the VM's overlay",
			     root ? root : "(none)");
	free(buf);
	return status;
}

/* "PID:STARTTIME:ARGV" (or "PID:STARTTIME:[COMM]") of every process of the
 * workloads' namespace but its reaper (its pid 1) and this walker. */
static int processes(int proc)
{
	char self[32] = "";
	ssize_t sl = readlinkat(proc, "self", self, sizeof(self) - 1);
	if (sl > 0)
		self[sl] = '\0';
	int dfd = openat(proc, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return say("cannot attest: list /proc: %s", strerror(errno));
	}
	char *argv = malloc(LAYER_CMDLINE_MAX + 1);
	char *status_buf = malloc(LAYER_STATUS_MAX + 1);
	int status = argv && status_buf ? 0 : say("cannot attest: out of memory");
	struct dirent *de;
	while (status == 0 && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || !strcmp(de->d_name, self))
			continue;
		char path[64];
		snprintf(path, sizeof(path), "%ld/status", pid);
		ssize_t n = read_at(proc, path, status_buf, LAYER_STATUS_MAX);
		if (n <= 0)
			continue; /* gone */
		if (n == LAYER_STATUS_MAX) {
			/* Not skipped: a process must not hide behind a long status. */
			status = say("cannot attest: the status of process %ld is over %d bytes",
				     pid, LAYER_STATUS_MAX);
			break;
		}
		status_buf[n] = '\0';
		char *ns = strstr(status_buf, "\nNSpid:");
		if (!ns)
			continue;
		int depth = 0;
		long inner = 0;
		for (char *q = ns + 7;;) {
			long v = strtol(q, &end, 10);
			if (end == q)
				break;
			inner = v;
			depth++;
			q = end;
		}
		/* The agent's own namespace (the agent, its helpers, the guest
		 * kernel's threads) is not the workloads'; the reaper is their 1. */
		if (depth < 2 || inner == 1)
			continue;
		snprintf(path, sizeof(path), "%ld/stat", pid);
		n = read_at(proc, path, status_buf, LAYER_STATUS_MAX);
		if (n <= 0 || n == LAYER_STATUS_MAX)
			continue;
		status_buf[n] = '\0';
		char *open = strchr(status_buf, '(');
		char *close_ = strrchr(status_buf, ')');
		if (!open || !close_ || close_ < open)
			continue;
		const char *p = close_ + 1;
		int field = 2;
		for (; *p && field < 22; p++)
			if (*p == ' ')
				field++;
		unsigned long long start = strtoull(p, NULL, 10);
		snprintf(path, sizeof(path), "%ld/cmdline", pid);
		n = read_at(proc, path, argv, LAYER_CMDLINE_MAX);
		if (n < 0)
			n = 0;
		while (n > 0 && argv[n - 1] == '\0')
			n--;
		for (ssize_t i = 0; i < n; i++)
			if (argv[i] == '\0')
				argv[i] = ' ';
		argv[n] = '\0';
		char id[64];
		snprintf(id, sizeof(id), "%ld:%llu:", inner, start);
		int w;
		if (n == 0) {
			*close_ = '\0';
			char comm[40];
			snprintf(comm, sizeof(comm), "[%.32s]", open + 1);
			w = emit('r', id, comm);
		} else {
			w = emit('r', id, argv);
		}
		if (w < 0)
			status = say("write: %s", strerror(errno));
	}
	closedir(d);
	free(argv);
	free(status_buf);
	return status;
}

/* Everything but CAP_DAC_READ_SEARCH, in every set. */
static int keep_read_search(int cap_last)
{
	int last = cap_last >= 0 ? cap_last : 63;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	for (int cap = 0; cap <= last; cap++)
		if (cap != CAP_DAC_READ_SEARCH_BIT && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			return -errno;
	struct {
		uint32_t version;
		int pid;
	} hdr = {CAP_VERSION_3, 0};
	struct {
		uint32_t effective, permitted, inheritable;
	} data[2];
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = 1u << CAP_DAC_READ_SEARCH_BIT;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int layer_serve(const struct vm_layer *l, int proc_fd, int cap_last)
{
	/* Not dumpable first: from here no workload may trace this process or
	 * open its descriptors (the upper directory's among them). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return say("PR_SET_DUMPABLE: %s", strerror(errno));
	if (l->upper_fd < 0 || proc_fd < 0)
		return say("cannot attest: not a vm guest's agent");
	if (l->base_overflow)
		return say("cannot attest: the init's own entries of the writable layer were not "
			   "recorded");
	if (dup2(l->upper_fd, 3) < 0 || dup2(proc_fd, 4) < 0)
		return say("dup2: %s", strerror(errno));
	syscall(SYS_close_range, 5u, ~0u, 0u);
	int r = keep_read_search(cap_last);
	if (r < 0)
		return say("capabilities: %s", strerror(-r));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return say("no_new_privs: %s", strerror(errno));
	r = seccomp_install();
	if (r < 0)
		return say("seccomp filter: %s", strerror(-r));
	int status = check_mounts(4);
	if (status == 0)
		status = walk_root(3, upper_entry, (void *)l);
	if (status == 0) {
		int shm = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		status = shm < 0 ? say("cannot attest: open /dev/shm: %s", strerror(errno))
				 : walk_root(shm, shm_entry, NULL);
		if (shm >= 0)
			close(shm);
	}
	if (status == 0)
		status = processes(4);
	if (status == 0 && flush_out() < 0)
		status = say("write: %s", strerror(errno));
	return status;
}
