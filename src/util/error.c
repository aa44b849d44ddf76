/* SPDX-License-Identifier: Apache-2.0 */
/* The error model: codes, seed names, categories, payloads. */
#include <stdio.h>

#include "platform/platform.h"
#include "util.h"

struct msb_error {
	int code;
	char *message;
	char *detail;
	/* payloads */
	bool has_cap;
	char *cap;
	char *file;
	bool has_path;
	char *path;
	bool has_refusal;
	int refusal;
	bool has_timeout;
	int signal;
	uint8_t *output;
	size_t output_len;
};

/* The one error that never allocates: returned when allocating an error
 * fails. msb_error_free() recognises it. */
static struct msb_error nomem_error = {.code = MSB_E_NOMEM, .message = (char *)"out of memory"};

enum {
	P = MSB_CAT_PERMISSION,
	R = MSB_CAT_RUNTIME,
	L = MSB_CAT_LOOKUP,
	V = MSB_CAT_VALUE,
	T = MSB_CAT_TYPE,
	O = MSB_CAT_OS,
	TM = MSB_CAT_TIMEOUT,
	OUT = MSB_CAT_OUTPUT,
	NI = MSB_CAT_NOT_IMPLEMENTED,
	A = MSB_CAT_ASSERTION,
	C = MSB_CAT_CANCELLED,
};

static const struct code_info {
	int code;
	const char *name;
	unsigned cats;
	int exit_status; /* CLI exit status, docs/errors.md */
} code_table[] = {
	{MSB_E_VALUE, "ValueError", V, 2},
	{MSB_E_TYPE, "TypeError", T, 2},
	{MSB_E_RUNTIME, "RuntimeError", R, 1},
	{MSB_E_NOT_IMPLEMENTED, "NotImplementedError", R | NI, 4},
	{MSB_E_OS, "OSError", O, 5},
	{MSB_E_NOT_FOUND, "FileNotFoundError", O, 5},
	{MSB_E_IS_DIRECTORY, "IsADirectoryError", O, 5},
	{MSB_E_NOT_DIRECTORY, "NotADirectoryError", O, 5},
	{MSB_E_PERMISSION, "PermissionError", O | P, 5},
	{MSB_E_TIMEOUT, "TimeoutError", TM | O, 6},
	{MSB_E_CANCELLED, "CancelledError", C, 7},
	{MSB_E_LOOKUP, "LookupError", L, 1},
	{MSB_E_NOMEM, "MemoryError", R, 1},
	{MSB_E_PROTOCOL, "ProtocolError", R, 1},
	{MSB_E_SANDBOX_GONE, "SandboxGone", R, 1},

	{MSB_E_NO_BACKEND, "NoSandboxBackend", L, 3},
	{MSB_E_BACKEND_NOT_PERMITTED, "SandboxBackendNotPermitted", P, 3},
	{MSB_E_CAPABILITY_DENIED, "SandboxCapabilityDenied", P, 3},
	{MSB_E_IDENTITY_DENIED, "SandboxIdentityDenied", P, 3},
	{MSB_E_CAPABILITY_NOT_SUPPORTED, "SandboxCapabilityNotSupported", R, 3},
	{MSB_E_OS_FAMILY_NOT_SUPPORTED, "SandboxOsFamilyNotSupported", R, 3},
	{MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "SandboxTransferLimitsNotPermitted", P, 3},
	{MSB_E_EGRESS_NOT_ENFORCED, "SandboxEgressNotEnforced", P, 3},
	{MSB_E_SCOPE_NOT_ENFORCED, "SandboxScopeNotEnforced", P, 3},
	{MSB_E_UNCLEAN, "SandboxUnclean", P, 3},

	{MSB_E_TRANSFER_CAP_EXCEEDED, "SandboxTransferCapExceeded", OUT | P, 8},
	{MSB_E_OUTPUT, "SandboxOutputError", OUT, 8},
	{MSB_E_OUTPUT_MISSING, "SandboxOutputMissing", OUT, 8},
	{MSB_E_OUTPUT_SIZE_UNKNOWN, "SandboxOutputSizeUnknown", OUT, 8},
	{MSB_E_OUTPUT_UNREACHABLE, "SandboxOutputUnreachable", OUT, 8},
	{MSB_E_OUTPUT_NOT_REGULAR, "SandboxOutputNotRegular", OUT, 8},
	{MSB_E_OUTPUT_NOT_CONFINED, "SandboxOutputNotConfined", OUT, 8},
	{MSB_E_OUTPUT_SINK_REQUIRED, "SandboxOutputSinkRequired", OUT | V, 8},
	{MSB_E_ARTIFACT_NAME_INVALID, "SandboxArtifactNameInvalid", OUT | V, 8},
	{MSB_E_ARTIFACT_NAME_COLLISION, "SandboxArtifactNameCollision", OUT | V, 8},
	{MSB_E_LANDING_EXISTS, "SandboxLandingExists", OUT, 8},
	{MSB_E_LANDING_NOT_CONFINED, "SandboxLandingNotConfined", OUT, 8},
	{MSB_E_LANDING_NOT_TEXT, "SandboxLandingNotText", OUT, 8},
	{MSB_E_FILE_REFUSED, "SandboxFileRefused", O, 5},
	{MSB_E_SHELL_TRANSFER_UNFINISHED, "SandboxShellTransferUnfinished", R, 1},

	{MSB_E_PROGRAM_TIMEOUT, "SandboxProgramTimeout", TM | O, 6},
	{MSB_E_QUEUED_TIMEOUT, "SandboxQueuedTimeout", TM | O, 6},

	{MSB_E_HOST_TOOL_NOT_DECLARED, "HostToolNotDeclared", V, 2},
	{MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED, "HostToolIdentityNotAllowed", V, 2},

	{MSB_E_CONFORMANCE_FAILURE, "ConformanceFailure", A, 9},
};

