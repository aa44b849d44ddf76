/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The forked child of an exec, from fork to execve. Order matters: signals
 * and session first, then stdio (so later failures reach the exec's stderr),
 * working directory, rlimits, the OOM score, no_new_privs, capabilities, stray fds, the
 * seccomp filter last, execve. Any failure writes one line to stderr and
 * exits 126 (127 when the program is not found): the workload never runs
 * with less confinement than asked.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS 38
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
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

#define CAP_VERSION_3 0x20080522u
#define NOFILE_MAX 65536u

struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};

static void say(const char *what, const char *arg, int err)
{
	char line[512];
	int n;
	if (arg)
		n = snprintf(line, sizeof(line), "msb-agent: %s `%s`: %s\n", what, arg,
			     strerror(err));
	else
		n = snprintf(line, sizeof(line), "msb-agent: %s: %s\n", what, strerror(err));
	if (n > 0) {
		size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
		ssize_t w = write(STDERR_FILENO, line, len);
		(void)w;
	}
}

static _Noreturn void die(const char *what, int err)
{
	say(what, NULL, err);
	_exit(126);
}

/* Every signal the agent does not leave at its default (a system call each,
 * about 20 us under gVisor's ptrace platform: only those). */
static void reset_signals(uint64_t which)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig <= 64; sig++)
		if (which & (1ull << (sig - 1)))
			sigaction(sig, &sa, NULL); /* fails harmlessly for KILL, STOP, reserved */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static void setup_stdio(const int stdio[3])
{
	int moved[3];
	/* The agent's pipes and terminals are never 0-2 (its own stdio holds
	 * those): then no dup2 below overwrites a source, and the copies are
	 * needless (each a system call or two: 20 us apiece under gVisor). */
	if (stdio[0] > 2 && stdio[1] > 2 && stdio[2] > 2) {
		for (int i = 0; i < 3; i++)
			if (dup2(stdio[i], i) < 0)
				_exit(126); /* no stderr to tell yet */
		return;
	}
	/* first above 2, so that no dup2 overwrites a source */
	for (int i = 0; i < 3; i++) {
		moved[i] = fcntl(stdio[i], F_DUPFD_CLOEXEC, 3);
		if (moved[i] < 0)
			_exit(126); /* no stderr to tell yet */
	}
	for (int i = 0; i < 3; i++)
		if (dup2(moved[i], i) < 0)
			_exit(126);
}

/* Set a limit to 0 unless it is 0 already: gVisor refuses setrlimit of
 * RLIMIT_RTPRIO whatever the value (EPERM), and has it at 0. */
static void zero_rlimit(int resource, const char *what)
{
	struct rlimit zero = {0, 0}, now;
	if (getrlimit(resource, &now) == 0 && now.rlim_cur == 0 && now.rlim_max == 0)
		return;
	if (setrlimit(resource, &zero) < 0)
		die(what, errno);
}

static void lower_rlimits(void)
{
	zero_rlimit(RLIMIT_CORE, "setrlimit(RLIMIT_CORE)");
	zero_rlimit(RLIMIT_RTPRIO, "setrlimit(RLIMIT_RTPRIO)");
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > NOFILE_MAX) {
		rl.rlim_max = NOFILE_MAX;
		if (rl.rlim_cur > rl.rlim_max)
			rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			die("setrlimit(RLIMIT_NOFILE)", errno);
	}
}

/* The OOM killer's first choice is a workload, never the agent: pages in the
 * sandbox's tmpfs belong to no process, so without this a memory-hungry
 * workload made of small processes could see the agent (PID 1, the sandbox's
 * only way in) picked instead. Raising one's own score needs no privilege;
 * a workload can lower it again only to 0, the agent's (and cannot reach the
 * agent's: pidns.c). Best effort: /proc may be absent in a bare test root. */
static void prefer_for_oom(int proc_fd)
{
	if (proc_fd < 0)
		return;
	int fd = openat(proc_fd, "self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t w = write(fd, "1000", 4);
	(void)w;
	close(fd);
}

/* bset: the agent's bounding set; what is not in it needs no dropping. */
static void drop_capabilities(int cap_last, uint64_t bset)
{
	bool bset_failed = false;
	int last = cap_last >= 0 ? cap_last : 63;

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		die("clear ambient capabilities", errno);
	for (int cap = 0; cap <= last; cap++) {
		if (!(bset & (1ull << cap)))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the kernel's last capability */
			bset_failed = true;
		}
	}
	struct cap_header hdr = {CAP_VERSION_3, 0};
	struct cap_data data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		die("capset", errno);
	/* Without CAP_SETPCAP the bounding set stays; that only matters for a
	 * uid 0 workload, whose execve would regain it. Refuse then. */
	if (bset_failed && (getuid() == 0 || geteuid() == 0))
		die("cannot empty the capability bounding set", EPERM);
}

/* sh_argv: room for argv and one more, made by the agent beforehand (the
 * child allocates nothing: child_spawn). */
static void exec_path(const char *path, char *const argv[], char *const envp[], char **sh_argv)
{
	execve(path, argv, envp);
	if (errno == ENOEXEC) {
		/* no #! line: the shell runs it, as execvp would */
		size_t n = 0;
		while (argv[n])
			n++;
		sh_argv[0] = (char *)"sh";
		sh_argv[1] = (char *)path;
		for (size_t i = 1; i < n; i++)
			sh_argv[i + 1] = argv[i];
		sh_argv[n < 1 ? 2 : n + 1] = NULL;
		execve("/bin/sh", sh_argv, envp);
		errno = ENOEXEC;
	}
}

