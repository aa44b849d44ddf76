/* SPDX-License-Identifier: Apache-2.0 */
/* The msb command line: one verb, one library call. */
#ifndef MSB_CLI_H
#define MSB_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>
#include <msb/msb.h>

/*
 * The verbs and their options are data: `msb VERB --help`, `msb completion
 * bash|zsh` and `msb man` are all generated from these tables (cli/help.c),
 * and each verb's getopt table is built from its rows (cli_getopt).
 */
typedef enum cli_value {
	CLI_VALUE_NONE = 0, /* a flag: no argument */
	CLI_VALUE_TEXT,	    /* free text (a name, a number) */
	CLI_VALUE_FILE,	    /* a host file */
	CLI_VALUE_DIR,	    /* a host directory */
	CLI_VALUE_WORDS,    /* one of `words` */
} cli_value;

typedef struct cli_option {
	const char *name;  /* the long name, without "--" */
	const char *arg;   /* the argument's name in help (FILE, N); NULL for a flag */
	const char *help;  /* what it does; lines separated by '\n', no final newline */
	int id;		   /* what getopt_long returns for it */
	cli_value value;   /* what its argument completes to */
	const char *words; /* CLI_VALUE_WORDS: the words, space-separated */
} cli_option;

typedef struct cli_verb {
	const char *name;
	const char *summary;	   /* one line, lower-case, for `msb --help` and the man page */
	const char *synopsis;	   /* the usage line(s) after "usage: " (later lines indented) */
	const char *description;   /* paragraphs after the synopsis; may be NULL */
	const cli_option *options; /* ended by a row whose name is NULL; may be NULL */
	const char *operands;	   /* sub-verbs the first operand completes to, space-separated;
				    * may be NULL */
	cli_value operand_value;   /* what other operands complete to */
	int (*run)(int argc, char **argv);
} cli_verb;

/* Every verb, in `msb --help` order. */
const cli_verb *const *cli_verbs(size_t *n);
/* The verb's whole help text (synopsis, description, options) to f. */
void cli_print_usage(const cli_verb *verb, FILE *f);
/* The verb's options as getopt_long's table into out (NULL-ended); false
 * when more than cap - 1 rows. */
struct option;
bool cli_getopt_table(const cli_verb *verb, struct option *out, size_t cap);
extern const cli_verb verb_completion, verb_man;

/* Print an error as "msb: Name: message" and return its exit status. */
int cli_fail(msb_error *err);
/* Usage error: print and return 2. */
int cli_usage(const cli_verb *verb, const char *fmt, ...) MSB_PRINTF(2, 3);
/* Read a whole file (or "-" for stdin) into a NUL-terminated buffer. */
int cli_read_file(const char *path, char **out, size_t *len, msb_error **err);
/* The log callback the CLI installs: warnings and errors to stderr. */
void cli_log(void *ud, msb_log_level level, const char *component, const char *message);
/* true when an argument before "--" is --help or -h. */
bool cli_wants_help(int argc, char **argv);