static const struct code_info *lookup(int code)
{
	for (size_t i = 0; i < MSB_ARRAY_SIZE(code_table); i++)
		if (code_table[i].code == code)
			return &code_table[i];
	return NULL;
}

const char *msb_code_name(int code)
{
	if (code == MSB_OK)
		return "OK";
	const struct code_info *ci = lookup(code);
	return ci ? ci->name : "UnknownError";
}

int msb_code_from_name(const char *name)
{
	if (!name)
		return 0;
	for (size_t i = 0; i < MSB_ARRAY_SIZE(code_table); i++)
		if (strcmp(code_table[i].name, name) == 0)
			return code_table[i].code;
	return 0;
}

unsigned msb_code_categories(int code)
{
	const struct code_info *ci = lookup(code);
	return ci ? ci->cats : 0;
}

bool msb_code_is(int code, unsigned categories)
{
	unsigned have = msb_code_categories(code);
	return categories != 0 && (have & categories) == categories;
}

int msb_code_exit_status(int code)
{
	if (code == MSB_OK)
		return 0;
	const struct code_info *ci = lookup(code);
	return ci ? ci->exit_status : 1;
}

int msb_error_code(const msb_error *err)
{
	return err ? err->code : MSB_OK;
}

const char *msb_error_name(const msb_error *err)
{
	return msb_code_name(msb_error_code(err));
}

const char *msb_error_message(const msb_error *err)
{
	return err ? err->message : NULL;
}

const char *msb_error_detail(const msb_error *err)
{
	return err ? err->detail : NULL;
}

void msb_error_free(msb_error *err)
{
	if (!err || err == &nomem_error)
		return;
	free(err->message);
	free(err->detail);
	free(err->cap);
	free(err->file);
	free(err->path);
	free(err->output);
	free(err);
}

void msb__error_freep(msb_error **p)
{
	msb_error_free(*p);
}

bool msb_error_cap(const msb_error *err, const char **cap, const char **file)
{
	if (!err || !err->has_cap)
		return false;
	if (cap)
		*cap = err->cap;
	if (file)
		*file = err->file;
	return true;
}

bool msb_error_path(const msb_error *err, const char **path)
{
	if (!err || !err->has_path)
		return false;
	if (path)
		*path = err->path;
	return true;
}

bool msb_error_file_refusal(const msb_error *err, int *refusal)
{
	if (!err || !err->has_refusal)
		return false;
	if (refusal)
		*refusal = err->refusal;
	return true;
}

bool msb_error_timeout(const msb_error *err, int *signal, const uint8_t **output,
		       size_t *output_len)
{
	if (!err || !err->has_timeout)
		return false;
	if (signal)
		*signal = err->signal;
	if (output)
		*output = err->output;
	if (output_len)
		*output_len = err->output_len;
	return true;
}

int msb__error_nomem(msb_error **err)
{
	if (err) {
		msb_error_free(*err);
		*err = &nomem_error;
	}
	return MSB_E_NOMEM;
}

/* Messages are one line: newlines and other control characters become
 * spaces, and a final period is dropped. */
