/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb/outputs.h - declared outputs, collect_outputs, sinks and artifact
 * names (checklist section 12 and the file-store sink of section 16), and
 * file transfer over exec (section 11). The user manual is docs/outputs.md.
 *
 * A spec declares the files a kind produces (msb_declared_output, msb/spec.h):
 * a literal path relative to the storage base, a media type the host states
 * (never sniffed), whether it is required, the name it lands under, and its
 * disposition - LAND (delivered to a sink) or CONSUME (the host reads it
 * itself; collect_outputs only stats and counts it). msb_collect_outputs()
 * moves the landing ones out of the sandbox in four phases:
 *
 *   1. what the declaration alone decides, before the sandbox is touched: a
 *      sink for anything landing, a call id for a per-call sink, call-time
 *      outputs only when the spec allows them, every path and delivered name
 *      valid, no two landing names that collide;
 *   2. stat every declared output in order (CONSUME too), and count it
 *      against all three fields of the spec's files_out TransferLimits;
 *   3. read the landing ones, each bounded by what its stat said, and count
 *      the bytes received again;
 *   4. deliver, in declaration order.
 *
 * A refusal in phases 1-3 delivers nothing. A refusal during delivery leaves
 * what was already delivered in place (12.19, 12.29).
 *
 * Thread-safety: every function is reentrant. A sink is called from the
 * thread that runs collect_outputs; the sinks made here may be shared by
 * concurrent collections.
 */
#ifndef MSB_OUTPUTS_H
#define MSB_OUTPUTS_H

#include <msb/common.h>
#include <msb/error.h>
#include <msb/key.h>
#include <msb/observer.h>
#include <msb/sandbox.h>
#include <msb/session.h>
#include <msb/spec.h>
#include <msb/vocab.h>

MSB_BEGIN_DECLS

/* ---- Artifact names (12.24, 12.25, 12.31) -------------------------------------------------- */

#define MSB_MAX_ARTIFACT_NAME_BYTES 255

/*
 * validate_artifact_name: MSB_E_ARTIFACT_NAME_INVALID for an empty name, a
 * backslash, a leading "/", a ".." segment, an empty or "." segment ("a//b",
 * "a/./b", a trailing "/"), an ASCII control character (0-31), invalid UTF-8
 * (surrogates and overlongs included), or more than 255 bytes. Nothing else:
 * "CON" and "a:b" are valid names (portable_name is opt-in).
 */
MSB_EXTERN int msb_validate_artifact_name(const char *name, msb_error **err);

/*
 * The collision key of a valid name: NFC, then each code point's simple
 * lowercase mapping, then NFC again (12.9). Lower, not casefold: "straße"
 * and "strasse" keep apart, and so do "ﬁ" and "fi" (compatibility forms are
 * not folded, 12.10). Two landing names collide when their keys are equal.
 * *key is malloc()ed.
 */
MSB_EXTERN int msb_artifact_name_collision_key(const char *name, char **key, msb_error **err);

/* The delivered spelling of a name under a sink's normalization: NFC
 * composed, or the bytes as given for MSB_NORMALIZATION_NONE (12.11).
 * *out is malloc()ed. MSB_E_ARTIFACT_NAME_INVALID for invalid UTF-8. */
MSB_EXTERN int msb_artifact_name_normalize(const char *name, msb_name_normalization normalization,
					   char **out, msb_error **err);

/*
 * portable_name (12.25): an opt-in rewrite, per segment, for hosts that land
 * on filesystems with Windows rules: <>:"|?* and control characters become
 * "_", trailing dots and spaces are stripped, a reserved device stem (CON,
 * PRN, AUX, NUL, COM1-9, LPT1-9, COM¹²³, LPT¹²³; any case; with or without
 * an extension) gets "_" appended to the stem, and an empty segment becomes
 * "_". Never applied automatically. *out is malloc()ed.
 */
MSB_EXTERN int msb_portable_name(const char *name, char **out, msb_error **err);

/* ---- Artifacts and sinks (12.22, 12.23) ---------------------------------------------------- */

/* What a sink receives: borrowed for the duration of deliver. */
typedef struct msb_artifact {
	const char *name; /* the delivered spelling */
	const uint8_t *content;
	size_t len;
	const char *kind;	/* the spec's kind */
	const char *media_type; /* as declared; NULL = none */
} msb_artifact;

/*
 * What landed. `display` is the only text a model may see; `handle` is for
 * the host (a host path, a store path) and is never rendered to the model.
 * sha256 is the lower-case hex digest of the bytes delivered.
 */
