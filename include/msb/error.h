/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/error.h - the error model.
 *
 * Fallible calls return 0 or a negative MSB_E_* code and take `msb_error **err`
 * last. When `err` is not NULL and the call fails, *err receives a newly
 * allocated error that the caller frees with msb_error_free(). When the call
 * succeeds *err is left untouched. Passing NULL for `err` is allowed: the
 * code is still returned.
 *
 * Each code carries the exception name the seed uses (msb_code_name(), e.g.
 * "SandboxEgressNotEnforced") and belongs to categories (msb_code_is()), which
 * stand in for the seed's exception hierarchy: SandboxProgramTimeout is in
 * MSB_CAT_TIMEOUT the way it subclasses TimeoutError, every SandboxOutput*
 * refusal is in MSB_CAT_OUTPUT, and so on.
 *
 * Messages are one line and keep the seed's key phrases. The detail is for
 * logs only and may name hosts or endpoints; events never carry it.
 *
 * Thread-safety: an msb_error is a plain value; do not share one between
 * threads without synchronisation. All functions here are reentrant.
 */
#ifndef MSB_ERROR_H
#define MSB_ERROR_H

#include <msb/common.h>

MSB_BEGIN_DECLS

/*
 * The codes. Values are stable within a major version; persist the name
 * (msb_code_name), not the number.
 */
typedef enum msb_code {
	MSB_OK = 0,

	/* Python built-in classes the seed raises by name. */
	MSB_E_VALUE = -1001,	       /* ValueError */
	MSB_E_TYPE = -1002,	       /* TypeError */
	MSB_E_RUNTIME = -1003,	       /* RuntimeError */
	MSB_E_NOT_IMPLEMENTED = -1004, /* NotImplementedError */
	MSB_E_OS = -1005,	       /* OSError */
	MSB_E_NOT_FOUND = -1006,       /* FileNotFoundError */
	MSB_E_IS_DIRECTORY = -1007,    /* IsADirectoryError */
	MSB_E_NOT_DIRECTORY = -1008,   /* NotADirectoryError */
	MSB_E_PERMISSION = -1009,      /* PermissionError */
	MSB_E_TIMEOUT = -1010,	       /* TimeoutError */
	MSB_E_CANCELLED = -1011,       /* CancelledError */
	MSB_E_LOOKUP = -1012,	       /* LookupError */
	MSB_E_NOMEM = -1013,	       /* MemoryError */
	MSB_E_PROTOCOL = -1014,	       /* a peer broke the wire protocol (msb only) */
	MSB_E_SANDBOX_GONE = -1015,    /* SandboxGone: the handle's instance is gone (msb only) */

	/* Router policy refusals. */
	MSB_E_NO_BACKEND = -1100,		     /* NoSandboxBackend */
	MSB_E_BACKEND_NOT_PERMITTED = -1101,	     /* SandboxBackendNotPermitted */
	MSB_E_CAPABILITY_DENIED = -1102,	     /* SandboxCapabilityDenied */
	MSB_E_IDENTITY_DENIED = -1103,		     /* SandboxIdentityDenied */
	MSB_E_CAPABILITY_NOT_SUPPORTED = -1104,	     /* SandboxCapabilityNotSupported */
	MSB_E_OS_FAMILY_NOT_SUPPORTED = -1105,	     /* SandboxOsFamilyNotSupported */
	MSB_E_TRANSFER_LIMITS_NOT_PERMITTED = -1106, /* SandboxTransferLimitsNotPermitted */
	MSB_E_EGRESS_NOT_ENFORCED = -1107,	     /* SandboxEgressNotEnforced */
	MSB_E_SCOPE_NOT_ENFORCED = -1108,	     /* SandboxScopeNotEnforced */
	MSB_E_UNCLEAN = -1109,			     /* SandboxUnclean */

	/* Transfers and outputs. */
	MSB_E_TRANSFER_CAP_EXCEEDED = -1200,	 /* SandboxTransferCapExceeded */
	MSB_E_OUTPUT = -1201,			 /* SandboxOutputError (family base) */
	MSB_E_OUTPUT_MISSING = -1202,		 /* SandboxOutputMissing */
	MSB_E_OUTPUT_SIZE_UNKNOWN = -1203,	 /* SandboxOutputSizeUnknown */
	MSB_E_OUTPUT_UNREACHABLE = -1204,	 /* SandboxOutputUnreachable */
	MSB_E_OUTPUT_NOT_REGULAR = -1205,	 /* SandboxOutputNotRegular */
	MSB_E_OUTPUT_NOT_CONFINED = -1206,	 /* SandboxOutputNotConfined */
	MSB_E_OUTPUT_SINK_REQUIRED = -1207,	 /* SandboxOutputSinkRequired */
	MSB_E_ARTIFACT_NAME_INVALID = -1208,	 /* SandboxArtifactNameInvalid */
	MSB_E_ARTIFACT_NAME_COLLISION = -1209,	 /* SandboxArtifactNameCollision */
	MSB_E_LANDING_EXISTS = -1210,		 /* SandboxLandingExists */
	MSB_E_LANDING_NOT_CONFINED = -1211,	 /* SandboxLandingNotConfined */
	MSB_E_LANDING_NOT_TEXT = -1212,		 /* SandboxLandingNotText */
	MSB_E_FILE_REFUSED = -1213,		 /* SandboxFileRefused */
	MSB_E_SHELL_TRANSFER_UNFINISHED = -1214, /* SandboxShellTransferUnfinished */

	/* Programs. */
	MSB_E_PROGRAM_TIMEOUT = -1300, /* SandboxProgramTimeout (a TimeoutError) */
	MSB_E_QUEUED_TIMEOUT = -1301,  /* SandboxQueuedTimeout (a TimeoutError) */

	/* Host tools. */
	MSB_E_HOST_TOOL_NOT_DECLARED = -1500, /* HostToolNotDeclared (a ValueError) */
	MSB_E_HOST_TOOL_IDENTITY_NOT_ALLOWED =
		-1501, /* HostToolIdentityNotAllowed (a ValueError) */

	/* Conformance. */
	MSB_E_CONFORMANCE_FAILURE = -1400, /* ConformanceFailure (assertion class) */
} msb_code;