int cmd_check(int argc, char **argv);
extern const cli_verb verb_check;
extern const cli_verb verb_conformance;
int cmd_serve(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
extern const cli_verb verb_serve, verb_mcp;
/* `<dir of this binary>/../<rel>` into out when it is accessible with `mode`
 * (a build tree keeps msb-shim, msb-agent and the escape probe there);
 * false and out empty otherwise. */
bool cli_beside_binary(const char *rel, int mode, char *out, size_t size);
/* nbytes (at most 16) random bytes as hex into out (2 * nbytes + 1 chars);
 * zeros if the kernel gives none. */
void cli_random_hex(char *out, size_t nbytes);
/* Point $MSB_SHIM, $MSB_AGENT and $MSB_EGRESS_PROXY at the helpers beside
 * this binary in a build tree, unless they are set. */
void cli_locate_helpers(void);
/* A positive decimal count. */
bool cli_parse_size(const char *s, uint64_t *out);

/*
 * The flags of a verb that makes a backend (cli/backend_json.c): the backend
 * JSON is --config's object, or {"type": type}; `type`, when given, is also
 * what the file must name if it names one. state_dir, image and the object
 * in the file egress_config are written over the keys of the same meaning.
 */
typedef struct cli_backend_flags {
	const char *config;
	const char *type;
	const char *state_dir;
	const char *image;
	const char *egress_config;
	const char *runtime; /* --runtime: an `oci` backend's `runtime` */
	/* pool_size for an `ns` backend when neither its JSON nor the
	 * configuration file names one: CLI_FRONT_POOL_SIZE for the front ends
	 * (run, serve, mcp), 0 for every other verb (docs/pool.md). */
	unsigned pool_default;
} cli_backend_flags;

/* The built-in warm pool of `msb run`, `msb serve` and `msb mcp`: a ready
 * sandbox for the next run and one starting behind it (docs/pool.md). */
#define CLI_FRONT_POOL_SIZE 2
/*
 * The backend JSON object (json_decref it): --config's object (type must
 * be f->type when given); else the configuration file's `backend` when it
 * is of f->type (or f->type is NULL); else {"type": f->type or "ns"}; the
 * flags written over it.
 */
int cli_backend_object(const cli_backend_flags *f, json_t **out, msb_error **err);
/* The same, and *sources: each key's source ("flag", "file", "built-in
 * default"). */
int cli_backend_object_sourced(const cli_backend_flags *f, json_t **out, json_t **sources,
			       msb_error **err);
/* The same as compact text (free it). */
int cli_backend_json(const cli_backend_flags *f, char **out, msb_error **err);
/* The backend itself, through msb_backend_from_json. */
int cli_backend_new(const cli_backend_flags *f, msb_backend **out, msb_error **err);
/* The Linux-only backends' parts (backends_linux.c; backends_win32.c): an
 * image's unpacking progress on a terminal; the state root of an ns, oci or
 * vm backend (NULL for another) and *sub its name; `msb ls`'s listing. */
void cli_backend_progress(msb_backend *b);
const char *cli_backend_state_root(const msb_backend *b, const char **sub);
int cli_ls_list(msb_backend *b, bool json, msb_error **err);
/* Drain the warm pool of b's state root when b is an ns or oci backend
 * (*n: how many went); 0 with *n = 0 for any other backend. */
int cli_pool_drain(msb_backend *b, size_t *n, msb_error **err);
/* Has b a warm pool (an ns or oci backend)? */
bool cli_pool_backend(const msb_backend *b);

/* The router JSON options (without backends): the configuration file's
 * `router`, --min-isolation (may be NULL) over it; *sources as above. */
int cli_router_object(const char *min_isolation, json_t **out, json_t **sources, msb_error **err);
/* The same as msb_router_options (*selected owned, may be NULL). */
int cli_router_options(const char *min_isolation, msb_router_options *out, char **selected,
		       msb_error **err);
/* The whole router JSON: those options and "backends": [the backend]. */
int cli_router_json(const cli_backend_flags *f, const char *min_isolation, char **out,
		    msb_error **err);
/* true when the floor was stated: by --min-isolation or by the file. */
bool cli_floor_from_flag_or_file(const char *min_isolation);

/* ---- the configuration file (cli/config.c; docs/cli.md "Configuration") ---- */

#define CLI_RESOURCES 4
/* memory_bytes, pids_max, cpu_millis, writable_bytes: the spec's resources. */
extern const char *const cli_resource_keys[CLI_RESOURCES + 1];

typedef struct cli_config {
	char *path;	      /* the file read; NULL when there is none */
	const char *found_by; /* "$MSB_CONFIG", "$XDG_CONFIG_HOME", "$HOME/.config", "/etc"
			       * or "$MSB_SYSTEM_CONFIG" */
	json_t *root;	      /* the whole file */
	json_t *router;	      /* its `router` (borrowed from root) or NULL */
	json_t *backend;      /* its `backend` or NULL */
	uint64_t resources[CLI_RESOURCES]; /* defaults.resources; 0 = unset */
	uint64_t pool_size;		   /* defaults.pool_size, for the warm pool */
	bool has_pool_size;
	json_t *env; /* defaults.env, the spec's env (borrowed from root) or NULL */
} cli_config;

/* The configuration, found and checked on first use and kept for the
 * process. A file that is malformed fails every verb that reads it. */
int cli_config_get(const cli_config **out, msb_error **err);
void cli_config_clear(cli_config *c);
/* Fill the zeros of res (flags) from defaults.resources. */
void cli_spec_resources(uint64_t res[CLI_RESOURCES]);
/* Set the spec's env from defaults.env (an exec's --env wins over it). */
void cli_spec_env(msb_spec_builder *sb);
/* A positive count, with a K/M/G suffix (powers of 1024) when `suffixes`. */
bool cli_parse_count(const char *s, bool suffixes, uint64_t *out);

/* ---- option rows the verbs share (the same text in --help, completion, man) ---- */

#define CLI_OPTION_BACKEND(id)                                                                     \
	{                                                                                          \
		"backend", "TYPE",                                                                 \
			"the backend type (default `" CLI_DEFAULT_BACKEND                          \
			"`; `msb doctor` lists\n"                                                  \
			"this build's: ns, docker, wslc, oci, ... on Linux; docs/engine.md)",      \
			id, CLI_VALUE_TEXT, NULL                                                   \
	}
#define CLI_OPTION_CONFIG(id)                                                                      \
	{                                                                                          \
		"config", "FILE",                                                                  \
			"the backend as backend JSON (docs/policy.md); default: the\n"             \
			"configuration file's `backend`, else {\"type\": \"" CLI_DEFAULT_BACKEND   \
			"\"}; the flags\n"                                                         \
			"below write over its keys",                                               \
			id, CLI_VALUE_FILE, NULL                                                   \
	}
#define CLI_OPTION_STATE_DIR(id)                                                                   \
	{                                                                                          \
		"state-dir", "DIR",                                                                \
			"the backend's `state_dir` (ns: its state root; default\n"                 \
			"$MSB_STATE_DIR, else /run/msb)",                                          \
			id, CLI_VALUE_DIR, NULL                                                    \
	}
#define CLI_OPTION_IMAGE(id)                                                                       \
	{                                                                                          \
		"image", "IMAGE",                                                                  \
			"the backend's `image`: `host` (default), `dir:PATH` "                     \
			"or\n`oci:PATH[:TAG]`",                                                    \
			id, CLI_VALUE_TEXT, NULL                                                   \
	}
#define CLI_OPTION_RUNTIME(id)                                                                     \
	{                                                                                          \
		"runtime", "NAME",                                                                 \
			"the `oci` backend's `runtime`: `runsc` (gVisor, the default)\n"           \
			"or `crun` (docs/oci.md)",                                                 \
			id, CLI_VALUE_TEXT, NULL                                                   \
	}
#define CLI_OPTION_EGRESS_CONFIG(id)                                                               \
	{                                                                                          \
		"egress-config", "FILE", "the backend's `egress` settings (JSON, docs/egress.md)", \
			id, CLI_VALUE_FILE, NULL                                                   \
	}
#define CLI_OPTION_FLOOR(id)                                                                       \
	{                                                                                          \
		"min-isolation", "RUNG",                                                           \
			"the router's floor (default: the configuration's, else\n"                 \
			"microvm; `ns` is a container: pass container to opt down)",               \
			id, CLI_VALUE_WORDS,                                                       \
			"none runtime os_process container hardened_container microvm vm"          \
	}
#define CLI_OPTION_MEMORY(id)                                                                      \
	{                                                                                          \
		"memory", "BYTES", "memory limit, swap included (suffix K, M, G: powers of 1024)", \
			id, CLI_VALUE_TEXT, NULL                                                   \
	}
#define CLI_OPTION_PIDS(id)                                                                        \
	{                                                                                          \
		"pids", "N", "at most N processes and threads, the agent included", id,            \
			CLI_VALUE_TEXT, NULL                                                       \
	}
#define CLI_OPTION_CPU(id)                                                                         \
	{                                                                                          \
		"cpu", "MILLIS", "CPU time in thousandths of a core (500 = half a core)", id,      \
			CLI_VALUE_TEXT, NULL                                                       \
	}
#define CLI_OPTION_SCOPE(id)                                                                       \
	{                                                                                          \
		"scope", "S", "the key's scope (default: cli)", id, CLI_VALUE_TEXT, NULL           \
	}
#define CLI_OPTION_THREAD(id)                                                                      \
	{                                                                                          \
		"thread", "T", "the key's thread id (the conversation)", id, CLI_VALUE_TEXT, NULL  \
	}
#define CLI_OPTION_AGENT(id)                                                                       \
	{                                                                                          \
		"agent", "A", "the key's agent directory (default: cli)", id, CLI_VALUE_TEXT, NULL \
	}
#define CLI_OPTION_KIND(id)                                                                        \
	{                                                                                          \
		"kind", "K", "the workload kind (default: shell)", id, CLI_VALUE_TEXT, NULL        \
	}
#define CLI_OPTION_END                                                                             \
	{                                                                                          \
		NULL, NULL, NULL, 0, 0, NULL                                                       \
	}

/* ---- the sandbox a verb addresses (cli/target.c) ---- */

/* Option ids of the rows below; a verb's own ids start at CLI_OPT_VERB. */
enum {
	CLI_OPT_CONFIG = 2000,
	CLI_OPT_STATE,
	CLI_OPT_IMAGE,
	CLI_OPT_EGRESS_CONFIG,
	CLI_OPT_RUNTIME,
	CLI_OPT_FLOOR,
	CLI_OPT_SCOPE,
	CLI_OPT_THREAD,
	CLI_OPT_AGENT,
	CLI_OPT_KIND,
	CLI_OPT_MEMORY,
	CLI_OPT_PIDS,
	CLI_OPT_CPU,
	CLI_OPT_ALLOW,
	CLI_OPT_VERB,
};

#define CLI_OPTION_ALLOW(id)                                                                       \
	{                                                                                          \
		"allow", "HOST[=M,...]",                                                           \
			"egress allowlist entry (repeatable; `=GET,HEAD` limits the\n"             \
			"methods); makes the spec's egress `allowlist`",                           \
			id, CLI_VALUE_TEXT, NULL                                                   \
	}

/* The rows that name a sandbox the way `exec` does: key, floor, backend,
 * limits and egress (the spec a warm sandbox was made with must match). */
#define CLI_TARGET_ROWS                                                                            \
	CLI_OPTION_THREAD(CLI_OPT_THREAD), CLI_OPTION_SCOPE(CLI_OPT_SCOPE),                        \
		CLI_OPTION_AGENT(CLI_OPT_AGENT), CLI_OPTION_KIND(CLI_OPT_KIND),                    \
		CLI_OPTION_FLOOR(CLI_OPT_FLOOR), CLI_OPTION_CONFIG(CLI_OPT_CONFIG),                \
		CLI_OPTION_STATE_DIR(CLI_OPT_STATE), CLI_OPTION_IMAGE(CLI_OPT_IMAGE),              \
		CLI_OPTION_RUNTIME(CLI_OPT_RUNTIME), CLI_OPTION_MEMORY(CLI_OPT_MEMORY),            \
		CLI_OPTION_PIDS(CLI_OPT_PIDS), CLI_OPTION_CPU(CLI_OPT_CPU),                        \
		CLI_OPTION_ALLOW(CLI_OPT_ALLOW), CLI_OPTION_EGRESS_CONFIG(CLI_OPT_EGRESS_CONFIG)

typedef struct cli_target {
	cli_backend_flags backend;
	const char *min_isolation;
	const char *scope, *thread, *agent, *kind;
	uint64_t resources[CLI_RESOURCES]; /* the flags; 0 = the configuration's, else default */
	const char *allow[64];
	size_t n_allow;
	msb_transfer_limits transfer; /* the spec's files_in and files_out */
} cli_target;

/* Scope and agent `cli`, kind `shell`, the default transfer limits, the
 * rest unset. */
void cli_target_init(cli_target *t);
/* One option of CLI_TARGET_ROWS: 1 taken, 0 not one of them, -1 a usage
 * error (printed). */
int cli_target_option(cli_target *t, const cli_verb *verb, int id, const char *arg);
/* The router over the one backend (observer may be NULL). */
int cli_target_router(const cli_target *t, const msb_observer *observer, msb_router **out,
		      msb_error **err);
/* A spec builder with the kind, `requires`, the resources and the egress
 * rules; NULL when out of memory. */
msb_spec_builder *cli_target_spec(const cli_target *t, msb_capset requires);
/* Router and conversation-scoped sandbox for the key (release, then free);
 * *spec (may be NULL) the spec it was acquired with (unref it). */
int cli_target_acquire(const cli_target *t, msb_capset requires, msb_router **router,
		       msb_sandbox **sb, msb_spec **spec, msb_error **err);

/* The texts msb --help and msb(1) share (cli/msb.c). */
extern const char cli_overview[], cli_exit_status[];
/* The configuration file and the environment, for this platform (os.h's
 * places, the default backend); built once. */
const char *cli_config_overview(void);
const char *cli_environment(void);

extern const cli_verb verb_run, verb_acquire, verb_exec, verb_ls, verb_dispose, verb_purge,
	verb_doctor, verb_config, verb_cp, verb_files;

/* msb pool (cli/cmd_pool.c). */
extern const cli_verb verb_pool;
/* The rows of `msb ls`: the sandboxes, then the pooled ones (state
 * `pooled`), as a table or one JSON array (cli/ls_print.c). */
struct msb_ns_entry;
struct msb_ns_pool_entry;
void cli_ls_print(const struct msb_ns_entry *e, size_t n, const struct msb_ns_pool_entry *pe,
		  size_t pn, const char *backend, bool as_json);
/* The engine backends' rows of `msb ls` (cli/ls_engine.c, every platform):
 * what msb_engine_list reads back from the engine, in the shape above. */
int cli_ls_engine(msb_backend *b, bool as_json, msb_error **err);
/* Seconds since created_ns (the epoch's), -1 when unknown; "42s", "3m",
 * "5h", "2d" or "-". */
int64_t cli_age_seconds(int64_t created_ns);
void cli_format_age(int64_t s, char *out, size_t size);
/* The header line of `msb ls`'s table. */
void cli_ls_header(void);

#endif
