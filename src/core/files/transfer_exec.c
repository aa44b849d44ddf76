/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File transfer over exec (checklist 11.1-11.11): for backends, or paths,
 * that no file plane reaches. Every command is a bounded exec of the guest's
 * sh with the paths passed as arguments (never spliced into the script).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include <msb/outputs.h>

#include "platform/platform.h"
#include "util/base64.h"
#include "util/util.h"

const char *const MSB_SHELL_UTILITIES[] = {"sh", "mkdir", "mv", "rm", "base64", "wc", NULL};

/* base64 of a chunk is one argv string: 44 KiB encode to 60,076 bytes, under
 * both the kernel's MAX_ARG_STRLEN and the wire protocol's 61,440 a string. */
#define DEFAULT_CHUNK (44u * 1024u)
#define MAX_CHUNK DEFAULT_CHUNK
#define SMALL_BUDGET 4096u /* probes, mkdir, mv, rm: a few lines of output */

/* The scripts. $1, $2 are the arguments; `set -C` makes `>` exclusive. */
static const char SCRIPT_BEGIN[] = "set -C; mkdir -p -- \"$1\" && : > \"$2\"";
static const char SCRIPT_CHUNK[] = "printf %s \"$2\" | base64 -d >> \"$1\"";
static const char SCRIPT_MOVE[] = "mv -f -- \"$1\" \"$2\"";
static const char SCRIPT_CLEANUP[] = "rm -f -- \"$1\"";
static const char SCRIPT_PROBE[] =
	"if [ -L \"$1\" ]; then echo link; "
	"elif [ -d \"$1\" ]; then echo directory; "
	"elif [ -f \"$1\" ]; then n=$(wc -c < \"$1\") || exit 3; echo \"file $n\"; "
	"elif [ -e \"$1\" ]; then echo other; "
	"elif ( : < \"$1\" ) 2>/dev/null; then echo other; "
	"else m=$( ( : < \"$1\" ) 2>&1 ); echo \"absent $m\"; fi";
static const char SCRIPT_READ[] = "base64 < \"$1\"";

struct road {
	msb_sandbox *sb;
	const msb_exec_transfer_options *o;
	const char *path;
	int64_t deadline_ns;
	bool writing;
};

/* ---- refusals ------------------------------------------------------------------------------ */

bool msb_file_refusal_of(int code, const msb_error *e, msb_file_refusal *out)
{
	int r;
	switch (code) {
	case MSB_E_PERMISSION:
		*out = MSB_FILE_REFUSAL_PERMISSION_DENIED;
		return true;
	case MSB_E_NOT_FOUND:
		*out = MSB_FILE_REFUSAL_NOT_FOUND;
		return true;
	case MSB_E_IS_DIRECTORY:
		*out = MSB_FILE_REFUSAL_IS_DIRECTORY;
		return true;
	case MSB_E_VALUE:
		*out = MSB_FILE_REFUSAL_INVALID_PATH;
		return true;
	case MSB_E_FILE_REFUSED:
		if (e && msb_error_file_refusal(e, &r)) {
			*out = (msb_file_refusal)r;
			return true;
		}
		return false;
	default:
		return false;
	}
}

bool msb_entry_refusal(const msb_entry *entry, msb_file_refusal *out)
{
	if (!entry) {
		*out = MSB_FILE_REFUSAL_NOT_FOUND;
		return true;
	}
	switch (entry->kind) {
	case MSB_ENTRY_FILE:
		return false;
	case MSB_ENTRY_DIRECTORY:
		*out = MSB_FILE_REFUSAL_IS_DIRECTORY;
		return true;
	case MSB_ENTRY_SYMLINK:
	case MSB_ENTRY_OTHER:
	default:
		*out = MSB_FILE_REFUSAL_INVALID_PATH;
		return true;
	}
}

static int refused(msb_error **err, const char *path, msb_file_refusal refusal, const char *why)
{
	msb_error_set(err, MSB_E_FILE_REFUSED, "file `%s` refused (%s)%s%s", path,
		      msb_file_refusal_name(refusal), why && *why ? ": " : "", why ? why : "");
	msb__error_set_file_refusal(err, refusal);
	msb__error_set_path(err, path);
	return MSB_E_FILE_REFUSED;
}

