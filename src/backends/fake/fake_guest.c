/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fake's emulated POSIX guest (msb_fake_sandbox_options.posix_guest):
 * the few commands the conformance suites verify with, answered over the
 * fake's store. It runs nothing and follows no link (fake links have no
 * target). Paths are resolved lexically against the working directory.
 */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include <msb/paths.h>

#include "fake.h"
#include "util/util.h"

struct out {
	msb_buf so, se;
	int code;
};

static int say(msb_buf *b, const char *fmt, ...) MSB_PRINTF(2, 3);
static int say(msb_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = msb__vasprintf(fmt, ap);
	va_end(ap);
	return m ? msb__buf_puts(b, m) : -ENOMEM;
}

/* abs = normpath(wd/path). NULL on allocation failure. */
static char *resolve(const char *wd, const char *path)
{
	_cleanup_free_ char *j = path[0] == '/' ? strdup(path) : msb__asprintf("%s/%s", wd, path);
	return j ? msb_guest_normpath(j) : NULL;
}

static int fail_errno(struct out *o, const char *cmd, const char *path, int e)
{
	o->code = 1;
	return say(&o->se, "%s: %s: %s\n", cmd, path, strerror(-e));
}

/* printf FORMAT [ARG...]: %s, %%, \n, \t, \\; the format is reused while
 * arguments remain (POSIX). */
static int cmd_printf(struct out *o, char *const *argv, size_t argc)
{
	if (argc < 2) {
		o->code = 2;
		return say(&o->se, "printf: missing operand\n");
	}
	const char *fmt = argv[1];
	size_t ai = 2;
	do {
		bool used = false;
		for (const char *p = fmt; *p; p++) {
			if (*p == '\\' && p[1]) {
				p++;
				char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
				msb__buf_append(&o->so, &c, 1);
			} else if (*p == '%' && p[1] == '%') {
				p++;
				msb__buf_append(&o->so, "%", 1);
			} else if (*p == '%' && p[1] == 's') {
				p++;
				used = true;
				if (ai < argc)
					msb__buf_puts(&o->so, argv[ai++]);
			} else {
				msb__buf_append(&o->so, p, 1);
			}
		}
		if (!used)
			break;
	} while (ai < argc);
	return o->so.oom ? -ENOMEM : 0;
}

