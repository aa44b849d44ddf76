/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stdin, output and terminal of `msb run` and `msb exec` on POSIX
 * (docs/cli-exec.md). The library streams (msb_exec_io); this file decides
 * what is attached, keeps the host's terminal in raw mode while a -t
 * command runs and puts it back on every way out (return, error, signal),
 * and turns SIGINT, SIGTERM and SIGHUP into a cancellation, so the command
 * is killed and a `run` sandbox still disposed of.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "exec_io.h"

/* ---- signals and the host's terminal ----------------------------------------------- */

static msb_cancel *g_cancel;
static msb_tty *g_tty;
static int g_term_fd = -1; /* the host terminal whose size the command's follows */
static int g_raw_fd = -1;  /* in raw mode, to restore */
static struct termios g_saved;
static volatile sig_atomic_t g_signal;

static void restore_terminal(void)
{
	if (g_raw_fd >= 0)
		tcsetattr(g_raw_fd, TCSANOW, &g_saved);
}

static void on_stop(int sig)
{
	/* the command is cancelled, the sandbox disposed of as on any end;
	 * a second signal takes the default action (SA_RESETHAND) */
	g_signal = sig;
	restore_terminal();
	msb_cancel_trigger(g_cancel);
}

static void on_winch(int sig)
{
	int saved = errno;
	struct winsize ws;
	if (g_term_fd >= 0 && ioctl(g_term_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
		msb_tty_resize(g_tty, ws.ws_row, ws.ws_col);
	errno = saved;
}

static void set_handler(int sig, void (*fn)(int), int flags, struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, old);
}

/* ---- output ----------------------------------------------------------------------------- */

struct out {
	bool broken; /* stdout or stderr was closed by its reader */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			poll(&pf, 1, -1);
			continue;
		}
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int on_output(void *ud, int stream, const uint8_t *bytes, size_t len)
{
	struct out *o = ud;
	int r = write_all(stream == 2 ? STDERR_FILENO : STDOUT_FILENO, bytes, len);
	if (r == -EPIPE) {
		o->broken = true;
		return MSB_E_OS;
	}
	return r < 0 ? MSB_E_OS : 0;
}

/* ---- the run ------------------------------------------------------------------------------ */

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFL) >= 0;
}

/* /dev/null: nothing to attach, nothing to drop. */
static bool is_dev_null(int fd)
{
	struct stat st, nul;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && stat("/dev/null", &nul) == 0 &&
	       st.st_rdev == nul.st_rdev;
}

static int first_terminal(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (isatty(fd))
			return fd;
	return -1;
}

int cli_exec_io_run(msb_sandbox *sb, msb_exec_request *req, bool bounded, cli_exec_io *o,
		    msb_exec_result *res, int *status, msb_error **err)
{
	msb_exec_io io = MSB_EXEC_IO_INIT;
	struct out out = {false};
	struct sigaction old_int, old_term, old_hup, old_pipe, old_winch;
	uint8_t *whole = NULL;
	const unsigned can = msb_sandbox_exec_io(sb);
	int r;

	req->env = (const char *const *)o->env;
	/* stdin: with a terminal (-t) or -i, or whenever it is not a terminal,
	 * so that piped input is never dropped; --no-stdin never. A terminal
	 * the backend cannot give is refused by the library, before stdin is
	 * touched. */
	bool attach = !o->no_stdin && fd_open(STDIN_FILENO) &&
		      (o->tty || o->interactive || !isatty(STDIN_FILENO)) &&
		      !(o->tty && !(can & MSB_EXEC_CAN_TTY));
	if (attach && (can & MSB_EXEC_CAN_STDIN_FD)) {
		io.stdin_fd = STDIN_FILENO;
	} else if (attach && is_dev_null(STDIN_FILENO)) {
		/* nothing to pass */
	} else if (attach && (o->interactive || !isatty(STDIN_FILENO))) {
		/* a backend that takes stdin only whole: a file is read at once;
		 * a pipe only with -i (it may never end), else said, not dropped */
		struct stat st;
		if (o->interactive || (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode))) {
			if ((r = cli_read_whole_stdin(&whole, &req->stdin_len, err)) < 0)
				return r;
			req->stdin_data = whole;
		} else {
			fprintf(stderr,
				"msb: stdin is not attached: backend `%s` takes stdin only whole; "
				"pass -i to read it to its end first, or --no-stdin\n",
				msb_sandbox_backend_name(sb));
		}
	}
	if (can & MSB_EXEC_CAN_OUTPUT) {
		io.output = on_output;
		io.userdata = &out;
	}
	if ((r = msb_cancel_new(&g_cancel, err)) < 0) {
		free(whole);
		return r;
	}
	req->cancel = g_cancel;
	g_signal = 0;
	if (o->tty) {
		unsigned rows = 24, cols = 80;
		struct winsize ws;
		g_term_fd = first_terminal();
		if (g_term_fd >= 0 && ioctl(g_term_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row &&
		    ws.ws_col) {
			rows = ws.ws_row < MSB_TTY_MAX_DIM ? ws.ws_row : MSB_TTY_MAX_DIM;
			cols = ws.ws_col < MSB_TTY_MAX_DIM ? ws.ws_col : MSB_TTY_MAX_DIM;
		}
		if ((r = msb_tty_new(rows, cols, &g_tty, err)) < 0)
			goto out_cancel;
		io.tty = g_tty;
	}
	req->io = &io;

	set_handler(SIGINT, on_stop, SA_RESETHAND, &old_int);
	set_handler(SIGTERM, on_stop, SA_RESETHAND, &old_term);
	set_handler(SIGHUP, on_stop, SA_RESETHAND, &old_hup);
	set_handler(SIGPIPE, SIG_IGN, 0, &old_pipe); /* a closed stdout is an EPIPE */
	if (o->tty)
		set_handler(SIGWINCH, on_winch, SA_RESTART, &old_winch);
	/* raw mode last, so that everything after it restores it */
	if (o->tty && attach && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_saved) == 0) {
		struct termios raw = g_saved;
		cfmakeraw(&raw);
		g_raw_fd = STDIN_FILENO;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0)
			g_raw_fd = -1;
	}

	r = bounded ? msb_sandbox_exec_bounded(sb, req, res, err)
		    : msb_sandbox_exec(sb, req, res, err);

	restore_terminal();
	g_raw_fd = -1;
	if (o->tty)
		sigaction(SIGWINCH, &old_winch, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGINT, &old_int, NULL);

	if (r < 0 && (g_signal || out.broken)) {
		/* ended by us, not by the command: say how, as a shell would */
		*status = g_signal ? 128 + g_signal : 128 + SIGPIPE;
		if (g_signal)
			fprintf(stderr, "msb: CancelledError: the command was cancelled (%s)\n",
				strsignal(g_signal));
		msb_error_free(*err);
		*err = NULL;
		r = 1;
	} else if (r == 0) {
		*status = res->exit_code;
		/* output the backend could not stream: all of it now */
		if (!io.output) {
			write_all(STDOUT_FILENO, res->stdout_bytes, res->stdout_len);
			write_all(STDERR_FILENO, res->stderr_bytes, res->stderr_len);
		}
	}
	msb_tty_free(g_tty);
	g_tty = NULL;
	g_term_fd = -1;
out_cancel:
	msb_cancel_free(g_cancel);
	g_cancel = NULL;
	req->cancel = NULL;
	req->io = NULL;
	req->stdin_data = NULL;
	req->stdin_len = 0;
	free(whole);
	return r;
}

int cli_exec_io_signal(void)
{
	return (int)g_signal;
}
