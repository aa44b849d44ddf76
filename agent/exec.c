/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exec channels: spawn, stdin/stdout/stderr relayed as DATA under credit,
 * the output budget, the deadline, the group kill and the EXIT report.
 *
 * Budget (bounded exec): the agent forwards at most `output_budget` bytes of
 * stdout+stderr. It keeps reading after the budget is spent; the first byte
 * beyond it marks the channel truncated and the agent closes its ends of both
 * pipes, so the workload's next write gets SIGPIPE/EPIPE, as if piped into
 * `head -c BUDGET`. The workload is not killed for it: EXIT reports its real
 * status (often 141 = SIGPIPE) with MSB_PROTO_EXIT_TRUNCATED.
 *
 * EXIT is sent once the leader has been reaped, both output pipes have
 * reached end of file (a background process that keeps them open keeps the
 * exec running, up to its deadline), and any kill has finished its hunt.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"

static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
};

static void send_channel_error(struct conn *c, uint32_t id, uint16_t code, const char *msg)
{
	uint8_t buf[MSB_PROTO_HEADER_SIZE + 4 + MSB_PROTO_MAX_ERROR_MSG];
	conn_queue(c, buf, msb_proto_enc_error(buf, sizeof(buf), id, code, msg));
}

static void send_credit(struct exec_ch *e, uint32_t n)
{
	uint8_t buf[32];
	conn_queue(e->conn, buf, msb_proto_enc_credit(buf, sizeof(buf), e->id, n));
}

static void protocol_fail(struct exec_ch *e, const char *msg)
{
	conn_fail(e->conn, MSB_PROTO_ERR_PROTOCOL, msg);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* ---- request -> argv/envp ------------------------------------------------ */

static void strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

static char *str_dup(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		if (n > 0)
			memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

static char *str_cat3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *s = malloc(la + lb + lc + 1);
	if (s) {
		memcpy(s, a, la);
		memcpy(s + la, b, lb);
		memcpy(s + la + lb, c, lc + 1);
	}
	return s;
}

static char **build_argv(const msb_proto_exec_open *m)
{
	msb_proto_strlist it = m->argv;
	msb_proto_str s;
	bool shell = (m->flags & MSB_PROTO_EXEC_SHELL) != 0;
	size_t n = shell ? 3 : it.count;
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return NULL;
	size_t i = 0;
	if (shell) {
		v[i++] = str_dup((const uint8_t *)"sh", 2);
		v[i++] = str_dup((const uint8_t *)"-c", 2);
	}
	while (msb_proto_strlist_next(&it, &s)) {
		if (!(v[i++] = str_dup(s.ptr, s.len)))
			break;
	}
	for (size_t j = 0; j < n; j++) {
		if (!v[j]) {
			strv_free(v);
			return NULL;
		}
	}
	return v;
}

static size_t key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq ? (size_t)(eq - kv) : strlen(kv);
}

bool agent_engine_exec;

/* Defaults (or, with --engine, the agent's own environment), overridden
 * key by key by the request, plus PWD (logical). */
static char **build_envp(const msb_proto_exec_open *m, const char *logical,
			 const char *const *extra)
{
	extern char **environ;
	const char *const *base = default_env;
	size_t n_base = sizeof(default_env) / sizeof(default_env[0]);
	if (agent_engine_exec && environ && environ[0]) {
		base = (const char *const *)environ;
		for (n_base = 0; base[n_base]; n_base++)
			;
	}
	size_t n_extra = 0;
	while (extra && extra[n_extra])
		n_extra++;
	size_t cap = n_base + n_extra + m->env.count + 2;
	char **v = calloc(cap, sizeof(*v));
	size_t n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < n_base; i++) {
		if (strncmp(base[i], "PWD=", 4) == 0)
			continue; /* the logical one below */
		if (!(v[n++] = str_dup((const uint8_t *)base[i], strlen(base[i]))))
			goto fail;
	}
	/* The egress proxy's variables (egress.c), when it listens. */
	for (size_t i = 0; i < n_extra; i++)
		if (!(v[n++] = str_dup((const uint8_t *)extra[i], strlen(extra[i]))))
			goto fail;
	msb_proto_strlist it = m->env;
	msb_proto_str s;
	while (msb_proto_strlist_next(&it, &s)) {
		char *kv = str_dup(s.ptr, s.len);
		if (!kv)
			goto fail;
		size_t kl = key_len(kv);
		size_t j;
		for (j = 0; j < n; j++)
			if (key_len(v[j]) == kl && memcmp(v[j], kv, kl) == 0)
				break;
		if (j < n) {
			free(v[j]);
			v[j] = kv;
		} else {
			v[n++] = kv;
		}
	}
	bool has_pwd = false;
	for (size_t j = 0; j < n; j++)
		if (strncmp(v[j], "PWD=", 4) == 0)
			has_pwd = true;
	if (!has_pwd && !(v[n++] = str_cat3("PWD=", logical, "")))
		goto fail;
	return v;
