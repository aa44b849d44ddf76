/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's file plane for a local engine (docs/engine.md, "Files"): the
 * container's root as the host sees it, /proc/PID/root of its init, and the
 * storage base resolved beneath it with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS). The rest is ns's file plane
 * (src/backends/ns/ns_files.c) on that directory fd: every path walked from
 * fds already held, no link followed - no engine call per operation.
 *
 * Identity: the /proc/PID directory is opened once and everything else is
 * read through it, so a PID reused after the container's init died is never
 * reached (its directory fd answers ESRCH); and the process must be in the
 * container's own cgroup (its engine id in /proc/PID/cgroup), so a remote
 * engine's PID that happens to exist here is never taken for it.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/ns/ns_files.h"
#include "engine.h"
#include "util/fs.h"
#include "util/syscalls.h"

#define CGROUP_MAX (64u << 10)

static bool in_cgroup_of(int procfd, const char *id)
{
	_cleanup_free_ char *text = NULL;
	size_t n = 0;
	/* guest-names: ok - "cgroup" is the kernel's file under a /proc/PID fd */
	if (msb__read_file_at(procfd, "cgroup", CGROUP_MAX, &text, &n) < 0 || !text)
		return false;
	size_t idlen = strlen(id);
	/* The full engine id (64 hex), as docker's and podman's cgroup names
	 * carry it; a short one would match too much. */
	return idlen >= 64 && memmem(text, n, id, idlen) != NULL;
}

static int hostfs_base(engine_backend *b, const char *id, const char *base)
{
	if (b->hostfs_off || !b->ops->pid || base[0] != '/')
		return -1;
	int64_t pid = b->ops->pid(b->t, id);
	if (pid <= 1)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%lld", (long long)pid);
	/* guest-names: ok - /proc/PID is the host's procfs, not a guest name */
	_cleanup_close_ int procfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (procfd < 0 || !in_cgroup_of(procfd, id))
		return -1;
	/* The kernel's magic link of that process, followed on purpose: it is
	 * the container's root; everything beneath is resolved below.
	 * guest-names: ok - "root" of a held /proc/PID fd */
	_cleanup_close_ int root = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = msb__sys_openat2(root, base + 1, &how);
	/* The process was still that container's once the base was held. */
	if (fd >= 0 && !in_cgroup_of(procfd, id)) {
		close(fd);
		return -1;
	}
	return fd < 0 ? -1 : fd;
}

/* The ns file plane on the storage base, when the host reaches it. */
static bool open_plane(engine_backend *b, const char *id, const char *base, ns_files *f, int *fd)
{
	*fd = hostfs_base(b, id, base);
	*f = (ns_files){.host_base = base, .guest_base = base, .has_base_fd = true, .base_fd = *fd};
	return *fd >= 0;
}

/* The replaced file's last reference (ns_files.replaced), dropped on a
 * short-lived detached thread: freeing a large file's pages and blocks then
 * happens beside the caller, not in its write_file. At most RELEASING_MAX at
 * once, so a burst of writes does not pile up threads; over that, or with no
 * thread, it is closed here as before. The total work is the same. */
#define RELEASING_MAX 4
static atomic_int releasing;

static void *release_main(void *arg)
{
	close((int)(intptr_t)arg);
	atomic_fetch_sub(&releasing, 1);
	return NULL;
}

static void release_later(int fd)
{
	if (fd < 0)
		return;
	if (atomic_fetch_add(&releasing, 1) < RELEASING_MAX) {
		pthread_attr_t at;
		pthread_t th;
		sigset_t all, old;
		int e = pthread_attr_init(&at);
		if (e == 0) {
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			pthread_attr_setstacksize(&at, 64u << 10);
			/* No signal of the caller's is ever delivered there. */
			sigfillset(&all);
			pthread_sigmask(SIG_SETMASK, &all, &old);
			e = pthread_create(&th, &at, release_main, (void *)(intptr_t)fd);
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			pthread_attr_destroy(&at);
		}
		if (e == 0)
			return;
	}
	atomic_fetch_sub(&releasing, 1);
	close(fd);
}

int msb_engine__hostfs_write(engine_backend *b, const char *id, const char *base, const char *path,
			     const uint8_t *data, size_t len, const char *working_directory,
			     msb_error **err)
{
	ns_files f;
	_cleanup_close_ int fd = -1;
	if (!open_plane(b, id, base, &f, &fd))
		return ENGINE_HOSTFS_NONE;
	int replaced = -1;
	f.replaced = &replaced;
	int r = msb_ns__write_file(&f, path, data, len, working_directory, err);
	release_later(replaced);
	return r;
}

int msb_engine__hostfs_stat(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, bool *present, msb_entry *out,
			    msb_error **err)
{
	ns_files f;
	_cleanup_close_ int fd = -1;
	if (!open_plane(b, id, base, &f, &fd))
		return ENGINE_HOSTFS_NONE;
	return msb_ns__stat_file(&f, path, working_directory, present, out, err);
}

int msb_engine__hostfs_read(engine_backend *b, const char *id, const char *base, const char *path,
			    const char *working_directory, uint64_t max_bytes, uint8_t **data,
			    size_t *len, msb_error **err)
{
	ns_files f;
	_cleanup_close_ int fd = -1;
	if (!open_plane(b, id, base, &f, &fd))
		return ENGINE_HOSTFS_NONE;
	return msb_ns__read_file(&f, path, working_directory, max_bytes, data, len, err);
}

int msb_engine__hostfs_remove(engine_backend *b, const char *id, const char *base, const char *path,
			      const char *working_directory, bool recursive, bool reclaim,
			      msb_error **err)
{
	ns_files f;
	_cleanup_close_ int fd = -1;
	if (!open_plane(b, id, base, &f, &fd))
		return ENGINE_HOSTFS_NONE;
	return reclaim ? msb_ns__reclaim(&f, path, working_directory, err)
		       : msb_ns__remove(&f, path, working_directory, recursive, err);
}