static void tidy_message(char *m)
{
	for (char *p = m; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	size_t n = strlen(m);
	if (n > 0 && m[n - 1] == '.' && !(n > 1 && m[n - 2] == '.'))
		m[n - 1] = '\0';
}

MSB_PRINTF(3, 0) static int error_vset(msb_error **err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	msb_error *e = calloc(1, sizeof(*e));
	if (!e)
		return msb__error_nomem(err);
	e->code = code;
	e->message = msb__vasprintf(fmt, ap);
	if (!e->message) {
		free(e);
		return msb__error_nomem(err);
	}
	tidy_message(e->message);
	msb_error_free(*err);
	*err = e;
	return code;
}

int msb_error_set(msb_error **err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, fmt, ap);
	va_end(ap);
	return r;
}

void msb_error_set_detail(msb_error **err, const char *fmt, ...)
{
	if (!err || !*err || *err == &nomem_error)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *d = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!d)
		return;
	free((*err)->detail);
	(*err)->detail = d;
}

int msb_error_wrap(msb_error **err, const char *fmt, ...)
{
	if (!err || !*err)
		return 0;
	if (*err == &nomem_error)
		return MSB_E_NOMEM;
	va_list ap;
	va_start(ap, fmt);
	char *outer = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!outer)
		return (*err)->code;
	char *joined = msb__asprintf("%s: %s", outer, (*err)->message);
	free(outer);
	if (joined) {
		tidy_message(joined);
		free((*err)->message);
		(*err)->message = joined;
	}
	return (*err)->code;
}

static msb_error *payload_target(msb_error **err)
{
	if (!err || !*err || *err == &nomem_error)
		return NULL;
	return *err;
}

void msb__error_set_cap(msb_error **err, const char *cap, const char *file)
{
	msb_error *e = payload_target(err);
	if (!e)
		return;
	free(e->cap);
	free(e->file);
	e->cap = msb__strdup(cap);
	e->file = msb__strdup(file);
	e->has_cap = true;
}

void msb__error_set_path(msb_error **err, const char *path)
{
	msb_error *e = payload_target(err);
	if (!e)
		return;
	free(e->path);
	e->path = msb__strdup(path);
	e->has_path = true;
}

void msb__error_set_file_refusal(msb_error **err, int refusal)
{
	msb_error *e = payload_target(err);
	if (!e)
		return;
	e->refusal = refusal;
	e->has_refusal = true;
}

void msb__error_set_timeout(msb_error **err, int signal, const uint8_t *output, size_t len)
{
	msb_error *e = payload_target(err);
	if (!e)
		return;
	free(e->output);
	e->output = NULL;
	e->output_len = 0;
	if (len > 0) {
		e->output = malloc(len);
		if (e->output) {
			memcpy(e->output, output, len);
			e->output_len = len;
		}
	}
	e->signal = signal;
	e->has_timeout = true;
}

int msb__error_propagate(msb_error **dst, msb_error *src)
{
	int code = msb_error_code(src);
	if (dst) {
		msb_error_free(*dst);
		*dst = src;
	} else {
		msb_error_free(src);
	}
	return code;
}

static int errno_code(int errnum)
{
	switch (errnum) {
	case ENOENT:
		return MSB_E_NOT_FOUND;
	case EISDIR:
		return MSB_E_IS_DIRECTORY;
	case ENOTDIR:
		return MSB_E_NOT_DIRECTORY;
	case EACCES:
	case EPERM:
		return MSB_E_PERMISSION;
	case ETIMEDOUT:
		return MSB_E_TIMEOUT;
	case ENOMEM:
		return MSB_E_NOMEM;
	case EINVAL:
		return MSB_E_VALUE;
	default:
		return MSB_E_OS;
	}
}

const char *msb__strerror(int errnum, char *buf, size_t size)
{
	if (errnum < 0)
		errnum = -errnum;
	if (errnum == EMFILE)
		return "out of file descriptors (this process's RLIMIT_NOFILE is reached: Too many "
		       "open files)";
	if (errnum == ENFILE)
		return "out of file descriptors (the system's file table is full: Too many open "
		       "files in system)";
	return msb__plat_strerror(errnum, buf, size);
}

int msb__error_errno(msb_error **err, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	int code = errno_code(errnum);
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	char *prefix = msb__vasprintf(fmt, ap);
	va_end(ap);
	if (!prefix)
		return msb__error_nomem(err);
	char buf[128];
	const char *s = msb__strerror(errnum, buf, sizeof(buf));
	msb_error_set(err, code, "%s: %s", prefix, s);
	free(prefix);
	return code;
}
