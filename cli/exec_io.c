/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The environment of `msb run` and `msb exec` (docs/cli-exec.md): --env,
 * --env-file. Their stdin, output and terminal are the platform's:
 * exec_io_posix.c, exec_io_win32.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "exec_io.h"
#include "os.h"

/* ---- the environment ------------------------------------------------------------ */

static bool push(char ***v, size_t *n, const char *s, size_t len)
{
	if (*n >= MSB_EXEC_ENV_MAX)
		return false;
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));
	if (!nv)
		return false;
	*v = nv;
	if (!(nv[*n] = malloc(len + 1)))
		return false;
	memcpy(nv[*n], s, len);
	nv[*n][len] = '\0';
	nv[++*n] = NULL;
	return true;
}

bool cli_exec_io_env(cli_exec_io *o, const char *arg, const char **why)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		*why = "--env wants NAME=VALUE";
		return false;
	}
	if (!push(&o->cli_env, &o->n_cli_env, arg, strlen(arg))) {
		*why = "too many --env entries";
		return false;
	}
	return true;
}

bool cli_exec_io_env_file(cli_exec_io *o, const char *path, const char **why)
{
	if (strcmp(path, "-") == 0) {
		*why = "--env-file cannot read stdin: stdin is the command's";
		return false;
	}
	if (o->n_env_files == sizeof(o->env_files) / sizeof(o->env_files[0])) {
		*why = "at most 16 --env-file files";
		return false;
	}
	o->env_files[o->n_env_files++] = path;
	return true;
}

/*
 * An env file: one NAME=VALUE a line, the value taken literally to the end
 * of the line (no quotes, no expansion; leading blanks and one trailing CR
 * dropped); blank lines and lines starting with '#' skipped. Anything else is refused with
 * its line number, never skipped.
 */
static int read_env_file(cli_exec_io *o, const char *path, msb_error **err)
{
	int fd = cli_os_open_read(path);
	if (fd < 0)
		return msb_error_set(err, MSB_E_NOT_FOUND, "--env-file `%s`: %s", path,
				     strerror(errno));
	char *buf = malloc(CLI_ENV_FILE_MAX + 1);
	size_t n = 0;
	ssize_t r = 0;
	while (buf && n <= CLI_ENV_FILE_MAX &&
	       (r = read(fd, buf + n, CLI_ENV_FILE_MAX + 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	int e = errno;
	close(fd);
	if (!buf)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	int rc = 0;
	if (r < 0)
		rc = msb_error_set(err, MSB_E_OS, "--env-file `%s`: %s", path, strerror(e));
	else if (n > CLI_ENV_FILE_MAX)
		rc = msb_error_set(err, MSB_E_VALUE, "--env-file `%s` is larger than %u bytes",
				   path, CLI_ENV_FILE_MAX);
	else if (memchr(buf, 0, n))
		rc = msb_error_set(err, MSB_E_VALUE, "--env-file `%s` holds a NUL byte", path);
	size_t line = 0;
	for (size_t at = 0; rc == 0 && at < n; line++) {
		char *s = buf + at;
		char *nl = memchr(s, '\n', n - at);
		size_t len = nl ? (size_t)(nl - s) : n - at;
		at += len + (nl ? 1 : 0);
		if (len > 0 && s[len - 1] == '\r')
			len--;
		size_t lead = 0;
		while (lead < len && (s[lead] == ' ' || s[lead] == '\t'))
			lead++;
		if (lead == len || s[lead] == '#')
			continue;
		/* leading blanks are not part of the name */
		s += lead;
		len -= lead;
		const char *eq = memchr(s, '=', len);
		if (!eq || eq == s)
			rc = msb_error_set(err, MSB_E_VALUE,
					   "--env-file `%s` line %zu is not NAME=VALUE", path,
					   line + 1);
		else if (!push(&o->env, &o->n_env, s, len))
			rc = msb_error_set(err, MSB_E_VALUE, "env: more than %u entries",
					   MSB_EXEC_ENV_MAX);
	}
	free(buf);
	return rc;
}

int cli_exec_io_finish(cli_exec_io *o, msb_error **err)
{
	for (size_t i = 0; i < o->n_env_files; i++) {
		int r = read_env_file(o, o->env_files[i], err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < o->n_cli_env; i++)
		if (!push(&o->env, &o->n_env, o->cli_env[i], strlen(o->cli_env[i])))
			return msb_error_set(err, MSB_E_VALUE, "env: more than %u entries",
					     MSB_EXEC_ENV_MAX);
	return msb_exec_env_check((const char *const *)o->env, err);
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void cli_exec_io_clear(cli_exec_io *o)
{
	strv_free(o->env, o->n_env);
	strv_free(o->cli_env, o->n_cli_env);
	o->env = o->cli_env = NULL;
	o->n_env = o->n_cli_env = 0;
}

int cli_read_whole_stdin(uint8_t **out, size_t *len, msb_error **err)
{
	size_t cap = 65536, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf)
			return msb_error_set(err, MSB_E_NOMEM, "out of memory");
		if (n == cap) {
			if (cap >= CLI_STDIN_WHOLE_MAX) {
				free(buf);
				return msb_error_set(err, MSB_E_VALUE,
						     "stdin exceeds %u bytes, the most msb reads "
						     "whole for a backend that cannot stream it",
						     CLI_STDIN_WHOLE_MAX);
			}
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb)
				free(buf);
			buf = nb;
			cap *= 2;
			continue;
		}
		ssize_t r = cli_os_read_stdin(buf + n, cap - n);
		if (r < 0) {
			free(buf);
			return msb_error_set(err, MSB_E_OS, "cannot read stdin: %s",
					     strerror((int)-r));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}
