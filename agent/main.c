/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-agent: the guest agent. Runs as PID 1 inside a native sandbox (or as an
 * ordinary process in tests). Contract with msb-shim: fd 3 (named by
 * MSB_AGENT_LISTEN_FD) is a listening AF_UNIX SOCK_STREAM socket; `--work DIR`
 * names the guest storage base. With `--stdio` (the `oci` backend, whose
 * runtime gives its init only stdio) there is no listening socket: stdin is
 * the one host connection, a connected stream socket, and its end is the
 * agent's end. See docs/internals/protocol.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#ifndef PR_SET_CHILD_SUBREAPER
#define PR_SET_CHILD_SUBREAPER 36
#endif

int64_t agent_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void agent_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n = snprintf(line, sizeof(line), "msb-agent: ");
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = strnlen(line, sizeof(line) - 2);
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

static void usage(void)
{
	agent_log("usage: msb-agent [--work DIR]   (listening socket on $MSB_AGENT_LISTEN_FD)");
	agent_log("       msb-agent --stdio [--work DIR]   (stdin: the one connection)");
	agent_log("       msb-agent --engine [--work DIR]  (stdin and stdout: an engine's pipes)");
}

/* Strict non-negative decimal. */
static int parse_fd(const char *s)
{
	if (!s || !*s)
		return -1;
	long v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > INT_MAX)
			return -1;
	}
	return (int)v;
}

static int read_cap_last(void)
{
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[16];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (buf[n - 1] == '\n')
		buf[n - 1] = 0;
	int v = parse_fd(buf);
	return v >= 0 && v < 64 ? v : -1;
}

/* The bounding set from /proc/self/status (CapBnd), read before /proc/1 is
 * covered (pidns.c); all ones when it cannot be read. */
static uint64_t read_cap_bset(int proc_fd)
{
	char buf[4096];
	int fd = proc_fd >= 0 ? openat(proc_fd, "self/status", O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return ~0ull;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return ~0ull;
	buf[n] = 0;
	const char *p = strstr(buf, "\nCapBnd:");
	if (!p)
		return ~0ull;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p + 8, &end, 16);
	return errno || end == p + 8 || (*end != '\n' && *end != 0) ? ~0ull : (uint64_t)v;
}

/* Which signals the agent does not leave at their default: those it set
 * (setup_signals) and whatever it inherited ignored. 64 system calls, once,
 * after the agent's HELLO has gone out (run()): under gVisor's ptrace
 * platform they cost about a millisecond, spent while the host finishes its
 * start rather than by each exec's child (child.c resets only these). An
 * exec before that resets all 64. */
static void learn_signals(struct agent *a)
{
	uint64_t set = 0;
	for (int sig = 1; sig <= 64; sig++) {
		struct sigaction old;
		if (sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL)
			set |= 1ull << (sig - 1);
	}
	a->sig_nondefault = set;
	a->sig_known = true;
}

/* Has a host's HELLO been answered, the answer sent? */
static bool greeted(struct agent *a)
{
	for (struct conn *c = a->conns; c; c = c->next)
		if (c->hello_done && !c->dead && conn_queued(c) == 0)
			return true;
	return false;
}

static void noop_handler(int sig)
{
	(void)sig;
}

static int setup_signals(struct agent *a)
{
	static const int handled[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
	static const int ignored[] = {SIGPIPE, SIGTTIN, SIGTTOU, SIGTSTP};
	sigset_t set;
	struct sigaction sa;

	sigemptyset(&set);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = noop_handler;
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) {
		sigaddset(&set, handled[i]);
		/* A real handler: PID 1 of a namespace gets no signal whose
		 * disposition is the default. They stay blocked and are read from
		 * the signalfd; SIGCHLD keeps its default so children are kept
		 * for wait(). */
		if (handled[i] != SIGCHLD)
			sigaction(handled[i], &sa, NULL);
	}
	sa.sa_handler = SIG_IGN;
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &sa, NULL);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	a->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return a->sig_fd < 0 ? -errno : 0;
}

static void reap(struct agent *a)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (!exec_reaped(a, pid, status))
			pidns_reaped(a, pid);
}

