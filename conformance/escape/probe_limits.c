/* SPDX-License-Identifier: Apache-2.0 */
/* msb-escape-probe's probes of signals outside, rlimits, resource limits (docs/security.md). */
#include "probe.h"

/* ---- signals and rlimits ---------------------------------------------------------------- */

void p_signal_host(const struct ctx *c, struct res *r)
{
	if (c->host_pid <= 0) {
		set(r, "error", "no host pid given");
		return;
	}
	/* Only a pid this sandbox cannot have: its own pids are small. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", c->host_pid);
	if (access(path, F_OK) == 0) {
		set(r, "escaped", "the host's pid %d is visible in this sandbox", c->host_pid);
		return;
	}
	must_fail(r, kill(c->host_pid, SIGTERM), "kill(the host's sleeper, SIGTERM)");
}

void p_pidfd(const struct ctx *c, struct res *r)
{
	long rc = syscall(SYS_pidfd_open, c->host_pid, 0);
	if (rc >= 0)
		close((int)rc);
	must_fail(r, rc, "pidfd_open(the host's sleeper)");
}

static void raise_limit(struct res *r, int which, const char *name)
{
	struct rlimit l;
	if (getrlimit(which, &l) < 0) {
		set(r, "error", "getrlimit(%s): %s", name, errname(errno));
		return;
	}
	if (l.rlim_max == RLIM_INFINITY) {
		set(r, "escaped", "%s hard limit is already unlimited", name);
		return;
	}
	struct rlimit up = {l.rlim_max + 1024, l.rlim_max + 1024};
	char what[64];
	snprintf(what, sizeof(what), "raise the %s hard limit above %llu", name,
		 (unsigned long long)l.rlim_max);
	must_fail(r, setrlimit(which, &up), what);
}

void p_rlimit_nofile(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_NOFILE, "RLIMIT_NOFILE");
}

void p_rlimit_nproc(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_NPROC, "RLIMIT_NPROC");
}

void p_rlimit_core(const struct ctx *c, struct res *r)
{
	raise_limit(r, RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK");
}

/* ---- resource limits --------------------------------------------------------------------- */

/* A filler offers itself to the OOM killer first: the memory it charges
 * (tmpfs pages, kernel objects) is no process's RSS, so the killer's choice
 * between it and the probe that reports would otherwise be a toss-up, and
 * a killed reporter loses every later probe. The agent starts every
 * workload at 1000; the reporter lowers itself to 0 (main), which any
 * workload may, and a filler goes back to 1000. */
void oom_first(void)
{
	oom_adj("1000");
}

void p_memory(const struct ctx *c, struct res *r)
{
	uint64_t goal = c->memory ? 4 * c->memory : (2ull << 30);
	pid_t pid = fork();
	if (pid == 0) {
		oom_first();
		uint64_t got = 0;
		while (got < goal) {
			size_t chunk = 8u << 20;
			char *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				_exit(3);
			memset(p, 0x5a, chunk);
			got += chunk;
		}
		_exit(0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		set(r, "error", "fork: %s", errname(errno));
		return;
	}
	if (WIFSIGNALED(st))
		set(r, "contained", "the filler was killed by signal %d before %llu bytes",
		    WTERMSIG(st), (unsigned long long)goal);
	else if (WEXITSTATUS(st) == 3)
		set(r, "contained", "mmap refused memory before %llu bytes",
		    (unsigned long long)goal);
	else
		set(r, "escaped", "%llu bytes, four times the limit, were touched",
		    (unsigned long long)goal);
}

void p_pids(const struct ctx *c, struct res *r)
{
	uint64_t goal = c->pids ? 4 * c->pids : 4096;
	pid_t *kids = calloc(goal, sizeof(pid_t));
	uint64_t n = 0;
	int e = 0;
	while (kids && n < goal) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			e = errno;
			break;
		}
		kids[n++] = p;
	}
	for (uint64_t i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (uint64_t i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	if (n < goal)
		set(r, "contained", "fork refused after %llu processes: %s", (unsigned long long)n,
		    errname(e));
	else
		set(r, "escaped", "%llu processes, four times the limit, were forked",
		    (unsigned long long)goal);
}

static void fill(struct res *r, const char *path, uint64_t limit)
{
	uint64_t goal = limit ? 4 * limit : (1ull << 30);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == ENOSPC || errno == EDQUOT)) {
		/* Full before the fill began (an earlier probe's files share
		 * the layer, as on `vm` where the storage base is in it): the
		 * bound holds. */
		set(r, "contained", "create `%s`: %s: the layer was already at its bound", path,
		    errname(errno));
		return;
	}
	if (fd < 0) {
		set(r, "blocked", "create `%s`: %s", path, errname(errno));
		return;
	}
	/* Unlinked at once: the file lives as long as the descriptor, so a
	 * filler the OOM killer takes frees what it charged as it dies. A
	 * named tmpfs file would stay charged until someone unlinked it, and
	 * every charge meanwhile (the agent's, the reporter's) would find the
	 * cgroup still full and pick another victim: the reporter. */
	unlink(path);
	static char block[1 << 16];
	memset(block, 0x5a, sizeof(block));
	uint64_t done = 0;
	int e = 0;
	while (done < goal) {
		ssize_t w = write(fd, block, sizeof(block));
		if (w <= 0) {
			e = w < 0 ? errno : ENOSPC;
			break;
		}
		done += (uint64_t)w;
	}
	close(fd);
	if (done < goal)
		set(r, "contained", "`%s` stopped at %llu bytes: %s", path,
		    (unsigned long long)done, errname(e));
	else
		set(r, "escaped", "`%s` took %llu bytes, four times the limit", path,
		    (unsigned long long)goal);
}

void p_disk(const struct ctx *c, struct res *r)
{
	/* The writable layer is a tmpfs charged to the memory cgroup too: in a
	 * child offered to the OOM killer, as /dev/shm's filler. */
	pid_t pid = fork();
	if (pid == 0) {
		oom_first();
		struct res child;
		fill(&child, "/var/tmp/msb-escape-fill", c->writable);
		_exit(strcmp(child.outcome, "contained") == 0 ? 0 : 4);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		set(r, "error", "fork: %s", errname(errno));
		return;
	}
	unlink("/var/tmp/msb-escape-fill");
	if (WIFSIGNALED(st))
		set(r, "contained", "the writable-layer filler was killed by signal %d",
		    WTERMSIG(st));
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		set(r, "contained", "the writable layer refused writes before four times its size");
	else
		set(r, "escaped", "the writable layer took four times its size");
}

void p_shm(const struct ctx *c, struct res *r)
{
	/* /dev/shm is a tmpfs charged to the memory cgroup: bounded by memory. */
	pid_t pid = fork();
	if (pid == 0) {
		oom_first();
		struct res child;
		fill(&child, "/dev/shm/msb-escape-fill", c->memory ? c->memory : c->writable);
		_exit(strcmp(child.outcome, "contained") == 0 ? 0 : 4);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	unlink("/dev/shm/msb-escape-fill");
	if (WIFSIGNALED(st))
		set(r, "contained", "the /dev/shm filler was killed by signal %d", WTERMSIG(st));
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		set(r, "contained", "/dev/shm refused writes before four times the memory limit");
	else
		set(r, "escaped", "/dev/shm took four times the memory limit");
}
