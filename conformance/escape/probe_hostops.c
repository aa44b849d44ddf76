/* SPDX-License-Identifier: Apache-2.0 */
/* The host's operations on guest names: listings it reads (budgets) and
 * link swaps against its syscalls in the storage base (docs/security.md,
 * issue 15 findings 1 and 4). */
#include <sys/inotify.h>

#include "probe.h"

/* ---- listings the host reads -------------------------------------------------------- */

/* Budgets on guest bytes (docs/security.md): a directory of many long names
 * - ~26 MB of paths, past what a host should take in from one listing - for
 * the host to fingerprint and list once the probes are done. The verdict is
 * the host's (host:listing-bomb): a typed refusal with bounded memory. */
#define BOMB_ENTRIES 100000
#define BOMB_NAME 250

void p_listing_bomb(const struct ctx *c, struct res *r)
{
	if (!c->bomb) {
		set(r, "error", "no --bomb directory was given");
		return;
	}
	if (mkdir(c->bomb, 0755) < 0 && errno != EEXIST) {
		set(r, "contained", "mkdir `%s`: %s", c->bomb, errname(errno));
		return;
	}
	int dfd = open(c->bomb, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		set(r, "error", "open `%s`: %s", c->bomb, errname(errno));
		return;
	}
	/* Planted by a child offered to the OOM killer: the inodes and names
	 * are kernel memory charged to the sandbox's cgroup, which may be
	 * what stops the bomb. It reports how far it got on a pipe. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(dfd);
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		oom_first();
		close(p[0]);
		char name[BOMB_NAME + 1];
		memset(name, 'b', BOMB_NAME);
		name[BOMB_NAME] = '\0';
		unsigned long got[2] = {0, 0};
		for (; got[0] < BOMB_ENTRIES; got[0]++) {
			snprintf(name + BOMB_NAME - 8, 9, "%08lu", got[0]);
			int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0) {
				got[1] = (unsigned long)errno;
				break;
			}
			close(fd);
			if (got[0] % 1024 == 0 && write(p[1], got, sizeof(got)) < 0)
				_exit(3);
		}
		_exit(write(p[1], got, sizeof(got)) == (ssize_t)sizeof(got) ? 0 : 3);
	}
	close(p[1]);
	close(dfd);
	unsigned long got[2] = {0, 0}, last[2];
	while (pid > 0 && read(p[0], last, sizeof(last)) == (ssize_t)sizeof(last))
		memcpy(got, last, sizeof(got));
	close(p[0]);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		set(r, "error", "fork: %s", errname(errno));
		return;
	}
	unsigned long n = got[0];
	int e = (int)got[1];
	if (WIFSIGNALED(st))
		set(r, "contained", "the planter was killed by signal %d after %lu entries",
		    WTERMSIG(st), n);
	else if (n < BOMB_ENTRIES)
		set(r, "contained", "the storage stopped the bomb at %lu entries: %s", n,
		    errname(e));
	else
		set(r, "contained", "planted %lu entries of %d-byte names in `%s` for the host", n,
		    BOMB_NAME, c->bomb);
}

/* ---- link swaps in the storage base (issue 15) ---------------------------------
 *
 * The host works on names inside the storage base, a host directory the
 * guest writes: it binds the native host-tools socket there, writes files,
 * removes trees, and removes the whole base at disposal. Any of those that
 * followed a link, or went by path, would let the guest aim it at a host
 * file. This probe swaps every name the host is about to use for a link to a
 * host file (and a host directory) while the host does those things (`msb
 * conformance --escape` runs it in an exec of its own and works meanwhile),
 * and leaves links behind for the disposal. It cannot see the host: the
 * verdict is the host's check that its sentinel is unchanged
 * (host:link-swap-sentinel, host:disposal-sentinel).
 */

#define SWAP_SOCKET ".msb-host-tools.sock"
#define SWAP_WRITE "swap-target.txt"
#define SWAP_TREE "swap-tree"
#define SWAP_KEEP "swap-keep"

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The socket name, as fast as a guest can: swapped the moment it appears.
 * Runs in a child; returns the number of swaps. */
static unsigned long swap_socket(const char *target, double end)
{
	unsigned long swaps = 0;
	struct stat st;
	for (unsigned long i = 0;; i++) {
		if ((i & 1023) == 0 && mono_s() >= end)
			break;
		if (lstat(SWAP_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		unlink(SWAP_SOCKET);
		if (symlink(target, SWAP_SOCKET) == 0) {
			swaps++;
			for (volatile int k = 0; k < 20000; k++)
				;
			unlink(SWAP_SOCKET);
		}
	}
	return swaps;
}

/* A tree for the host's recursive removal, its middle swapped for a link to
 * the host directory and back. */
static void swap_tree(const char *dir)
{
	mkdir(SWAP_TREE, 0755);
	mkdir(SWAP_TREE "/a", 0755);
	mkdir(SWAP_TREE "/a/b", 0755);
	close(open(SWAP_TREE "/a/b/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	symlink(dir, SWAP_TREE "/a/b/up");
	rename(SWAP_TREE "/a", SWAP_TREE "/a2");
	symlink(dir, SWAP_TREE "/a");
	unlink(SWAP_TREE "/a");
	rename(SWAP_TREE "/a2", SWAP_TREE "/a");
}

/* What the disposal removes after the guest is gone: links out, a dangling
 * one, and a directory closed to everyone holding another. */
static int plant_for_disposal(const struct ctx *c)
{
	int bad = 0;
	mkdir(SWAP_KEEP, 0755);
	mkdir(SWAP_KEEP "/closed", 0755);
	bad += symlink(c->swap_dir, SWAP_KEEP "/dir-link") < 0;
	bad += symlink(c->swap_target, SWAP_KEEP "/file-link") < 0;
	bad += symlink("/nonexistent/msb-escape", SWAP_KEEP "/dangling") < 0;
	bad += symlink(c->swap_dir, SWAP_KEEP "/closed/dir-link") < 0;
	bad += chmod(SWAP_KEEP "/closed", 0) < 0;
	return bad;
}

void p_link_swap(const struct ctx *c, struct res *r)
{
	if (!c->swap_target || !c->swap_dir || !c->swap_base || c->swap_seconds <= 0) {
		set(r, "error", "needs --swap-base, --swap-target, --swap-dir and --swap-seconds");
		return;
	}
	if (chdir(c->swap_base) < 0) {
		set(r, "error", "chdir `%s`: %s", c->swap_base, errname(errno));
		return;
	}
	double end = mono_s() + c->swap_seconds;
	int pfd[2];
	if (pipe(pfd) < 0) {
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		unsigned long n = swap_socket(c->swap_target, end);
		ssize_t w = write(pfd[1], &n, sizeof(n));
		_exit(w == (ssize_t)sizeof(n) ? 0 : 1);
	}
	close(pfd[1]);
	/* Every name the host creates here is swapped for a link as soon as it
	 * shows: its temporaries, and the file it writes. */
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in >= 0)
		inotify_add_watch(in, ".", IN_CREATE | IN_MOVED_TO);
	unsigned long temps = 0, writes = 0, trees = 0;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (mono_s() < end) {
		/* The write target flips between a link and nothing. */
		unlink(SWAP_WRITE);
		if (symlink(c->swap_target, SWAP_WRITE) == 0)
			writes++;
		ssize_t n = in >= 0 ? read(in, buf, sizeof(buf)) : -1;
		for (ssize_t off = 0; n > 0 && off < n;) {
			const struct inotify_event *ev = (const void *)(buf + off);
			off += (ssize_t)(sizeof(*ev) + ev->len);
			if (!ev->len || strcmp(ev->name, SWAP_SOCKET) == 0)
				continue;
			/* Not our own links: only what the host made. */
			struct stat st;
			if (lstat(ev->name, &st) < 0 || S_ISLNK(st.st_mode))
				continue;
			if (strncmp(ev->name, ".msb-", 5) == 0 ||
			    strcmp(ev->name, SWAP_WRITE) == 0) {
				unlink(ev->name);
				if (symlink(c->swap_target, ev->name) == 0)
					temps++;
			}
		}
		unlink(SWAP_WRITE);
		swap_tree(c->swap_dir);
		trees++;
	}
	if (in >= 0)
		close(in);
	unsigned long sockets = 0;
	ssize_t got = read(pfd[0], &sockets, sizeof(sockets));
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	if (got != (ssize_t)sizeof(sockets))
		sockets = 0;
	int bad = plant_for_disposal(c);
	unsigned long all = sockets + writes + temps + trees;
	set(r, all && !bad ? "blocked" : "error",
	    "%.1f s of swaps: the host-tools socket %lu times, the written file %lu, the host's "
	    "temporary names %lu, the removed tree %lu; %s (the host checks its sentinel)",
	    c->swap_seconds, sockets, writes, temps, trees,
	    bad ? "some links for the disposal could not be planted"
		: "links to the host left for the disposal");
}