static void on_signals(struct agent *a)
{
	struct signalfd_siginfo si;
	while (read(a->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
		case SIGQUIT:
			a->terminating = true;
			break;
		default:
			break;
		}
	}
	reap(a);
}

/* SIGTERM: kill everything, reap what can be reaped, exit. */
static _Noreturn void shutdown_agent(struct agent *a)
{
	if (a->is_init) {
		kill(-1, SIGKILL);
	} else {
		/* never kill(-1) outside a namespace: only what is below us */
		for (struct conn *c = a->conns; c; c = c->next)
			for (struct exec_ch *e = c->execs; e; e = e->next)
				exec_abandon(a, e);
	}
	int64_t until = agent_now_ns() + AGENT_KILL_CONFIRM_NS;
	while (agent_now_ns() < until) {
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			;
		if (pid < 0 && errno == ECHILD && (a->is_init || procs_kill_descendants(a) <= 0))
			break;
		if (!a->is_init)
			procs_kill_descendants(a);
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	while (a->conns) {
		struct conn *c = a->conns;
		a->conns = c->next;
		conn_free(c);
	}
	_exit(0);
}

/* Free dead connections and finished execs. */
static void sweep(struct agent *a)
{
	struct conn **cp = &a->conns;
	while (*cp) {
		struct conn *c = *cp;
		struct exec_ch **ep = &c->execs;
		while (*ep) {
			struct exec_ch *e = *ep;
			if (e->done) {
				*ep = e->next;
				c->nchannels--;
				exec_free(e);
			} else {
				ep = &e->next;
			}
		}
		if (c->dead) {
			if (a->stdio)
				a->terminating = true; /* the only way in is gone */
			egress_conn_closed(a, c);
			*cp = c->next;
			a->nconns--;
			conn_free(c);
		} else {
			cp = &c->next;
		}
	}
	egress_sweep(a);
}

enum { K_LISTEN, K_SIG, K_CONN, K_OUT, K_IN, K_EGRESS, K_TUNNEL };
struct slot {
	int kind;
	int stream;
	void *obj;
};

struct pollset {
	struct pollfd *fds;
	struct slot *slots;
	size_t n, cap;
};

static int pollset_add(struct pollset *ps, int fd, short events, int kind, void *obj, int stream)
{
	if (fd < 0 || events == 0)
		return 0;
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct pollfd *f = realloc(ps->fds, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		ps->fds = f;
		struct slot *s = realloc(ps->slots, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		ps->slots = s;
		ps->cap = cap;
	}
	ps->fds[ps->n] = (struct pollfd){.fd = fd, .events = events};
	ps->slots[ps->n] = (struct slot){.kind = kind, .stream = stream, .obj = obj};
	ps->n++;
	return 0;
}

static int build_pollset(struct agent *a, struct pollset *ps)
{
	int rc = 0;
	ps->n = 0;
	rc |= pollset_add(ps, a->sig_fd, POLLIN, K_SIG, NULL, 0);
	if (a->nconns < AGENT_MAX_CONNS)
		rc |= pollset_add(ps, a->listen_fd, POLLIN, K_LISTEN, NULL, 0);
	for (struct conn *c = a->conns; c; c = c->next) {
		if (c->dead)
			continue;
		short ev = 0;
		if (!c->closing && conn_queued(c) < AGENT_OUTQ_HIGH)
			ev |= POLLIN;
		if (conn_queued(c) > 0)
			ev |= POLLOUT;
		rc |= pollset_add(ps, c->fd, ev, K_CONN, c, 0);
		for (struct exec_ch *e = c->execs; e; e = e->next) {
			if (e->done)
				continue;
			for (int s = 0; s < 2; s++)
				rc |= pollset_add(ps, e->out_fd[s], exec_out_events(e, s), K_OUT, e,
						  s);
			rc |= pollset_add(ps, e->in_fd, exec_in_events(e), K_IN, e, 0);
		}
	}
	if (a->egress) {
		rc |= pollset_add(ps, a->egress->listen_fd, egress_listen_events(a), K_EGRESS, NULL,
				  0);
		for (struct tunnel *t = a->egress->tunnels; t; t = t->next)
			rc |= pollset_add(ps, t->fd, egress_tunnel_events(a, t), K_TUNNEL, t, 0);
	}
	return rc;
}

static void dispatch(struct agent *a, struct pollset *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		short re = ps->fds[i].revents;
		if (re == 0)
			continue;
		struct slot *s = &ps->slots[i];
		switch (s->kind) {
		case K_SIG:
			on_signals(a);
			break;
		case K_LISTEN:
			conn_accept(a);
			break;
		case K_CONN: {
			struct conn *c = s->obj;
			if (!c->dead && (re & POLLOUT))
				conn_flush(c);
			if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR)))
				conn_on_readable(a, c);
			break;
		}
		case K_OUT: {
			struct exec_ch *e = s->obj;
			if (!e->done && !e->conn->dead && e->out_fd[s->stream] >= 0)
				exec_on_output(e, s->stream);
			break;
		}
		case K_EGRESS:
			egress_accept(a);
			break;
		case K_TUNNEL:
			/* freed only by egress_sweep(), after dispatch */
			if (a->egress)
				egress_on_tunnel(a, s->obj, re);
			break;
		case K_IN: {
			struct exec_ch *e = s->obj;
			if (!e->done && !e->conn->dead && e->in_fd >= 0)
				exec_on_stdin_writable(e);
			break;
		}
		}
	}
}

