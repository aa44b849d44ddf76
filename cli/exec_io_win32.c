/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stdin, output and terminal of `msb run` and `msb exec` on Windows
 * (docs/cli-exec.md, docs/windows.md). stdin is attached when it is not a
 * console (a file or a pipe) or with -i: as a descriptor when the backend
 * streams one, else read to its end first. Output is written as it comes.
 * Ctrl-C, Ctrl-Break and SIGTERM cancel the command, so a `run` sandbox is
 * still disposed of. -t is refused: no console pseudo-terminal is wired.
 */
#include <windows.h>

#include <errno.h>
#include <io.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exec_io.h"
#include "os.h"

static msb_cancel *g_cancel;
static volatile sig_atomic_t g_signal;

static void on_stop(int sig)
{
	g_signal = sig;
	msb_cancel_trigger(g_cancel);
}

struct out {
	bool broken; /* stdout or stderr was closed by its reader */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
		int w = _write(fd, p, chunk);
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int on_output(void *ud, int stream, const uint8_t *bytes, size_t len)
{
	struct out *o = ud;
	int r = write_all(stream == 2 ? 2 : 1, bytes, len);
	if (r == -EPIPE || r == -EINVAL) {
		o->broken = true;
		return MSB_E_OS;
	}
	return r < 0 ? MSB_E_OS : 0;
}

/* The NUL device or no stdin at all: nothing to attach. */
static bool nothing_to_attach(void)
{
	HANDLE h = (HANDLE)_get_osfhandle(0);
	if (h == INVALID_HANDLE_VALUE || h == NULL)
		return true;
	return GetFileType(h) == FILE_TYPE_CHAR && !_isatty(0);
}

int cli_exec_io_run(msb_sandbox *sb, msb_exec_request *req, bool bounded, cli_exec_io *o,
		    msb_exec_result *res, int *status, msb_error **err)
{
	msb_exec_io io = MSB_EXEC_IO_INIT;
	struct out out = {false};
	uint8_t *whole = NULL;
	const unsigned can = msb_sandbox_exec_io(sb);
	int r;

	if (o->tty)
		return msb_error_set(err, MSB_E_NOT_IMPLEMENTED,
				     "-t: msb.exe gives a command no terminal on Windows "
				     "(docs/windows.md)");
	req->env = (const char *const *)o->env;
	bool attach = !o->no_stdin && !nothing_to_attach() && (o->interactive || !_isatty(0));
	if (attach && (can & MSB_EXEC_CAN_STDIN_FD)) {
		io.stdin_fd = 0;
	} else if (attach) {
		if ((r = cli_read_whole_stdin(&whole, &req->stdin_len, err)) < 0)
			return r;
		req->stdin_data = whole;
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
	req->io = &io;
	cli_os_catch_stop_signals(on_stop);

	r = bounded ? msb_sandbox_exec_bounded(sb, req, res, err)
		    : msb_sandbox_exec(sb, req, res, err);

	cli_os_catch_stop_signals(NULL);
	if (r < 0 && (g_signal || out.broken)) {
		*status = g_signal ? 128 + g_signal : 141;
		if (g_signal)
			fprintf(stderr,
				"msb: CancelledError: the command was cancelled (signal %d)\n",
				(int)g_signal);
		msb_error_free(*err);
		*err = NULL;
		r = 1;
	} else if (r == 0) {
		*status = res->exit_code;
		if (!io.output) {
			write_all(1, res->stdout_bytes, res->stdout_len);
			write_all(2, res->stderr_bytes, res->stderr_len);
		}
	}
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