typedef struct msb_landed_artifact {
	char *name;
	char *display;
	char *handle; /* NULL = none */
	char *media_type;
	uint64_t size_bytes;
	char sha256[65];
} msb_landed_artifact;
MSB_EXTERN void msb_landed_artifact_clear(msb_landed_artifact *a);
MSB_EXTERN void msb_landed_artifacts_free(msb_landed_artifact *v, size_t n);

/*
 * OutputSink. deliver lands one artifact and fills *out (name, display,
 * handle; collect_outputs fills size and sha256), or refuses by returning a
 * negative code - never a silent drop. call_id is the collection's (NULL
 * when none was given; a per_call sink always gets one). `normalization`
 * decides the delivered spelling (default NFC); `per_call` makes
 * collect_outputs require a call id (default false). A sink carries no
 * confidentiality cap. `free` (may be NULL) releases userdata in
 * msb_output_sink_free().
 */
typedef struct msb_output_sink {
	unsigned version;
	void *userdata;
	int (*deliver)(void *userdata, const msb_artifact *artifact, const char *call_id,
		       msb_landed_artifact *out, msb_error **err);
	msb_name_normalization normalization;
	bool per_call;
	void (*free)(void *userdata);
} msb_output_sink;
#define MSB_OUTPUT_SINK_VERSION 1
#define MSB_OUTPUT_SINK_INIT                                                                       \
	{                                                                                          \
		MSB_OUTPUT_SINK_VERSION, NULL, NULL, MSB_NORMALIZATION_NFC, false, NULL            \
	}

/* Free a sink made by one of the constructors below (calls sink->free). NULL ok. */
MSB_EXTERN void msb_output_sink_free(msb_output_sink *sink);

/* Helper predicates (12.30). */
/* Declared outputs with LAND: the count. */
MSB_EXTERN size_t msb_spec_landing_output_count(const msb_spec *spec);
/* Any LAND output, or the call-time flag. */
MSB_EXTERN bool msb_spec_lands_artifacts(const msb_spec *spec);
/* Build (never raise) the SandboxOutputSinkRequired refusal into *err, with
 * its one wording, naming up to the first landing path and `asked_by`.
 * Returns MSB_E_OUTPUT_SINK_REQUIRED. */
MSB_EXTERN int msb_missing_sink_refusal(const msb_spec *spec, const char *asked_by,
					msb_error **err);

/* ---- The filesystem sink (12.26-12.29) ----------------------------------------------------- */

typedef enum msb_landing_existing {
	MSB_LANDING_REFUSE = 0, /* SandboxLandingExists (the default) */
	MSB_LANDING_REPLACE,
} msb_landing_existing;

/* display callback: *out (malloc()ed) is the model-visible line for an
 * artifact that landed at `handle`. */
typedef int (*msb_display_fn)(void *userdata, const msb_artifact *artifact, const char *handle,
			      char **out, msb_error **err);

typedef struct msb_fs_sink_options {
	unsigned version;
	msb_landing_existing existing;
	msb_display_fn display; /* NULL = "<name> (<n> bytes)" */
	void *display_userdata;
	unsigned file_mode; /* 0 = 0644 (before the umask) */
} msb_fs_sink_options;
#define MSB_FS_SINK_OPTIONS_VERSION 1
#define MSB_FS_SINK_OPTIONS_INIT                                                                   \
	{                                                                                          \
		MSB_FS_SINK_OPTIONS_VERSION, MSB_LANDING_REFUSE, NULL, NULL, 0                     \
	}

/*
 * make_file_system_sink(root). The root (an existing directory) is resolved
 * once, here. Each artifact lands at root/name: every component is opened
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from the root's fd, so
 * a link anywhere below the root, or a path leaving it, is refused with
 * SandboxLandingNotConfined (the message names no host path). Missing parent
 * directories are created. The bytes go to a hidden sibling first and are
 * renamed into place with RENAME_NOREPLACE, so an existing destination is
 * refused with SandboxLandingExists without a check-then-write window, and a
 * reader never sees a partial file; MSB_LANDING_REPLACE renames over it.
 * handle = the absolute host path. opts may be NULL.
 */
MSB_EXTERN int msb_fs_sink_new(const char *root, const msb_fs_sink_options *opts,
			       msb_output_sink **out, msb_error **err);

/* ---- The file-store sink and its read tools (16.17-16.22) ---------------------------------- */

/*
 * A text file store with exclusive create. create refuses an existing path
 * with MSB_E_LANDING_EXISTS; read sets *present = false for an absent path;
 * list returns the names (msb_strv) directly under `dir` ("" = the top),
 * directories with a trailing "/". Paths are "/"-separated and relative.
 */