/* Classify what the guest's shell said on stderr. */
static int shell_failure(msb_error **err, const char *path, const msb_exec_result *res,
			 const char *doing)
{
	_cleanup_free_ char *text = msb_text_from_bytes(res->stderr_bytes, res->stderr_len);
	const char *t = text ? text : "";
	/* One line of it, bounded, for the message. */
	char line[160];
	snprintf(line, sizeof(line), "%s", t);
	line[strcspn(line, "\n")] = '\0';
	if (strstr(t, "Permission denied"))
		return refused(err, path, MSB_FILE_REFUSAL_PERMISSION_DENIED, line);
	if (strstr(t, "No such file"))
		return refused(err, path, MSB_FILE_REFUSAL_NOT_FOUND, line);
	if (strstr(t, "Is a directory"))
		return refused(err, path, MSB_FILE_REFUSAL_IS_DIRECTORY, line);
	if (strstr(t, "Not a directory") || strstr(t, "File exists"))
		return refused(err, path, MSB_FILE_REFUSAL_INVALID_PATH, line);
	msb_error_set(err, MSB_E_OS, "file `%s`: %s failed in the guest (exit %d): %s", path, doing,
		      res->exit_code, line);
	msb__error_set_path(err, path);
	return MSB_E_OS;
}

/* ---- one command --------------------------------------------------------------------------- */

static int unfinished(struct road *rd, const char *doing, msb_error **err)
{
	msb_error_set(err, MSB_E_SHELL_TRANSFER_UNFINISHED,
		      "file `%s`: the shell transfer's %s did not finish in time; it may still run "
		      "and may have landed in part - treat the sandbox as unclean",
		      rd->path, doing);
	msb__error_set_path(err, rd->path);
	if (rd->o->call) {
		_cleanup_free_ char *reason =
			msb__asprintf("shell transfer unfinished (%s)", doing);
		msb_tool_call_report_unclean(rd->o->call, rd->sb,
					     reason ? reason : "shell transfer unfinished", NULL);
	}
	return MSB_E_SHELL_TRANSFER_UNFINISHED;
}

/* Run `sh -c script sh args...` bounded by the remaining time and `budget`. */
static int run(struct road *rd, const char *doing, const char *script, const char *a1,
	       const char *a2, uint64_t budget, msb_exec_result *res, msb_error **err)
{
	double left = (double)(rd->deadline_ns - msb__now_ns()) / 1e9;
	if (!(left > 0))
		return msb_error_set(err, MSB_E_TIMEOUT, "file `%s`: out of time before the %s",
				     rd->path, doing);
	const char *argv[] = {"sh", "-c", script, "sh", a1, a2, NULL};
	msb_exec_request q = MSB_EXEC_REQUEST_INIT;
	q.argv = argv;
	q.working_directory = rd->o->working_directory;
	q.timeout = left;
	q.max_output_bytes = budget;
	q.cancel = rd->o->cancel;
	msb_error *inner = NULL;
	int r = msb_sandbox_exec_bounded(rd->sb, &q, res, &inner);
	if (r == 0)
		return 0;
	if (msb_code_is(r, MSB_CAT_TIMEOUT)) {
		msb_error_free(inner);
		return unfinished(rd, doing, err);
	}
	if (r == MSB_E_NOT_IMPLEMENTED) {
		msb__error_propagate(err, inner);
		msb_error_wrap(err, "file transfer over exec needs exec_bounded");
		return r;
	}
	return msb__error_propagate(err, inner); /* cancellation passes through (11.11) */
}

static int start(struct road *rd, const char *path, const msb_exec_transfer_options *opts,
		 msb_sandbox *sb, bool writing, msb_error **err)
{
	static const msb_exec_transfer_options defaults = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	const msb_exec_transfer_options *o = opts ? opts : &defaults;
	if (!sb || !path)
		return msb_error_set(err, MSB_E_VALUE, "file transfer over exec: NULL argument");
	if (o->version != MSB_EXEC_TRANSFER_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE,
				     "file transfer over exec: options version %u", o->version);
	int r = msb__check_timeout(o->timeout, "file transfer over exec timeout", err);
	if (r < 0)
		return r;
	*rd = (struct road){sb, o, path, msb__now_ns() + (int64_t)(o->timeout * 1e9), writing};
	if (!*path || path[strlen(path) - 1] == '/' || strchr(path, '\n'))
		return refused(err, path, MSB_FILE_REFUSAL_INVALID_PATH, "not a file path");
	return 0;
}