static int run(struct agent *a)
{
	struct pollset ps = {0};
	for (;;) {
		int64_t now = agent_now_ns();
		int64_t next = INT64_MAX;
		for (struct conn *c = a->conns; c; c = c->next) {
			for (struct exec_ch *e = c->execs; e; e = e->next) {
				int64_t t = exec_tick(a, e, now);
				if (t < next)
					next = t;
			}
			/* Flush first: a send that fails marks the connection closing
			 * with nothing queued, and it must be closed here - a closing
			 * connection with nothing to send is not polled, so it would
			 * wait for some other event (issue 15, the fault suite's
			 * exec.sent-client-KILL: a killed client's workload ran on
			 * until its own deadline). */
			if (!c->dead && conn_queued(c) > 0)
				conn_flush(c);
			if (c->closing && !c->dead) {
				if (conn_queued(c) == 0 || now >= c->close_deadline_ns)
					conn_close(a, c);
				else if (c->close_deadline_ns < next)
					next = c->close_deadline_ns;
			}
		}
		sweep(a);
		if (a->terminating)
			shutdown_agent(a);
		/* Once, when our HELLO has gone out (flushed above): the host
		 * then finishes its own start before its first request. */
		if (!a->sig_known && greeted(a)) {
			learn_signals(a);
			continue;
		}

		if (build_pollset(a, &ps) < 0) {
			/* out of memory: wait a little and retry rather than die as PID 1 */
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		int timeout = -1;
		if (next != INT64_MAX) {
			int64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
			timeout = ms > INT_MAX ? INT_MAX : (int)ms;
		}
		int n = poll(ps.fds, ps.n, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			agent_log("poll: %s", strerror(errno));
			return 1;
		}
		dispatch(a, &ps);
	}
}

/* --stdio: stdin, a connected stream socket, is the connection. It moves to
 * a close-on-exec fd of its own and 0 becomes /dev/null. Stdout is left as
 * it is: under gVisor each stdio fd is a separate import of the host file,
 * and releasing the last reference to one that is the same socket shuts the
 * socket down for all of them. */
static int use_stdio(struct agent *a)
{
	struct stat st;
	if (fstat(STDIN_FILENO, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		agent_log("--stdio: stdin must be a connected stream socket");
		return -1;
	}
	int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		agent_log("--stdio: %s", strerror(errno));
		return -1;
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		close(null);
	}
	a->listen_fd = -1;
	if (conn_add(a, fd) < 0) {
		agent_log("--stdio: out of memory");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct agent agent;
	struct agent *a = &agent;
	const char *work = AGENT_DEFAULT_WORK;
	bool engine = false;

	/* One file operation for a container engine's exec (agent/file.c). */
	if (argc >= 2 && strcmp(argv[1], "file") == 0)
		return agent_file_main(argc, argv);
	int vm_listen = -1;
	/* The guest's init in a `vm` sandbox: vm_init.c builds the guest and
	 * hands over the listening socket (its own options; workloads nest). */
	if (argc > 1 && strcmp(argv[1], "--vm") == 0)
		vm_listen = vm_init(argc, argv, &work);
	for (int i = 1; vm_listen < 0 && i < argc; i++) {
		if (strcmp(argv[i], "--stdio") == 0) {
			a->stdio = true;
		} else if (strcmp(argv[i], "--engine") == 0) {
			/* a container engine's exec: pipes, not a socket
			 * (engine_relay.c); workloads inherit the exec's
			 * environment, the container's (exec.c) */
			a->stdio = true;
			engine = true;
		} else if (strcmp(argv[i], "--no-nest") == 0) {
			a->no_nest = true;
		} else if (strcmp(argv[i], "--work") == 0 && i + 1 < argc) {
			work = argv[++i];
		} else if (strncmp(argv[i], "--work=", 7) == 0) {
			work = argv[i] + 7;
		} else {
			usage();
			return 2;
		}
	}
	if (work[0] != '/' || strlen(work) >= MSB_PROTO_MAX_PATH) {
		agent_log("--work must be an absolute path");
		return 2;
	}
	a->work = strdup(work);
	if (!a->work)
		return 1;

	if (engine) {
		if (engine_relay_start() < 0)
			return 2;
		agent_engine_exec = true;
	}
	if (a->stdio) {
		if (use_stdio(a) < 0)
			return 2;
	} else if ((a->listen_fd = vm_listen >= 0 ? vm_listen
						  : parse_fd(getenv("MSB_AGENT_LISTEN_FD"))) < 0) {
		agent_log("MSB_AGENT_LISTEN_FD must name the listening socket");
		return 2;
	}
	struct stat st;
	int acc = 0;
	socklen_t acclen = sizeof(acc);
	if (a->stdio) {
		/* served above */
	} else if (fstat(a->listen_fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
		   getsockopt(a->listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &acclen) < 0 || !acc) {
		agent_log("fd %d is not a listening socket", a->listen_fd);
		return 2;
	}
	int fl = a->stdio ? 0 : fcntl(a->listen_fd, F_GETFL);
	if (!a->stdio && (fl < 0 || fcntl(a->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
			  fcntl(a->listen_fd, F_SETFD, FD_CLOEXEC) < 0)) {
		agent_log("listening socket: %s", strerror(errno));
		return 1;
	}
	unsetenv("MSB_AGENT_LISTEN_FD");
	/* Optional: the synthesized /etc (msb-agent as a sandbox's init). */
	a->etc_fd = parse_fd(getenv("MSB_AGENT_ETC_FD"));
	if (a->etc_fd >= 0 && (fstat(a->etc_fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
			       fcntl(a->etc_fd, F_SETFD, FD_CLOEXEC) < 0)) {
		agent_log("MSB_AGENT_ETC_FD: fd %d is not a directory", a->etc_fd);
		return 2;
	}
	unsetenv("MSB_AGENT_ETC_FD");

	a->self = getpid();
	a->is_init = a->self == 1;
	/* Not init: still adopt orphans of our workloads so they are reaped and
	 * found by the kill hunt. */
	if (!a->is_init)
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	/* Not dumpable: the agent's memory (/proc/PID/mem, ptrace) then wants
	 * CAP_SYS_PTRACE, which no workload has - nor a child sharing that
	 * memory until its execve (child_spawn). A workload's execve makes it
	 * dumpable again. An engine's exec (--engine) keeps its dumpable
	 * state and forks its children: it is one of the container's
	 * processes, beside workloads that are not its own (exec.c). */
	if (!engine)
		a->undumpable = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
	a->cap_last = read_cap_last();
	/* Our own pid namespace's procfs, before anything covers /proc. */
	a->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	a->cap_bset = read_cap_bset(a->proc_fd);
	int rc = setup_signals(a);
	if (rc < 0) {
		agent_log("signals: %s", strerror(-rc));
		return 1;
	}
	/* A failure here is said again on every exec (which it refuses): the
	 * host learns it from a call, not from a dead agent. */
	if (pidns_init(a) < 0)
		agent_log("workloads cannot run: %s", a->nest_error);
	return run(a);
}
