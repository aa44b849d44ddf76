/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `msb run` and `msb exec` add to a command (docs/cli-exec.md): its
 * environment (--env, --env-file), its stdin (attached when not a terminal,
 * or with -i; never with --no-stdin), its output streamed as it comes, and
 * a terminal (-t) with the host's side in raw mode, restored on every way
 * out.
 */
#ifndef MSB_CLI_EXEC_IO_H
#define MSB_CLI_EXEC_IO_H

#include <stdbool.h>
#include <stddef.h>

#include <msb/sandbox.h>

/* A -t session's bound when --timeout is not given: the longest an exec may
 * be given (7 days, the protocol's cap), i.e. none to speak of. */
#define CLI_TERMINAL_TIMEOUT (7.0 * 24 * 3600)

/* The most stdin read whole for a backend that cannot stream it. */
#define CLI_STDIN_WHOLE_MAX (64u << 20)

/* The largest --env-file read. */
#define CLI_ENV_FILE_MAX (1u << 20)

typedef struct cli_exec_io {
	bool interactive; /* -i: attach stdin even when it is a terminal */
	bool no_stdin;	  /* --no-stdin: never attach it */
	bool tty;	  /* -t */
	/* --env-file entries first, then --env ones (a later entry of the
	 * same name wins in the guest), NULL-terminated, owned */
	char **env;
	size_t n_env;
	/* files: read after the options, so that --env wins whatever the order */
	const char *env_files[16];
	size_t n_env_files;
	char **cli_env;
	size_t n_cli_env;
} cli_exec_io;

/* --env NAME=VALUE. false: refused, *why says so. */
bool cli_exec_io_env(cli_exec_io *o, const char *arg, const char **why);
/* --env-file FILE (kept to read at cli_exec_io_finish). */
bool cli_exec_io_env_file(cli_exec_io *o, const char *path, const char **why);
/* After the options: read the files, order the entries and check them with
 * msb_exec_env_check, so a refusal comes before any sandbox is made. */
int cli_exec_io_finish(cli_exec_io *o, msb_error **err);
void cli_exec_io_clear(cli_exec_io *o);

/*
 * Run req (its env is set here) in sb with o's stdin, output and terminal:
 * output is written to fds 1 and 2 as it comes; *status is the command's
 * exit status, or what msb itself should exit with when a signal
 * (SIGINT, SIGTERM, SIGHUP: the command is cancelled, 128+N) or a closed
 * stdout (141) ended it. Returns 0, or a library error (err set).
 */
int cli_exec_io_run(msb_sandbox *sb, msb_exec_request *req, bool bounded, cli_exec_io *o,
		    msb_exec_result *res, int *status, msb_error **err);

/* The signal (SIGINT, SIGTERM, SIGHUP) that stopped the last
 * cli_exec_io_run, or 0: `msb run` dies of it once its sandbox is disposed. */
int cli_exec_io_signal(void);
/* stdin to its end (at most CLI_STDIN_WHOLE_MAX bytes), for a backend that
 * takes it only whole. (exec_io.c; the platform's read in os.h) */
int cli_read_whole_stdin(uint8_t **out, size_t *len, msb_error **err);

#endif