/* ---- write --------------------------------------------------------------------------------- */

static void random_id(char out[13])
{
	uint8_t b[6] = {0};
	if (msb__plat_random(b, sizeof(b)) < 0) {
		uint64_t t = (uint64_t)msb__now_ns();
		memcpy(b, &t, sizeof(b));
	}
	snprintf(out, 13, "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
}

static void cleanup_tmp(struct road *rd, const char *tmp)
{
	/* Best effort, bounded by what time is left (at least a moment). */
	int64_t floor_ns = msb__now_ns() + 2000000000LL;
	if (rd->deadline_ns < floor_ns)
		rd->deadline_ns = floor_ns;
	msb_exec_result res = {0};
	msb_error *e = NULL;
	run(rd, "cleanup", SCRIPT_CLEANUP, tmp, NULL, SMALL_BUDGET, &res, &e);
	msb_error_free(e);
	msb_exec_result_clear(&res);
}

int msb_write_file_over_exec(msb_sandbox *sb, const char *path, const uint8_t *data, size_t len,
			     const msb_exec_transfer_options *opts, msb_error **err)
{
	struct road rd;
	int r = start(&rd, path, opts, sb, true, err);
	if (r < 0)
		return r;
	if (!data && len)
		return msb_error_set(err, MSB_E_VALUE, "write_file_over_exec: no content");
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	_cleanup_free_ char *dir =
		slash ? msb__strndup(path, (size_t)(slash - path)) : msb__strdup(".");
	if (!dir)
		return msb__error_nomem(err);
	if (!*dir) { /* "/name" */
		free(dir);
		dir = msb__strdup("/");
		if (!dir)
			return msb__error_nomem(err);
	}
	char rid[13];
	const char *call = rd.o->call_id;
	if (!call || !*call || strchr(call, '/')) {
		random_id(rid);
		call = rid;
	}
	/* ".<name>.<call>" in the same directory. */
	const char *sep = !slash || strcmp(dir, "/") == 0 ? "" : "/";
	_cleanup_free_ char *tmp = msb__asprintf("%s%s.%s.%s", slash ? dir : "", sep, base, call);
	if (!tmp)
		return msb__error_nomem(err);
	msb_exec_result res = {0};
	r = run(&rd, "set-up", SCRIPT_BEGIN, dir, tmp, SMALL_BUDGET, &res, err);
	if (r == 0 && res.exit_code != 0)
		r = shell_failure(err, path, &res, "creating the temporary file");
	msb_exec_result_clear(&res);
	if (r < 0)
		return r;
	size_t chunk = rd.o->chunk_bytes ? rd.o->chunk_bytes : DEFAULT_CHUNK;
	if (chunk > MAX_CHUNK)
		chunk = MAX_CHUNK;
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;
		_cleanup_free_ char *b64 = msb__base64_encode(data + off, n);
		if (!b64) {
			cleanup_tmp(&rd, tmp);
			return msb__error_nomem(err);
		}
		r = run(&rd, "upload", SCRIPT_CHUNK, tmp, b64, SMALL_BUDGET, &res, err);
		if (r == 0 && res.exit_code != 0)
			r = shell_failure(err, path, &res, "appending a chunk");
		msb_exec_result_clear(&res);
		if (r == MSB_E_SHELL_TRANSFER_UNFINISHED || r == MSB_E_CANCELLED)
			return r; /* the command may still run: leave the sibling alone */
		if (r < 0) {
			cleanup_tmp(&rd, tmp);
			return r;
		}
	}
	r = run(&rd, "final move", SCRIPT_MOVE, tmp, path, SMALL_BUDGET, &res, err);
	if (r == 0 && res.exit_code != 0) {
		r = shell_failure(err, path, &res, "moving the file into place");
		msb_exec_result_clear(&res);
		cleanup_tmp(&rd, tmp);
		return r;
	}
	msb_exec_result_clear(&res);
	return r;
}

/* ---- read ---------------------------------------------------------------------------------- */

