/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/vocab.h - the vocabulary (checklist section 1).
 *
 * Every enum is string-valued in the seed; here each has a strict
 * msb_<enum>_parse() that refuses unknown spellings with MSB_E_VALUE and an
 * msb_<enum>_name() that returns the exact spelling (NULL for a value outside
 * the enum). Sets of enums are bitmasks. Persist names, never numbers.
 *
 * All functions here are pure and thread-safe.
 */
#ifndef MSB_VOCAB_H
#define MSB_VOCAB_H

#include <msb/common.h>
#include <msb/error.h>

MSB_BEGIN_DECLS

/* ---- Isolation: the seven-rung ladder (1.1-1.5). ---------------------- */

typedef enum msb_isolation {
	MSB_ISOLATION_NONE = 0,
	MSB_ISOLATION_RUNTIME,
	MSB_ISOLATION_OS_PROCESS, /* string "os_process"; "process" is never a rung */
	MSB_ISOLATION_CONTAINER,
	MSB_ISOLATION_HARDENED_CONTAINER,
	MSB_ISOLATION_MICROVM,
	MSB_ISOLATION_VM,
} msb_isolation;
#define MSB_ISOLATION_COUNT 7

MSB_EXTERN int msb_isolation_parse(const char *s, msb_isolation *out, msb_error **err);
MSB_EXTERN const char *msb_isolation_name(msb_isolation v);
/* Rank from the one table (ISOLATION_RANK): none=0 ... vm=6; -1 if not a rung. */
MSB_EXTERN int msb_isolation_rank(msb_isolation v);
/* rank(declared) >= rank(floor); false when either is not a rung. */
MSB_EXTERN bool msb_meets_floor(msb_isolation declared, msb_isolation floor);
MSB_EXTERN msb_isolation msb_isolation_stricter(msb_isolation a, msb_isolation b);
/* "none < runtime < ... < vm", for messages. */
MSB_EXTERN const char *msb_isolation_ladder(void);

/* ---- Capabilities (1.7, 1.8). ------------------------------------------ */

typedef enum msb_capability {
	MSB_CAP_EXEC = 1u << 0,
	MSB_CAP_RUN_CODE = 1u << 1,
	MSB_CAP_HOST_TOOLS = 1u << 2,
	MSB_CAP_FILES_IN = 1u << 3,
	MSB_CAP_FILES_OUT = 1u << 4,
	MSB_CAP_FILES_LIST = 1u << 5,
	MSB_CAP_FILES_DELETE = 1u << 6,
	MSB_CAP_SNAPSHOT = 1u << 7,
	MSB_CAP_RECLAIM = 1u << 8,
	MSB_CAP_ATTACHED_IDENTITY = 1u << 9,
	MSB_CAP_EGRESS_METHODS = 1u << 10,
} msb_capability;
#define MSB_CAPABILITY_COUNT 11
#define MSB_CAP_ALL 0x7ffu
typedef uint32_t msb_capset;

/* What every Sandbox already obliges: {exec, files_in}. */
#define MSB_DEFAULT_CAPABILITIES ((msb_capset)(MSB_CAP_EXEC | MSB_CAP_FILES_IN))

MSB_EXTERN int msb_capability_parse(const char *s, msb_capability *out, msb_error **err);
MSB_EXTERN const char *msb_capability_name(msb_capability v);
/* "exec, files_in" in declaration order; "nothing" for the empty set.
 * Returns a newly allocated string (free()) or NULL on allocation failure. */
MSB_EXTERN char *msb_capset_format(msb_capset set);

/* ---- Egress modes (1.6). No ordering exists over them. ----------------- */

typedef enum msb_egress {
	MSB_EGRESS_UNRESTRICTED = 1u << 0,
	MSB_EGRESS_ALLOWLIST = 1u << 1,
	MSB_EGRESS_CLOSED = 1u << 2,
} msb_egress;
typedef uint32_t msb_egress_set;
MSB_EXTERN int msb_egress_parse(const char *s, msb_egress *out, msb_error **err);
MSB_EXTERN const char *msb_egress_name(msb_egress v);
/* "allowlist, closed"; "nothing" when empty. Newly allocated. */
MSB_EXTERN char *msb_egress_set_format(msb_egress_set set);

/* ---- OS families (1.9): path grammar and argv quoting only. ------------ */

typedef enum msb_os_family {
	MSB_OS_POSIX = 1u << 0,
	MSB_OS_WINDOWS = 1u << 1,
} msb_os_family;
typedef uint32_t msb_os_family_set;
MSB_EXTERN int msb_os_family_parse(const char *s, msb_os_family *out, msb_error **err);
MSB_EXTERN const char *msb_os_family_name(msb_os_family v);
MSB_EXTERN char *msb_os_family_set_format(msb_os_family_set set);

/* ---- Isolation scopes (1.16): call is the stricter. -------------------- */