fail:
	strv_free(v);
	return NULL;
}

static const char *env_path(char **envp)
{
	for (size_t i = 0; envp[i]; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			return envp[i] + 5;
	return "";
}

/* ---- open ---------------------------------------------------------------- */

/*
 * May the exec's child share the agent's memory until its execve
 * (child_spawn)? While it does, a process that stops it (SIGSTOP) stops the
 * agent too, which waits for that execve; so only when no process that is
 * not the agent's own exists to do so: the agent has no child at all, not
 * even a zombie. Every workload is the agent's descendant (it is PID 1 or
 * a subreaper, main.c), and an orphan comes back to it; so with no child,
 * no workload is alive - and none can appear before the spawn, as only
 * the agent makes processes. Where the workloads' reaper lives (the nested
 * pid namespace) it is a child, and every spawn forks; so does an
 * engine's exec, whose container holds workloads of other execs.
 */
static bool child_may_share_memory(const struct agent *a)
{
	siginfo_t si;
	if (!a->undumpable || agent_engine_exec)
		return false;
	return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

static void exec_on_eof_tty(struct exec_ch *e);

#ifndef TIOCGPTPEER
#define TIOCGPTPEER 0x5441
#endif

/*
 * A pseudo-terminal for a TTY exec: the master (nonblocking, for the agent)
 * and the slave (the workload's stdin, stdout and stderr), sized as asked.
 * The slave is opened through the master (TIOCGPTPEER), so no path in the
 * guest's /dev/pts is trusted; kernels without it get ptsname's. -errno.
 */
static int open_pty(const msb_proto_winsize *ws, int *master_out, int *slave_out, uint8_t *veof)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -errno;
	if (unlockpt(m) < 0) {
		int e = errno;
		close(m);
		return -e;
	}
	int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (sl < 0) {
		char name[64];
		if (ptsname_r(m, name, sizeof(name)) != 0 ||
		    (sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
			int e = errno ? errno : EIO;
			close(m);
			return -e;
		}
	}
	struct winsize w = {.ws_row = ws->rows, .ws_col = ws->cols};
	struct termios t;
	if (ioctl(m, TIOCSWINSZ, &w) < 0) {
		int e = errno;
		close(m);
		close(sl);
		return -e;
	}
	*veof = tcgetattr(sl, &t) == 0 && t.c_cc[VEOF] ? t.c_cc[VEOF] : 4;
	*master_out = m;
	*slave_out = sl;
	return 0;
}

/* The running exec's channel: its descriptors taken from the caller (set to
 * -1 there), its credit, budget and deadline, its stdin wiring. */
static void exec_install(struct conn *c, struct exec_ch *e, uint32_t id, pid_t pid,
			 const msb_proto_exec_open *m, uint8_t veof, int *master, int *master_in,
			 int pin[2], int pout[2], int perr[2])
{
	const bool tty = (m->flags & MSB_PROTO_EXEC_TTY) != 0;
	e->conn = c;
	e->id = id;
	e->pid = pid;
	e->tty = tty;
	e->veof = veof;
	if (tty) {
		/* one master, two descriptors: stdin may end before output does */
		e->in_fd = *master_in;
		e->out_fd[0] = *master;
		e->out_fd[1] = -1;
		e->eof_sent[1] = true; /* a terminal has one output stream */
		*master_in = *master = -1;
	} else {
		e->in_fd = pin[1];
		e->out_fd[0] = pout[0];
		e->out_fd[1] = perr[0];
		pin[1] = pout[0] = perr[0] = -1;
	}
	set_nonblock(e->in_fd);
	set_nonblock(e->out_fd[0]);
	if (e->out_fd[1] >= 0)
		set_nonblock(e->out_fd[1]);
	e->stdin_expected = (m->flags & MSB_PROTO_EXEC_STDIN) != 0;
	e->out_credit.avail = m->initial_credit;
	e->bounded = (m->flags & MSB_PROTO_EXEC_BOUNDED) != 0;
	e->budget_left = m->output_budget;
	uint64_t ms = m->timeout_ms;
	e->deadline_ns = agent_now_ns() + (int64_t)ms * 1000000LL;
	e->next = c->execs;
	c->execs = e;
	c->nchannels++;
	if (e->stdin_expected) {
		e->in_credit.avail = AGENT_STDIN_WINDOW;
		send_credit(e, AGENT_STDIN_WINDOW);
	} else if (tty) {
		/* no input: the terminal reads end of file */
		exec_on_eof_tty(e);
	} else {
		/* no stdin: the workload reads end of file */
		close_fd(&e->in_fd);
	}
}

void exec_open(struct agent *a, struct conn *c, uint32_t id, const msb_proto_exec_open *m)
{
	char *logical = NULL;
	char **argv = NULL, **envp = NULL, **sh_argv = NULL;
	size_t argc;
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	int master = -1, slave = -1, master_in = -1;
	int cwd_fd = -1, cwd_error = 0;
	uint8_t veof = 4;
	const bool tty = (m->flags & MSB_PROTO_EXEC_TTY) != 0;
	struct exec_ch *e = NULL;

	if (c->nchannels >= MSB_PROTO_MAX_CHANNELS) {
		send_channel_error(c, id, MSB_PROTO_ERR_LIMIT, "too many open channels");
		return;
	}
	if (tty && c->version < MSB_PROTO_VERSION_TTY) {
		send_channel_error(c, id, MSB_PROTO_ERR_UNSUPPORTED,
				   "a terminal needs protocol version 2");
		return;
	}
	int r = workdir_resolve(a->work, &m->cwd, &logical);
	if (r < 0) {
		send_channel_error(c, id,
				   r == -ENOMEM ? MSB_PROTO_ERR_SPAWN : MSB_PROTO_ERR_BAD_REQUEST,
				   r == -ENOMEM ? "out of memory" : "working directory too long");
		return;
	}
	/* Not openable: the exec still runs, and its child says why (126). */
	cwd_fd = workdir_open(logical);
	if (cwd_fd < 0) {
		cwd_error = -cwd_fd;
		cwd_fd = -1;
	}
	e = calloc(1, sizeof(*e));
	argv = build_argv(m);
	envp = build_envp(m, logical, egress_env(a));
	for (argc = 0; argv && argv[argc]; argc++)
		;
	sh_argv = calloc(argc + 3, sizeof(*sh_argv));
	if (!e || !argv || !envp || !sh_argv ||
	    (tty && !(e->in_buf = malloc(AGENT_STDIN_WINDOW + 1)))) {
		send_channel_error(c, id, MSB_PROTO_ERR_SPAWN, "out of memory");
		goto out;
	}
	if (tty) {
		r = open_pty(&m->winsize, &master, &slave, &veof);
		if (r < 0 || (master_in = fcntl(master, F_DUPFD_CLOEXEC, 3)) < 0) {
			send_channel_error(c, id, MSB_PROTO_ERR_SPAWN,
					   "cannot allocate a pseudo-terminal");
			goto out;
		}
	} else if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
		   pipe2(perr, O_CLOEXEC) < 0) {
		send_channel_error(c, id, MSB_PROTO_ERR_SPAWN, "cannot create pipes");
		goto out;
	}
	/* PID 1: the workloads' pid namespace must be there, or nothing runs. */
	if (pidns_ensure(a) < 0) {
		send_channel_error(c, id, MSB_PROTO_ERR_SPAWN, a->nest_error);
		goto out;
	}
	struct spawn sp = {
		.file = (m->flags & MSB_PROTO_EXEC_SHELL) ? "/bin/sh" : argv[0],
		.argv = argv,
		.envp = envp,
		.path_env = env_path(envp),
		.cwd_fd = cwd_fd,
		.cwd_error = cwd_error,
		.cwd = logical,
		.stdio = {pin[0], pout[1], perr[1]},
		.ctty = tty,
		.cap_last = a->cap_last,
		.cap_bset = a->cap_bset,
		.sig_reset = a->sig_known ? a->sig_nondefault : ~0ull,
		.proc_fd = a->proc_fd,
		.file_op = (m->flags & MSB_PROTO_EXEC_FILE) != 0,
		.sh_argv = sh_argv,
	};
	if (tty)
		sp.stdio[0] = sp.stdio[1] = sp.stdio[2] = slave;
	/* The vm guest's fingerprint (layer.c): only as a file request. */
	if (sp.file_op && argv[0] && strcmp(argv[0], "layer") == 0 && !argv[1] &&
	    vm_layer.upper_fd >= 0)
		sp.layer = &vm_layer;
	pid_t pid = child_spawn(&sp, child_may_share_memory(a));
	if (pid < 0) {
		send_channel_error(c, id, MSB_PROTO_ERR_SPAWN, "fork failed");
		goto out;
	}

	close_fd(&pin[0]);
	close_fd(&pout[1]);
	close_fd(&perr[1]);
	/* the agent keeps no slave: the master reads EIO once the workloads
	 * have all closed it */
	close_fd(&slave);
	exec_install(c, e, id, pid, m, veof, &master, &master_in, pin, pout, perr);
	e = NULL;
out:
	if (e)
		free(e->in_buf);
	free(e);
	strv_free(argv);
	strv_free(envp);
	free(sh_argv);
	free(logical);
	close_fd(&cwd_fd);
	close_fd(&pin[0]);
	close_fd(&pin[1]);
	close_fd(&pout[0]);
	close_fd(&pout[1]);
	close_fd(&perr[0]);
	close_fd(&perr[1]);
	close_fd(&master);
	close_fd(&master_in);
	close_fd(&slave);
}

/* ---- output -------------------------------------------------------------- */

static void close_stream(struct exec_ch *e, int s)
{
	close_fd(&e->out_fd[s]);
	if (!e->eof_sent[s]) {
		uint8_t buf[32];
		e->eof_sent[s] = true;
		conn_queue(e->conn, buf,
			   msb_proto_enc_eof(buf, sizeof(buf), e->id,
					     (uint8_t)(MSB_PROTO_STDOUT + s)));
	}
}

static void truncate_output(struct exec_ch *e)
{
	e->truncated = true;
	close_stream(e, 0);
	close_stream(e, 1);
}

short exec_out_events(const struct exec_ch *e, int s)
{
	if (e->out_fd[s] < 0 || conn_queued(e->conn) >= AGENT_OUTQ_HIGH)
		return 0;
	if (e->bounded && e->budget_left == 0)
		return e->truncated ? 0 : POLLIN;
	return e->out_credit.avail > 0 ? POLLIN : 0;
}

/* One read from stream s. Returns false when nothing more can be read now. */
static bool read_once(struct exec_ch *e, int s)
{
	struct conn *c = e->conn;
	if (e->bounded && e->budget_left == 0) {
		/* the budget is spent: one more byte means truncation */
		uint8_t probe[512];
		ssize_t n = read(e->out_fd[s], probe, sizeof(probe));
		if (n > 0)
			truncate_output(e);
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			close_stream(e, s);
		return false;
	}
	size_t chunk = e->out_credit.avail;
	if (chunk > c->peer_max_payload - 1)
		chunk = c->peer_max_payload - 1;
	if (e->bounded && chunk > e->budget_left)
		chunk = (size_t)e->budget_left;
	if (chunk == 0)
		return false;
	uint8_t *dst = conn_reserve(c, MSB_PROTO_DATA_OVERHEAD + chunk);
	if (!dst)
		return false;
	ssize_t n = read(e->out_fd[s], dst + MSB_PROTO_DATA_OVERHEAD, chunk);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			close_stream(e, s);
		return false;
	}
	if (n == 0) {
		close_stream(e, s);
		return false;
	}
	msb_proto_put_header(dst, (uint32_t)n + 1, MSB_PROTO_DATA, 0, e->id);
	dst[MSB_PROTO_HEADER_SIZE] = (uint8_t)(MSB_PROTO_STDOUT + s);
	conn_commit(c, MSB_PROTO_DATA_OVERHEAD + (size_t)n);
	msb_proto_credit_take(&e->out_credit, (uint32_t)n);
	if (e->bounded)
		e->budget_left -= (uint64_t)n;
	return true;
}