static int cmd_cat(msb_fake_sandbox *fs, const char *wd, struct out *o, char *const *argv,
		   size_t argc)
{
	for (size_t i = 1; i < argc; i++) {
		_cleanup_free_ char *abs = resolve(wd, argv[i]);
		if (!abs)
			return -ENOMEM;
		msb_entry_kind kind;
		_cleanup_free_ uint8_t *data = NULL;
		size_t len = 0;
		int r = msb_fake__guest_get(fs, abs, &kind, &data, &len);
		if (r < 0)
			return r;
		if (r == 0 || kind == MSB_ENTRY_SYMLINK) {
			r = fail_errno(o, "cat", argv[i], -ENOENT);
		} else if (kind == MSB_ENTRY_DIRECTORY) {
			r = fail_errno(o, "cat", argv[i], -EISDIR);
		} else if (kind == MSB_ENTRY_FILE) {
			r = msb__buf_append(&o->so, data, len);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int cmd_test(msb_fake_sandbox *fs, const char *wd, struct out *o, char *const *argv,
		    size_t argc)
{
	if (argc != 3 || argv[1][0] != '-' || strlen(argv[1]) != 2 || !strchr("efdL", argv[1][1])) {
		o->code = 2;
		return say(&o->se, "test: the fake guest knows -e, -f, -d and -L only\n");
	}
	_cleanup_free_ char *abs = resolve(wd, argv[2]);
	if (!abs)
		return -ENOMEM;
	msb_entry_kind kind;
	_cleanup_free_ uint8_t *data = NULL;
	size_t len = 0;
	int r = msb_fake__guest_get(fs, abs, &kind, &data, &len);
	if (r < 0)
		return r;
	bool yes = false;
	if (r == 1) {
		switch (argv[1][1]) {
		case 'e':
			yes = true;
			break;
		case 'f':
			yes = kind == MSB_ENTRY_FILE;
			break;
		case 'd':
			yes = kind == MSB_ENTRY_DIRECTORY;
			break;
		case 'L':
			yes = kind == MSB_ENTRY_SYMLINK;
			break;
		}
	}
	o->code = yes ? 0 : 1;
	return 0;
}

static int cmd_mkdir(msb_fake_sandbox *fs, const char *wd, struct out *o, char *const *argv,
		     size_t argc)
{
	if (argc < 3 || strcmp(argv[1], "-p") != 0) {
		o->code = 2;
		return say(&o->se, "mkdir: the fake guest knows `mkdir -p DIR...` only\n");
	}
	for (size_t i = 2; i < argc; i++) {
		_cleanup_free_ char *abs = resolve(wd, argv[i]);
		if (!abs)
			return -ENOMEM;
		int r = msb_fake__guest_mkdirs(fs, abs);
		if (r == -ENOMEM)
			return r;
		if (r < 0 && (r = fail_errno(o, "mkdir", argv[i], r)) < 0)
			return r;
	}
	return 0;
}

static int cmd_ln(msb_fake_sandbox *fs, const char *wd, struct out *o, char *const *argv,
		  size_t argc)
{
	if (argc != 4 || strcmp(argv[1], "-sfn") != 0) {
		o->code = 2;
		return say(&o->se, "ln: the fake guest knows `ln -sfn TARGET LINK` only\n");
	}
	_cleanup_free_ char *abs = resolve(wd, argv[3]);
	if (!abs)
		return -ENOMEM;
	int r = msb_fake__guest_put(fs, abs, MSB_ENTRY_SYMLINK, NULL, 0);
	if (r == -ENOMEM)
		return r;
	return r < 0 ? fail_errno(o, "ln", argv[3], r) : 0;
}

static int cmd_tee(msb_fake_sandbox *fs, const char *wd, const msb_exec_request *req, struct out *o,
		   char *const *argv, size_t argc)
{
	if (msb__buf_append(&o->so, req->stdin_data, req->stdin_len) < 0)
		return -ENOMEM;
	for (size_t i = 1; i < argc; i++) {
		_cleanup_free_ char *abs = resolve(wd, argv[i]);
		if (!abs)
			return -ENOMEM;
		int r = msb_fake__guest_put(fs, abs, MSB_ENTRY_FILE, req->stdin_data,
					    req->stdin_len);
		if (r == -ENOMEM)
			return r;
		if (r < 0 && (r = fail_errno(o, "tee", argv[i], r)) < 0)
			return r;
	}
	return 0;
}

/* sleep N: really sleeps, so a caller's timing holds; the caller's bound
 * expiring first is a TimeoutError, as a real guest reports it. */
static int cmd_sleep(const msb_exec_request *req, struct out *o, char *const *argv, size_t argc,
		     msb_error **err)
{
	char *end = NULL;
	double secs = argc == 2 ? strtod(argv[1], &end) : -1;
	if (argc != 2 || !end || *end || !(secs >= 0) || secs > 86400) {
		o->code = 1;
		return say(&o->se, "sleep: invalid time interval\n");
	}
	bool timed_out = secs > req->timeout;
	double t = timed_out ? req->timeout : secs;
	struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	if (timed_out)
		return msb_error_set(err, MSB_E_TIMEOUT,
				     "in-process: the emulated command timed out after %g s",
				     req->timeout);
	return 0;
}

/* Split a shell command line into words: quotes and backslashes are
 * honoured; any other shell syntax is refused (the fake is not a shell). */
static int split_shell(const char *line, char ***out, bool *unsupported)
{
	_cleanup_strv_ char **words = calloc(1, sizeof(char *));
	if (!words)
		return -ENOMEM;
	const char *p = line;
	*unsupported = false;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		msb_buf w = MSB_BUF_INIT;
		while (*p && *p != ' ' && *p != '\t') {
			if (*p == '\'') {
				const char *q = strchr(p + 1, '\'');
				if (!q) {
					*unsupported = true;
					break;
				}
				msb__buf_append(&w, p + 1, (size_t)(q - p - 1));
				p = q + 1;
			} else if (*p == '\\' && p[1]) {
				msb__buf_append(&w, p + 1, 1);
				p += 2;
			} else if (strchr("\"$`|&;<>()*?[]{}~\n", *p)) {
				*unsupported = true;
				break;
			} else {
				msb__buf_append(&w, p++, 1);
			}
		}
		char *word = msb__buf_steal_str(&w);
		if (*unsupported) {
			free(word);
			break;
		}
		if (!word || msb__strv_push_take(&words, word) < 0)
			return -ENOMEM;
	}
	*out = TAKE_PTR(words);
	return 0;
}

static int dispatch(msb_fake_sandbox *fs, const char *wd, const msb_exec_request *req,
		    struct out *o, char *const *argv, bool shell, msb_error **err)
{
	size_t argc = msb_strv_len(argv);
	if (argc == 0) {
		o->code = 0;
		return 0;
	}
	const char *cmd = argv[0];
	if (shell && strcmp(cmd, "exit") == 0) {
		o->code = argc > 1 ? (int)(strtol(argv[1], NULL, 10) & 255) : 0;
		return 0;
	}
	if (strcmp(cmd, "true") == 0 || strcmp(cmd, "false") == 0) {
		o->code = cmd[0] == 'f';
		return 0;
	}
	if (strcmp(cmd, "printf") == 0)
		return cmd_printf(o, argv, argc);
	if (strcmp(cmd, "pwd") == 0)
		return say(&o->so, "%s\n", wd);
	if (strcmp(cmd, "cat") == 0)
		return cmd_cat(fs, wd, o, argv, argc);
	if (strcmp(cmd, "test") == 0)
		return cmd_test(fs, wd, o, argv, argc);
	if (strcmp(cmd, "mkdir") == 0)
		return cmd_mkdir(fs, wd, o, argv, argc);
	if (strcmp(cmd, "ln") == 0)
		return cmd_ln(fs, wd, o, argv, argc);
	if (strcmp(cmd, "tee") == 0)
		return cmd_tee(fs, wd, req, o, argv, argc);
	if (strcmp(cmd, "sleep") == 0)
		return cmd_sleep(req, o, argv, argc, err);
	o->code = 127;
	return say(&o->se, "%s: not found in the fake's emulated guest\n", cmd);
}

int msb_fake__guest_exec(msb_fake_sandbox *fs, const msb_exec_request *req, const char *wd,
			 uint64_t budget, msb_exec_result *out, msb_error **err)
{
	/* A working directory that is not a directory fails as chdir would. */
	msb_entry_kind kind;
	_cleanup_free_ uint8_t *junk = NULL;
	size_t jl = 0;
	int r = msb_fake__guest_get(fs, wd, &kind, &junk, &jl);
	if (r < 0)
		return msb__error_nomem(err);
	if (r == 0 || kind != MSB_ENTRY_DIRECTORY)
		return msb_error_set(err, MSB_E_NOT_DIRECTORY,
				     "in-process: working directory `%s` is not a directory", wd);

	struct out o = {MSB_BUF_INIT, MSB_BUF_INIT, 0};
	_cleanup_strv_ char **words = NULL;
	bool shell = req->argv == NULL;
	if (shell) {
		bool unsupported = false;
		if (split_shell(req->shell, &words, &unsupported) < 0)
			return msb__error_nomem(err);
		if (unsupported) {
			o.code = 2;
			r = say(&o.se, "sh: the fake's emulated guest runs simple commands only\n");
		}
	} else {
		words = msb__strv_copy((char *const *)req->argv);
		if (!words)
			return msb__error_nomem(err);
	}
	if (!o.code) {
		msb_error *e = NULL;
		r = dispatch(fs, wd, req, &o, words, shell, &e);
		if (r < 0 && e) {
			msb__buf_free(&o.so);
			msb__buf_free(&o.se);
			return msb__error_propagate(err, e);
		}
	}
	if (r < 0 || o.so.oom || o.se.oom) {
		msb__buf_free(&o.so);
		msb__buf_free(&o.se);
		return msb__error_nomem(err);
	}
	size_t so_len = o.so.len, se_len = o.se.len;
	bool truncated = false;
	if (budget > 0 && so_len + se_len > budget) {
		truncated = true;
		if (so_len > budget)
			so_len = (size_t)budget;
		se_len = (size_t)budget - so_len;
	}
	char *so = msb__buf_steal_str(&o.so);
	char *se = msb__buf_steal_str(&o.se);
	if (!so)
		so = calloc(1, 1);
	if (!se)
		se = calloc(1, 1);
	if (!so || !se) {
		free(so);
		free(se);
		return msb__error_nomem(err);
	}
	so[so_len] = '\0';
	se[se_len] = '\0';
	*out = (msb_exec_result){
		.stdout_bytes = (uint8_t *)so,
		.stdout_len = so_len,
		.stderr_bytes = (uint8_t *)se,
		.stderr_len = se_len,
		.exit_code = o.code,
		.truncated = truncated,
	};
	return 0;
}