typedef enum msb_isolation_scope {
	MSB_SCOPE_CONVERSATION = 1u << 0,
	MSB_SCOPE_CALL = 1u << 1,
} msb_isolation_scope;
typedef uint32_t msb_scope_set;
MSB_EXTERN int msb_isolation_scope_parse(const char *s, msb_isolation_scope *out, msb_error **err);
MSB_EXTERN const char *msb_isolation_scope_name(msb_isolation_scope v);
MSB_EXTERN msb_isolation_scope msb_isolation_scope_stricter(msb_isolation_scope a,
							    msb_isolation_scope b);
MSB_EXTERN char *msb_scope_set_format(msb_scope_set set);

/* ---- Identities (1.11). ------------------------------------------------ */

typedef enum msb_identity {
	MSB_IDENTITY_APP = 1u << 0,
	MSB_IDENTITY_USER = 1u << 1,
} msb_identity;
typedef uint32_t msb_identity_set;
MSB_EXTERN int msb_identity_parse(const char *s, msb_identity *out, msb_error **err);
MSB_EXTERN const char *msb_identity_name(msb_identity v);
MSB_EXTERN char *msb_identity_set_format(msb_identity_set set);

/* ---- Cleanup rungs (1.17): reclaim < reset < dispose. ------------------ */

typedef enum msb_cleanup {
	MSB_CLEANUP_RECLAIM = 0,
	MSB_CLEANUP_RESET,
	MSB_CLEANUP_DISPOSE,
} msb_cleanup;
MSB_EXTERN int msb_cleanup_parse(const char *s, msb_cleanup *out, msb_error **err);
MSB_EXTERN const char *msb_cleanup_name(msb_cleanup v);
MSB_EXTERN msb_cleanup msb_cleanup_strongest(msb_cleanup a, msb_cleanup b);

/* ---- Failed-reclaim policy (1.18). -------------------------------------- */

typedef enum msb_failed_reclaim_policy {
	MSB_FAILED_RECLAIM_DISPOSE = 0,
	MSB_FAILED_RECLAIM_KEEP,
} msb_failed_reclaim_policy;
MSB_EXTERN int msb_failed_reclaim_policy_parse(const char *s, msb_failed_reclaim_policy *out,
					       msb_error **err);
MSB_EXTERN const char *msb_failed_reclaim_policy_name(msb_failed_reclaim_policy v);

/* ---- Selection (1.15). --------------------------------------------------- */

typedef enum msb_selection {
	MSB_SELECTION_FIXED = 0,
	MSB_SELECTION_PER_SPEC,
} msb_selection;
MSB_EXTERN int msb_selection_parse(const char *s, msb_selection *out, msb_error **err);
MSB_EXTERN const char *msb_selection_name(msb_selection v);

/* ---- Source integrity (1.10). -------------------------------------------
 * MSB_INTEGRITY_UNESTABLISHED is not parseable: it is the fold's value for
 * "no label", ranked below every level (checklist 23.23). */
typedef enum msb_integrity {
	MSB_INTEGRITY_UNESTABLISHED = -1,
	MSB_INTEGRITY_UNTRUSTED = 0,
	MSB_INTEGRITY_TRUSTED = 1,
} msb_integrity;
MSB_EXTERN int msb_integrity_parse(const char *s, msb_integrity *out, msb_error **err);
MSB_EXTERN const char *msb_integrity_name(msb_integrity v);
MSB_EXTERN int msb_integrity_rank(msb_integrity v);
MSB_EXTERN msb_integrity msb_integrity_weakest(msb_integrity a, msb_integrity b);

/* ---- Entry kinds (1.12). ------------------------------------------------- */

typedef enum msb_entry_kind {
	MSB_ENTRY_FILE = 0,
	MSB_ENTRY_DIRECTORY,
	MSB_ENTRY_SYMLINK, /* any link, junction or reparse point */
	MSB_ENTRY_OTHER,   /* device, socket, fifo, unrecognised link */
} msb_entry_kind;
MSB_EXTERN int msb_entry_kind_parse(const char *s, msb_entry_kind *out, msb_error **err);
MSB_EXTERN const char *msb_entry_kind_name(msb_entry_kind v);

/* ---- Outputs (1.13, 1.14). ----------------------------------------------- */

typedef enum msb_output_disposition {
	MSB_DISPOSITION_LAND = 0,
	MSB_DISPOSITION_CONSUME,
} msb_output_disposition;
MSB_EXTERN int msb_output_disposition_parse(const char *s, msb_output_disposition *out,
					    msb_error **err);
MSB_EXTERN const char *msb_output_disposition_name(msb_output_disposition v);

typedef enum msb_name_normalization {
	MSB_NORMALIZATION_NFC = 0,
	MSB_NORMALIZATION_NONE,
} msb_name_normalization;
MSB_EXTERN int msb_name_normalization_parse(const char *s, msb_name_normalization *out,
					    msb_error **err);
MSB_EXTERN const char *msb_name_normalization_name(msb_name_normalization v);

/* ---- Disposal codes (1.20); fold precedence per checklist 23.18. ------- */