void exec_on_output(struct exec_ch *e, int s)
{
	for (int i = 0; i < 8 && e->out_fd[s] >= 0 && exec_out_events(e, s); i++)
		if (!read_once(e, s))
			break;
}

/* ---- stdin --------------------------------------------------------------- */

static void maybe_regrant(struct exec_ch *e)
{
	if (e->in_regrant == 0 || e->stdin_eof)
		return;
	if (e->in_regrant >= AGENT_STDIN_WINDOW / 4 || e->in_len == 0) {
		if (msb_proto_credit_grant(&e->in_credit, e->in_regrant) == 0)
			send_credit(e, e->in_regrant);
		e->in_regrant = 0;
	}
}

short exec_in_events(const struct exec_ch *e)
{
	return e->in_fd >= 0 && e->in_len > 0 ? POLLOUT : 0;
}

static void stdin_broken(struct exec_ch *e)
{
	/* the workload closed its stdin: drop what is pending and grant no
	 * more - the host stops reading its own input here, so what nobody
	 * will read stays where it was (a pipe's next reader gets it); the
	 * exec's EXIT ends the host's side */
	close_fd(&e->in_fd);
	e->in_regrant = 0;
	e->in_len = 0;
}

void exec_on_stdin_writable(struct exec_ch *e)
{
	while (e->in_fd >= 0 && e->in_len > 0) {
		ssize_t n = write(e->in_fd, e->in_buf, e->in_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				stdin_broken(e);
			break;
		}
		memmove(e->in_buf, e->in_buf + n, e->in_len - (size_t)n);
		e->in_len -= (size_t)n;
		e->in_regrant += (uint32_t)n;
	}
	if (e->in_len == 0 && e->stdin_eof)
		close_fd(&e->in_fd);
	maybe_regrant(e);
}