typedef struct msb_text_store {
	unsigned version;
	void *userdata;
	int (*create)(void *userdata, const char *path, const char *text, size_t len,
		      msb_error **err);
	int (*read)(void *userdata, const char *path, char **text, size_t *len, bool *present,
		    msb_error **err);
	int (*list)(void *userdata, const char *dir, char ***names, msb_error **err);
} msb_text_store;
#define MSB_TEXT_STORE_VERSION 1

typedef struct msb_store_sink_options {
	unsigned version;
	msb_file_store_provenance *provenance; /* referenced; NULL = nothing recorded */
	msb_integrity integrity;	       /* recorded for each landing; default UNTRUSTED */
} msb_store_sink_options;
#define MSB_STORE_SINK_OPTIONS_VERSION 1
#define MSB_STORE_SINK_OPTIONS_INIT                                                                \
	{                                                                                          \
		MSB_STORE_SINK_OPTIONS_VERSION, NULL, MSB_INTEGRITY_UNTRUSTED                      \
	}

/*
 * make_file_store_sink(store): lands each artifact at "<call_id>/<name>"
 * and is per_call, so collect_outputs needs a call id (a single path
 * segment). Bytes that are not valid UTF-8 are refused with
 * SandboxLandingNotText (never mangled); an existing destination with
 * SandboxLandingExists (never replaced). The landing is recorded in the
 * provenance before the bytes are written. handle = the store path; display
 * "<call_id>/<name> (<n> bytes)". *store is copied.
 */
MSB_EXTERN int msb_store_sink_new(const msb_text_store *store, const msb_store_sink_options *opts,
				  msb_output_sink **out, msb_error **err);

/* The tools' prefix by default (DESIGN 9.36). */
#define MSB_OUTPUTS_TOOL_PREFIX "sandbox_outputs"

/*
 * sandbox_outputs_read_tools(store, prefix): the two read-only tools over the
 * store, "<prefix>_ls" and "<prefix>_read" - there is no write tool. The
 * names (msb_strv, NULL prefix = MSB_OUTPUTS_TOOL_PREFIX) and the two
 * functions. Both answer the model with text and carry no label of their
 * own; a refusal is a sentence starting "Error: ", not an error code (a
 * negative code is reserved for allocation failure and a NULL store).
 */
MSB_EXTERN int msb_outputs_read_tool_names(const char *prefix, char ***names, msb_error **err);
/* ls: one name a line, sorted; "" or "." = the top. */
MSB_EXTERN int msb_outputs_tool_ls(const msb_text_store *store, const char *dir, char **text,
				   msb_error **err);
/* read: the file's text. */
MSB_EXTERN int msb_outputs_tool_read(const msb_text_store *store, const char *path, char **text,
				     msb_error **err);

/* ---- collect_outputs (12.1-12.21) ---------------------------------------------------------- */

typedef struct msb_collect_options {
	unsigned version;
	const msb_output_sink *sink; /* NULL = none */
	/* Call-time outputs (12.3, 12.4): refused with MSB_E_VALUE unless the
	 * spec sets outputs_named_at_call_time; added after the declared ones. */
	const msb_declared_output *outputs;
	size_t n_outputs;
	const char *call_id;	       /* per-call sinks need it; also the event's call */
	const msb_observer *observer;  /* OutputsCollected; NULL = none */
	const msb_key *key;	       /* the event's key; may be NULL */
	const char *working_directory; /* NULL = the storage base */
	msb_log_fn log;		       /* contained observer failures; may be NULL */
	void *log_userdata;
} msb_collect_options;
#define MSB_COLLECT_OPTIONS_VERSION 1
#define MSB_COLLECT_OPTIONS_INIT                                                                   \
	{                                                                                          \
		.version = MSB_COLLECT_OPTIONS_VERSION                                             \
	}