int msb_read_file_over_exec(msb_sandbox *sb, const char *path,
			    const msb_exec_transfer_options *opts, uint8_t **data, size_t *len,
			    msb_error **err)
{
	struct road rd;
	int r = start(&rd, path, opts, sb, false, err);
	if (r < 0)
		return r;
	uint64_t max =
		rd.o->max_bytes ? rd.o->max_bytes : MSB_DEFAULT_TRANSFER_LIMITS.max_bytes_per_file;
	if (max > (UINT64_C(1) << 40))
		return msb_error_set(err, MSB_E_VALUE, "read_file_over_exec: max_bytes too large");
	msb_exec_result res = {0};
	r = run(&rd, "probe", SCRIPT_PROBE, path, NULL, SMALL_BUDGET, &res, err);
	if (r < 0)
		return r;
	if (res.exit_code != 0) {
		r = shell_failure(err, path, &res, "probing");
		msb_exec_result_clear(&res);
		return r;
	}
	_cleanup_free_ char *probe = msb__strndup((const char *)res.stdout_bytes, res.stdout_len);
	msb_exec_result_clear(&res);
	if (!probe)
		return msb__error_nomem(err);
	probe[strcspn(probe, "\n")] = '\0';
	uint64_t size = 0;
	if (strncmp(probe, "file ", 5) == 0) {
		char *end = NULL;
		errno = 0;
		unsigned long long v = strtoull(probe + 5, &end, 10);
		if (errno || end == probe + 5 || *end)
			return msb_error_set(err, MSB_E_PROTOCOL,
					     "file `%s`: the probe answered `%.40s`", path, probe);
		size = v;
	} else if (strcmp(probe, "directory") == 0) {
		return refused(err, path, MSB_FILE_REFUSAL_IS_DIRECTORY, NULL);
	} else if (strcmp(probe, "link") == 0 || strcmp(probe, "other") == 0) {
		return refused(err, path, MSB_FILE_REFUSAL_INVALID_PATH, "not a regular file");
	} else if (strncmp(probe, "absent", 6) == 0) {
		/* `test -e` is false behind an unsearchable directory too: the
		 * shell's own error on opening tells the two apart (11.4). */
		if (strstr(probe, "Permission denied"))
			return refused(err, path, MSB_FILE_REFUSAL_PERMISSION_DENIED, NULL);
		if (strstr(probe, "Not a directory"))
			return refused(err, path, MSB_FILE_REFUSAL_INVALID_PATH,
				       "a parent is a file");
		return refused(err, path, MSB_FILE_REFUSAL_NOT_FOUND, NULL);
	} else {
		return msb_error_set(err, MSB_E_PROTOCOL, "file `%s`: the probe answered `%.40s`",
				     path, probe);
	}
	char why[96];
	if (size > max) {
		snprintf(why, sizeof(why), "%" PRIu64 " bytes > %" PRIu64, size, max);
		msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED, "file `%s` exceeds max_bytes: %s",
			      path, why);
		msb__error_set_cap(err, "max_bytes", path);
		return MSB_E_TRANSFER_CAP_EXCEEDED;
	}
	/* base64 of max bytes, a newline per 76 columns, and room to notice more. */
	uint64_t b64 = (max + 2) / 3 * 4;
	uint64_t budget = b64 + b64 / 76 + 2 + 8;
	r = run(&rd, "read", SCRIPT_READ, path, NULL, budget, &res, err);
	if (r < 0)
		return r;
	if (res.exit_code != 0) {
		r = shell_failure(err, path, &res, "reading");
		msb_exec_result_clear(&res);
		return r;
	}
	bool truncated = res.truncated;
	uint8_t *d = NULL;
	size_t n = 0;
	int dr = truncated ? 0
			   : msb__base64_decode((const char *)res.stdout_bytes, res.stdout_len,
						true, &d, &n);
	msb_exec_result_clear(&res);
	if (dr == -ENOMEM)
		return msb__error_nomem(err);
	if (dr < 0)
		return msb_error_set(err, MSB_E_PROTOCOL,
				     "file `%s`: the guest's base64 is invalid", path);
	/* Count again: the file may have grown since the probe (11.3). */
	if (truncated || n > max) {
		free(d);
		snprintf(why, sizeof(why), "it grew past %" PRIu64 " bytes after the probe", max);
		msb_error_set(err, MSB_E_TRANSFER_CAP_EXCEEDED, "file `%s` exceeds max_bytes: %s",
			      path, why);
		msb__error_set_cap(err, "max_bytes", path);
		return MSB_E_TRANSFER_CAP_EXCEEDED;
	}
	*data = d;
	*len = n;
	return 0;
}