void exec_on_data(struct exec_ch *e, const msb_proto_data *d)
{
	if (d->stream != MSB_PROTO_STDIN)
		return protocol_fail(e, "host DATA must be stdin");
	if (!e->stdin_expected || e->stdin_eof)
		return protocol_fail(e, "stdin DATA not expected");
	if (msb_proto_credit_take(&e->in_credit, d->len) < 0)
		return protocol_fail(e, "stdin DATA beyond the granted credit");
	if (e->in_fd < 0)
		return; /* the workload's stdin is closed: dropped, no new credit */
	if (!e->in_buf && !(e->in_buf = malloc(AGENT_STDIN_WINDOW))) {
		stdin_broken(e);
		e->in_regrant += d->len;
		maybe_regrant(e);
		return;
	}
	/* credit accounting keeps in_len + d->len within the window */
	if (e->in_len + d->len > AGENT_STDIN_WINDOW)
		return protocol_fail(e, "stdin window overrun");
	memcpy(e->in_buf + e->in_len, d->bytes, d->len);
	e->in_len += d->len;
	exec_on_stdin_writable(e);
}

/* A terminal has no end of input: the host's EOF becomes the terminal's
 * end-of-file character (VEOF, ^D), typed after what is still pending, as
 * a user at a keyboard would; then the agent's input side closes (the
 * master stays open for the output). */