typedef enum msb_disposal_code {
	MSB_DISPOSAL_UNREACHABLE = 0,
	MSB_DISPOSAL_TIMEOUT,
	MSB_DISPOSAL_REFUSED,
	MSB_DISPOSAL_UNLISTED,
	MSB_DISPOSAL_UNKNOWN,
} msb_disposal_code;
MSB_EXTERN int msb_disposal_code_parse(const char *s, msb_disposal_code *out, msb_error **err);
MSB_EXTERN const char *msb_disposal_code_name(msb_disposal_code v);
/* Precedence: refused > unreachable > timeout > unlisted > unknown. */
MSB_EXTERN int msb_disposal_code_precedence(msb_disposal_code v);

/* ---- File refusals (1.21). ----------------------------------------------- */

typedef enum msb_file_refusal {
	MSB_FILE_REFUSAL_NOT_FOUND = 0,
	MSB_FILE_REFUSAL_IS_DIRECTORY,
	MSB_FILE_REFUSAL_PERMISSION_DENIED,
	MSB_FILE_REFUSAL_INVALID_PATH,
} msb_file_refusal;
MSB_EXTERN int msb_file_refusal_parse(const char *s, msb_file_refusal *out, msb_error **err);
MSB_EXTERN const char *msb_file_refusal_name(msb_file_refusal v);

/* ---- Signal outcomes (1.22). --------------------------------------------- */

typedef enum msb_signal_outcome {
	MSB_SIGNAL_SENT = 0,
	MSB_SIGNAL_REFUSED,
	MSB_SIGNAL_ABSENT,
	MSB_SIGNAL_UNRECORDED,
	MSB_SIGNAL_UNKNOWN,
} msb_signal_outcome;
MSB_EXTERN int msb_signal_outcome_parse(const char *s, msb_signal_outcome *out, msb_error **err);
MSB_EXTERN const char *msb_signal_outcome_name(msb_signal_outcome v);

/* ---- ReclaimFailure.disposal (1.23). ------------------------------------- */

typedef enum msb_reclaim_disposal {
	MSB_RECLAIM_DISPOSED = 0,
	MSB_RECLAIM_FAILED,
	MSB_RECLAIM_KEPT,
} msb_reclaim_disposal;
MSB_EXTERN int msb_reclaim_disposal_parse(const char *s, msb_reclaim_disposal *out,
					  msb_error **err);
MSB_EXTERN const char *msb_reclaim_disposal_name(msb_reclaim_disposal v);

/* ---- Source channels (1.24). --------------------------------------------- */

typedef enum msb_source_channel {
	MSB_SOURCE_FILE_STORE = 0,
} msb_source_channel;
MSB_EXTERN int msb_source_channel_parse(const char *s, msb_source_channel *out, msb_error **err);
MSB_EXTERN const char *msb_source_channel_name(msb_source_channel v);

/* ---- HTTP method tokens (1.19, 3.7). --------------------------------------
 * Named verbs are provided as constants; any uppercase RFC 9110 token is a
 * valid method. msb_http_method_valid() is the one check. */
#define MSB_HTTP_GET "GET"
#define MSB_HTTP_HEAD "HEAD"
#define MSB_HTTP_POST "POST"
#define MSB_HTTP_PUT "PUT"
#define MSB_HTTP_PATCH "PATCH"
#define MSB_HTTP_DELETE "DELETE"
#define MSB_HTTP_OPTIONS "OPTIONS"
#define MSB_HTTP_CONNECT "CONNECT"
#define MSB_HTTP_TRACE "TRACE"
/* true iff `s` is a non-empty RFC 9110 token with no lowercase letter. */
MSB_EXTERN bool msb_http_method_valid(const char *s);

/* ---- Transfer limits (1.26-1.28). ---------------------------------------- */

typedef struct msb_transfer_limits {
	uint64_t max_bytes_per_file;
	uint64_t max_total_bytes;
	uint64_t max_files;
} msb_transfer_limits;

#define MSB_DEFAULT_TRANSFER_LIMITS_INIT                                                           \
	{                                                                                          \
		8u * 1048576u, 32u * 1048576u, 64u                                                 \
	}
MSB_EXTERN extern const msb_transfer_limits MSB_DEFAULT_TRANSFER_LIMITS;

/* true iff every field of `ask` is <= the same field of `ceiling`. */
MSB_EXTERN bool msb_transfer_limits_within(const msb_transfer_limits *ask,
					   const msb_transfer_limits *ceiling);

typedef struct msb_sandbox_limits {
	msb_transfer_limits files_in;
	msb_transfer_limits files_out;
} msb_sandbox_limits;

#define MSB_DEFAULT_SANDBOX_LIMITS_INIT                                                            \
	{                                                                                          \
		MSB_DEFAULT_TRANSFER_LIMITS_INIT, MSB_DEFAULT_TRANSFER_LIMITS_INIT                 \
	}
MSB_EXTERN extern const msb_sandbox_limits MSB_DEFAULT_SANDBOX_LIMITS;

MSB_END_DECLS

#endif