/*
 * collect_outputs. On success *landed (free with msb_landed_artifacts_free)
 * holds one entry per landing output that was present, in declaration order
 * (n may be 0: nothing to read touches no sink, 12.20). Refusals, all in
 * MSB_CAT_OUTPUT unless noted:
 *   phase 1 (sandbox untouched): MSB_E_VALUE for call-time outputs without
 *     the flag or a per-call sink without call_id; SandboxOutputSinkRequired;
 *     SandboxArtifactNameInvalid (every path, CONSUME too, and each landing
 *     name) with the path as payload; SandboxArtifactNameCollision (the
 *     message says "identical" or "differ only in case or Unicode form");
 *   phase 2: SandboxOutputNotConfined (the backend's ValueError),
 *     SandboxOutputUnreachable (its OSError), SandboxOutputMissing (a
 *     required output absent; an optional one is skipped),
 *     SandboxOutputNotRegular, SandboxOutputSizeUnknown,
 *     SandboxTransferCapExceeded naming the cap and the file, checked per
 *     file in the order max_bytes_per_file, max_files, max_total_bytes;
 *   phase 3: the same translation, and SandboxTransferCapExceeded for a file
 *     that grew past what its stat said;
 *   phase 4: whatever the sink refuses with (earlier deliveries stay).
 * Every other backend error (NotImplementedError, cancellation) passes
 * through unchanged. OutputsCollected is emitted once, on success and on
 * refusal (refusal = the error's seed name; landed = what was delivered).
 */
MSB_EXTERN int msb_collect_outputs(msb_sandbox *sb, const msb_spec *spec,
				   const msb_collect_options *opts, msb_landed_artifact **landed,
				   size_t *n_landed, msb_error **err);

/* ---- File transfer over exec (11.1-11.11) -------------------------------------------------- */

/* The utilities the shell road needs in the image (11.6). NULL-terminated. */
MSB_EXTERN extern const char *const MSB_SHELL_UTILITIES[];

typedef struct msb_exec_transfer_options {
	unsigned version;
	const char *working_directory; /* NULL = the storage base */
	double timeout;		       /* the whole transfer, seconds; finite > 0 */
	uint64_t max_bytes;	       /* read: the cap (0 = files_out default per file) */
	const char *call_id;	       /* names the write's sibling; NULL = random */
	msb_tool_call *call;	       /* unfinished transfers are reported unclean on it */
	msb_cancel *cancel;
	size_t chunk_bytes; /* write: raw bytes per chunk; 0 = 48 KiB */
} msb_exec_transfer_options;
#define MSB_EXEC_TRANSFER_OPTIONS_VERSION 1
#define MSB_EXEC_TRANSFER_OPTIONS_INIT                                                             \
	{                                                                                          \
		.version = MSB_EXEC_TRANSFER_OPTIONS_VERSION, .timeout = 30.0                      \
	}

/*
 * write_file_over_exec (11.1, 11.2): for paths a file plane cannot reach.
 * Creates the parent directory, writes the content in base64 chunks (each
 * one bounded exec) into the sibling ".<name>.<call_id>" and moves it into
 * place with one mv, so a reader sees the old file or the new one, never a
 * mix. Refusals: SandboxFileRefused carrying a msb_file_refusal (what the
 * guest shell said); MSB_E_NOT_IMPLEMENTED when the sandbox has no
 * exec_bounded (11.5); SandboxShellTransferUnfinished when an exec's end is
 * unknown (its bound expired: it may still run, it may have landed part),
 * after reporting the instance unclean on opts->call when given (11.10);
 * MSB_E_CANCELLED passes through (11.11).
 */
MSB_EXTERN int msb_write_file_over_exec(msb_sandbox *sb, const char *path, const uint8_t *data,
					size_t len, const msb_exec_transfer_options *opts,
					msb_error **err);

/*
 * read_file_over_exec (11.3, 11.4): probe the entry (a link, a directory or
 * another non-regular entry is refused; an absent one is told apart from one
 * behind an unsearchable directory by opening it), refuse a size above
 * max_bytes, read it as base64 under an output budget sized for max_bytes,
 * and count the decoded bytes again: a file that grew between probe and read
 * is SandboxTransferCapExceeded. Other refusals as for write. *data is
 * malloc()ed.
 */
MSB_EXTERN int msb_read_file_over_exec(msb_sandbox *sb, const char *path,
				       const msb_exec_transfer_options *opts, uint8_t **data,
				       size_t *len, msb_error **err);

/* file_refusal(exc) (11.8): the refusal an error code stands for.
 * PermissionError -> permission_denied, FileNotFoundError -> not_found,
 * IsADirectoryError -> is_directory, ValueError -> invalid_path,
 * SandboxFileRefused -> its payload; false for everything else (cap
 * exceeded and timeouts are not refusals). `e` may be NULL (code only). */
MSB_EXTERN bool msb_file_refusal_of(int code, const msb_error *e, msb_file_refusal *out);

/* entry_refusal(entry) (11.9): NULL (absent) -> not_found, directory ->
 * is_directory, link or other -> invalid_path; false for a regular file. */
MSB_EXTERN bool msb_entry_refusal(const msb_entry *entry, msb_file_refusal *out);

MSB_END_DECLS

#endif