static void exec_on_eof_tty(struct exec_ch *e)
{
	e->stdin_eof = true;
	if (e->in_fd < 0)
		return;
	/* in_buf holds at most the window, and was made one byte larger */
	e->in_buf[e->in_len++] = e->veof;
	exec_on_stdin_writable(e);
}

void exec_on_eof(struct exec_ch *e, uint8_t stream)
{
	if (stream != MSB_PROTO_STDIN || !e->stdin_expected || e->stdin_eof)
		return protocol_fail(e, "unexpected EOF from host");
	if (e->tty)
		return exec_on_eof_tty(e);
	e->stdin_eof = true;
	if (e->in_len == 0)
		close_fd(&e->in_fd);
}

void exec_on_winsize(struct exec_ch *e, const msb_proto_winsize *ws)
{
	if (!e->tty)
		return protocol_fail(e, "WINSIZE on an exec without a terminal");
	/* either descriptor of the master; with both closed nothing is left on
	 * the terminal to tell */
	int fd = e->out_fd[0] >= 0 ? e->out_fd[0] : e->in_fd;
	struct winsize w = {.ws_row = ws->rows, .ws_col = ws->cols};
	if (fd >= 0)
		ioctl(fd, TIOCSWINSZ, &w); /* the kernel sends SIGWINCH */
}

void exec_on_credit(struct exec_ch *e, uint32_t bytes)
{
	if (msb_proto_credit_grant(&e->out_credit, bytes) < 0)
		protocol_fail(e, "credit beyond the window limit");
}

/* ---- kill ---------------------------------------------------------------- */

/* Another live exec of this agent whose leader has this pid (reused)? */
static bool pid_taken(struct agent *a, const struct exec_ch *self)
{
	for (struct conn *c = a->conns; c; c = c->next)
		for (struct exec_ch *e = c->execs; e; e = e->next)
			if (e != self && !e->done && e->pid == self->pid)
				return true;
	return false;
}