/* Categories: the seed's exception families. A code may be in several. */
typedef enum msb_category {
	MSB_CAT_PERMISSION = 1u << 0,	   /* PermissionError family: safety refusals */
	MSB_CAT_RUNTIME = 1u << 1,	   /* RuntimeError family: functionality refusals */
	MSB_CAT_LOOKUP = 1u << 2,	   /* LookupError family */
	MSB_CAT_VALUE = 1u << 3,	   /* ValueError family: bad arguments, wiring errors */
	MSB_CAT_TYPE = 1u << 4,		   /* TypeError family */
	MSB_CAT_OS = 1u << 5,		   /* OSError family (file plane) */
	MSB_CAT_TIMEOUT = 1u << 6,	   /* TimeoutError family */
	MSB_CAT_OUTPUT = 1u << 7,	   /* SandboxOutputError family */
	MSB_CAT_NOT_IMPLEMENTED = 1u << 8, /* an operation the backend cannot serve */
	MSB_CAT_ASSERTION = 1u << 9,	   /* conformance verdicts */
	MSB_CAT_CANCELLED = 1u << 10,	   /* cancellation: cleanup paths re-raise it */
} msb_category;

/* The seed's exception name for a code ("ValueError", "SandboxUnclean", ...);
 * "UnknownError" for a value that is not a code. Never NULL. */
MSB_EXTERN const char *msb_code_name(int code);

/* The code whose seed name is `name`; 0 when no code has that name. */
MSB_EXTERN int msb_code_from_name(const char *name);

/* Bitmask of msb_category for a code; 0 for unknown codes. */
MSB_EXTERN unsigned msb_code_categories(int code);

/* true iff `code` belongs to every category in `categories`. */
MSB_EXTERN bool msb_code_is(int code, unsigned categories);

/* CLI exit status for a code class (see docs/errors.md): 0 for MSB_OK. */
MSB_EXTERN int msb_code_exit_status(int code);

typedef struct msb_error msb_error;

MSB_EXTERN int msb_error_code(const msb_error *err);
MSB_EXTERN const char *msb_error_name(const msb_error *err);
/* One line, no final period. Never NULL for a non-NULL error. */
MSB_EXTERN const char *msb_error_message(const msb_error *err);
/* Log-only detail; NULL when there is none. */
MSB_EXTERN const char *msb_error_detail(const msb_error *err);
MSB_EXTERN void msb_error_free(msb_error *err);

/*
 * Typed payloads, where the seed defines one. Each getter returns false when
 * the error carries no such payload; pointers stay valid while `err` lives.
 */

/* SandboxTransferCapExceeded: the cap ("max_bytes_per_file", "max_files",
 * "max_total_bytes") and the file that breached it. */
MSB_EXTERN bool msb_error_cap(const msb_error *err, const char **cap, const char **file);

/* SandboxOutputMissing and the other output refusals: the declared path. */
MSB_EXTERN bool msb_error_path(const msb_error *err, const char **path);

/* SandboxFileRefused: the FileRefusal value (enum msb_file_refusal). */
MSB_EXTERN bool msb_error_file_refusal(const msb_error *err, int *refusal);

/* SandboxProgramTimeout: the signal outcome (enum msb_signal_outcome) and
 * the partial output received before the bound expired. */
MSB_EXTERN bool msb_error_timeout(const msb_error *err, int *signal, const uint8_t **output,
				  size_t *output_len);

/* Build an error, for backend authors and hosts that forward one. Returns
 * `code` so that `return msb_error_set(err, ...)` works. printf-style. */
MSB_EXTERN int msb_error_set(msb_error **err, int code, const char *fmt, ...) MSB_PRINTF(3, 4);

/* Attach a log-only detail to an existing error (no-op when err or *err is NULL). */
MSB_EXTERN void msb_error_set_detail(msb_error **err, const char *fmt, ...) MSB_PRINTF(2, 3);

/* Prefix the message: "outer: inner". Returns the error's code (or 0). */
MSB_EXTERN int msb_error_wrap(msb_error **err, const char *fmt, ...) MSB_PRINTF(2, 3);

MSB_END_DECLS

#endif