static _Noreturn void do_exec(const struct spawn *sp)
{
	int err = ENOENT;
	if (strchr(sp->file, '/')) {
		exec_path(sp->file, sp->argv, sp->envp, sp->sh_argv);
		err = errno;
	} else {
		bool eacces = false;
		const char *p = sp->path_env;
		size_t flen = strlen(sp->file);
		err = ENOENT;
		for (;;) {
			const char *colon = strchr(p, ':');
			size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
			char buf[4096];
			if (dlen + flen + 2 <= sizeof(buf)) {
				if (dlen == 0) {
					buf[0] = '.';
					dlen = 1;
				} else {
					memcpy(buf, p, dlen);
				}
				buf[dlen] = '/';
				memcpy(buf + dlen + 1, sp->file, flen + 1);
				exec_path(buf, sp->argv, sp->envp, sp->sh_argv);
				int e = errno;
				if (e == EACCES) {
					eacces = true;
				} else if (e != ENOENT && e != ENOTDIR && e != ELOOP &&
					   e != ENAMETOOLONG && e != ESTALE) {
					err = e;
					break;
				}
			}
			if (!colon)
				break;
			p = colon + 1;
		}
		if (eacces && err == ENOENT)
			err = EACCES;
	}
	say("cannot execute", sp->file, err);
	_exit(err == ENOENT ? 127 : 126);
}

_Noreturn void child_run(const struct spawn *sp)
{
	reset_signals(sp->sig_reset);
	if (setsid() < 0)
		_exit(126);
	setup_stdio(sp->stdio);
	if (sp->layer)
		_exit(layer_serve(sp->layer, sp->proc_fd, sp->cap_last));
	/* a terminal: the session's controlling one, this group in front */
	if (sp->ctty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0)
		die("controlling terminal", errno);
	/* 126 with the reason, like an engine's `exec -w` (path.c) */
	if (sp->cwd_fd < 0) {
		say("working directory", sp->cwd, sp->cwd_error);
		_exit(126);
	}
	if (fchdir(sp->cwd_fd) < 0) {
		say("working directory", sp->cwd, errno);
		_exit(126);
	}
	lower_rlimits();
	prefer_for_oom(sp->proc_fd);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("no_new_privs", errno);
	/* --engine: the workload keeps what the engine gives an exec (its
	 * capabilities, its seccomp profile), as an engine exec of it would;
	 * no_new_privs is set either way (docs/engine.md, "exec"). */
	bool engine_exec = agent_engine_exec && !sp->file_op;
	if (!engine_exec)
		drop_capabilities(sp->cap_last, sp->cap_bset);
	/* everything of the agent's is O_CLOEXEC; this also catches fds the
	 * agent inherited from whoever started it */
	syscall(SYS_close_range, 3u, ~0u, 0u);
	int rc = engine_exec ? 0 : seccomp_install();
	if (rc < 0)
		die("seccomp filter", -rc);
	if (sp->file_op)
		_exit(files_serve(sp->argv));
	do_exec(sp);
}

/*
 * The spawn. fork() gives the child a copy of the agent's address space and
 * execve() then replaces it: two address spaces per exec where one would do.
 * Under gVisor's ptrace platform each address space is a stub process of
 * the host, and copying the agent's mappings into a new one costs; so a
 * workload's child is made as posix_spawn makes its own, with
 * clone(CLONE_VM | CLONE_VFORK) on a stack of its own: the child runs in the
 * agent's memory, the agent waits until the child's execve (or _exit) lets
 * it go on. The child keeps to what that allows: it writes its own stack
 * and nothing of the agent's but errno and the seccomp filter's scratch
 * (seccomp.c), allocates nothing, takes no lock (the agent has one thread),
 * and every step of child_run is the task's own (signal dispositions,
 * session, fds, working directory, rlimits, oom_score_adj, no_new_privs,
 * capabilities, seccomp), as after fork.
 *
 * While the child shares it, the agent's memory is reachable through the
 * child's /proc entries, which workloads may see; so this is only done when
 * that memory is not dumpable (main.c), where /proc/PID/mem and ptrace want
 * CAP_SYS_PTRACE, which no workload has. A file request's child serves for
 * as long as the request runs, and the agent cannot wait that long: it is
 * forked. So is every child of a sanitized agent, whose runtime keeps
 * per-thread state the child would share.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHILD_SHARED_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
	__has_feature(memory_sanitizer)
#define CHILD_SHARED_VM 0
#endif
#endif
#ifndef CHILD_SHARED_VM
#define CHILD_SHARED_VM 1
#endif

/* child_run's deepest path: do_exec's 4 KiB candidate, say()'s line, the
 * seccomp filter's program; with room to spare, below one guard page. */
#define CHILD_STACK_SIZE (128u * 1024u)

static int child_entry(void *arg)
{
	child_run(arg);
}

pid_t child_spawn(const struct spawn *sp, bool shared_vm)
{
	static char *stack;

	if (!CHILD_SHARED_VM || !shared_vm || sp->file_op || sp->layer) {
		pid_t pid = fork();
		if (pid == 0)
			child_run(sp);
		return pid;
	}
	if (!stack) {
		void *p = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		if (mprotect(p, 4096, PROT_NONE) < 0) {
			int e = errno;
			munmap(p, CHILD_STACK_SIZE);
			errno = e;
			return -1;
		}
		stack = p;
	}
	/* No handler of the agent's may run in the child before child_run
	 * has reset them all: every signal blocked across the clone (the
	 * child unblocks them once they are at their defaults). */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(child_entry, stack + CHILD_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD,
			  (void *)sp);
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
}
