/* SPDX-License-Identifier: Apache-2.0 */
/* The msb command line: one verb, one library call. */
#ifndef MSB_CLI_H
#define MSB_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>
#include <msb/msb.h>

typedef struct cli_verb {
	const char *name;
	const char *summary;
	const char *usage; /* full help text for `msb VERB --help` */
	int (*run)(int argc, char **argv);
} cli_verb;

/* Print an error as "msb: Name: message" and return its exit status. */
int cli_fail(msb_error *err);
/* Usage error: print and return 2. */
int cli_usage(const cli_verb *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read a whole file (or "-" for stdin) into a NUL-terminated buffer. */
int cli_read_file(const char *path, char **out, size_t *len, msb_error **err);
/* The log callback the CLI installs: warnings and errors to stderr. */
void cli_log(void *ud, msb_log_level level, const char *component, const char *message);
/* true when argv[i] is --help or -h. */
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
/* Point $MSB_SHIM and $MSB_AGENT at the helpers beside this binary in a build
 * tree, unless they are set. */
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
} cli_backend_flags;
/* The backend JSON object (json_decref it). */
int cli_backend_object(const cli_backend_flags *f, json_t **out, msb_error **err);
/* The same as compact text (free it). */
int cli_backend_json(const cli_backend_flags *f, char **out, msb_error **err);
/* The backend itself, through msb_backend_from_json. */
int cli_backend_new(const cli_backend_flags *f, msb_backend **out, msb_error **err);

extern const cli_verb verb_run, verb_acquire, verb_exec, verb_ls, verb_dispose, verb_purge,
	verb_doctor;

/* msb pool (cli/cmd_pool.c). */
extern const cli_verb verb_pool;
/* The pooled sandboxes of an ns backend as `msb ls` lines (JSON objects, each
 * after a comma when after_another or not the first, with json). */
int cli_pool_print(const msb_backend *b, bool json, bool after_another, msb_error **err);

#endif