static int kill_round(struct agent *a, struct exec_ch *e)
{
	/* The hunt reads the parent chains before anything dies, so that a
	 * descendant which left the session is still seen below the leader;
	 * then the group, for members forked during the scan. While the
	 * leader is unreaped its pid (= group = session id) cannot be reused;
	 * after that, only if no other exec took it over. */
	int live = procs_hunt(a, e);
	if (!e->reaped || !pid_taken(a, e))
		kill(-e->pid, SIGKILL);
	return live;
}

void exec_start_kill(struct agent *a, struct exec_ch *e, uint8_t reason)
{
	if (e->killing || e->done)
		return;
	int64_t now = agent_now_ns();
	e->killing = true;
	e->kill_reason = reason;
	e->kill_deadline_ns = now + AGENT_KILL_CONFIRM_NS;
	e->next_scan_ns = now + AGENT_KILL_SCAN_NS;
	kill_round(a, e);
}

void exec_abandon(struct agent *a, struct exec_ch *e)
{
	if (e->done)
		return;
	kill_round(a, e);
	close_fd(&e->in_fd);
	close_fd(&e->out_fd[0]);
	close_fd(&e->out_fd[1]);
	e->done = true;
}

bool exec_reaped(struct agent *a, pid_t pid, int status)
{
	for (struct conn *c = a->conns; c; c = c->next) {
		for (struct exec_ch *e = c->execs; e; e = e->next) {
			if (e->pid == pid && !e->reaped && !e->done) {
				e->reaped = true;
				e->status = status;
				return true;
			}
		}
	}
	return false;
}

/* ---- completion ---------------------------------------------------------- */

static void send_exit(struct exec_ch *e)
{
	msb_proto_exit x = {0};
	if (WIFSIGNALED(e->status)) {
		x.how = MSB_PROTO_SIGNALED;
		x.value = WTERMSIG(e->status);
	} else {
		x.how = MSB_PROTO_EXITED;
		x.value = WEXITSTATUS(e->status);
	}
	if (e->truncated)
		x.flags |= MSB_PROTO_EXIT_TRUNCATED;
	if (e->killing) {
		x.flags |= MSB_PROTO_EXIT_KILLED | e->kill_reason;
		if (e->no_survivor)
			x.flags |= MSB_PROTO_EXIT_NO_SURVIVOR;
	}
	uint8_t buf[32];
	conn_queue(e->conn, buf, msb_proto_enc_exit(buf, sizeof(buf), e->id, &x));
}

int64_t exec_tick(struct agent *a, struct exec_ch *e, int64_t now)
{
	if (e->done || e->conn->dead)
		return INT64_MAX;
	if (!e->killing && now >= e->deadline_ns)
		exec_start_kill(a, e, MSB_PROTO_EXIT_TIMED_OUT);
	if (e->killing && !e->kill_done && now >= e->next_scan_ns) {
		int live = kill_round(a, e);
		if (live == 0) {
			e->kill_done = true;
			e->no_survivor = true;
		} else if (now >= e->kill_deadline_ns) {
			e->kill_done = true;
		} else {
			e->next_scan_ns = now + AGENT_KILL_SCAN_NS;
		}
		if (e->kill_done) {
			/* forward what is left in the pipes while credit allows,
			 * then stop: nothing alive writes any more */
			for (int s = 0; s < 2; s++) {
				exec_on_output(e, s);
				close_stream(e, s);
			}
			close_fd(&e->in_fd);
		}
	}
	if (e->killing && e->kill_done && !e->reaped) {
		int st;
		pid_t r = waitpid(e->pid, &st, WNOHANG);
		if (r == e->pid) {
			e->reaped = true;
			e->status = st;
		} else if (!e->no_survivor || r < 0) {
			/* the leader outlived the hunt (uninterruptible sleep): it has
			 * SIGKILL pending, report that; the reaper discards it later */
			e->reaped = true;
			e->status = SIGKILL;
		}
	}
	if (e->reaped && e->out_fd[0] < 0 && e->out_fd[1] < 0 && (!e->killing || e->kill_done)) {
		close_fd(&e->in_fd);
		send_exit(e);
		e->done = true;
		return INT64_MAX;
	}
	if (e->killing)
		return e->kill_done ? INT64_MAX : e->next_scan_ns;
	return e->deadline_ns;
}

void exec_free(struct exec_ch *e)
{
	close_fd(&e->in_fd);
	close_fd(&e->out_fd[0]);
	close_fd(&e->out_fd[1]);
	free(e->in_buf);
	free(e);
}
