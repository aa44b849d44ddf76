/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb files ls|stat|rm: the sandbox's confined file plane from the command
 * line (msb_sandbox_list_dir, _stat_file, _remove), the sandbox named the
 * way `exec` names it. Paths are relative to the storage base; a leading
 * `sandbox:` is accepted, as `msb cp` writes it.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { OPT_JSON = CLI_OPT_VERB, OPT_RECURSIVE };

static const cli_option files_options[] = {
	CLI_TARGET_ROWS,
	{"recursive", NULL, "rm: remove a directory and everything in it", OPT_RECURSIVE,
	 CLI_VALUE_NONE, NULL},
	{"json", NULL, "ls, stat: print JSON", OPT_JSON, CLI_VALUE_NONE, NULL},
	CLI_OPTION_END,
};

static int cmd_files(int argc, char **argv);
const cli_verb verb_files = {
	.name = "files",
	.summary = "list, stat or remove files in a sandbox's storage base",
	.synopsis = "msb files ls --thread T [KEY OPTIONS] [--json] [PATH]\n"
		    "       msb files stat --thread T [KEY OPTIONS] [--json] PATH\n"
		    "       msb files rm --thread T [KEY OPTIONS] [--recursive] PATH",
	.description =
		"The key's sandbox (acquired, warm or new, through the router, the way `exec`\n"
		"names it) and its confined file plane: `ls` lists one directory (default: the\n"
		"storage base) as KIND SIZE PATH lines, `stat` one entry (exit status 5 when it\n"
		"is absent), `rm` removes a file, or a directory with --recursive. A link is\n"
		"listed and removed, never followed; a path leaving the storage base is\n"
		"refused.\n",
	.options = files_options,
	.operands = "ls stat rm",
	.run = cmd_files,
};

static const char *guest_path(const char *p)
{
	if (strncmp(p, "sandbox:", 8) == 0)
		p += 8;
	return *p ? p : ".";
}

static json_t *entry_json(const msb_entry *e)
{
	return json_pack("{s:s, s:s, s:o}", "path", e->path, "kind", msb_entry_kind_name(e->kind),
			 "size_bytes",
			 e->size_known ? json_integer((json_int_t)e->size_bytes) : json_null());
}

static void print_entry(const msb_entry *e)
{
	if (e->size_known)
		printf("%-9s %12llu %s\n", msb_entry_kind_name(e->kind),
		       (unsigned long long)e->size_bytes, e->path);
	else
		printf("%-9s %12s %s\n", msb_entry_kind_name(e->kind), "-", e->path);
}

static void print_json(json_t *o)
{
	char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (t)
		printf("%s\n", t);
	free(t);
	json_decref(o);
}

static int do_ls(msb_sandbox *sb, const char *path, bool as_json, msb_error **err)
{
	msb_entry *v = NULL;
	size_t n = 0;
	int r = msb_sandbox_list_dir(sb, path, NULL, &v, &n, err);
	if (r < 0)
		return r;
	json_t *arr = as_json ? json_array() : NULL;
	for (size_t i = 0; i < n; i++) {
		if (arr)
			json_array_append_new(arr, entry_json(&v[i]));
		else
			print_entry(&v[i]);
	}
	if (arr)
		print_json(arr);
	msb_entries_free(v, n);
	return 0;
}

static int do_stat(msb_sandbox *sb, const char *path, bool as_json, msb_error **err)
{
	bool present = false;
	msb_entry e = {0};
	int r = msb_sandbox_stat_file(sb, path, NULL, &present, &e, err);
	if (r < 0)
		return r;
	if (!present)
		return msb_error_set(err, MSB_E_NOT_FOUND, "no such file `%s` in the sandbox",
				     path);
	if (as_json)
		print_json(entry_json(&e));
	else
		print_entry(&e);
	msb_entry_clear(&e);
	return 0;
}

static int cmd_files(int argc, char **argv)
{
	struct option opts[32];
	if (!cli_getopt_table(&verb_files, opts, 32))
		return 1;
	cli_target t;
	cli_target_init(&t);
	bool as_json = false, recursive = false;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int taken = cli_target_option(&t, &verb_files, c, optarg);
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		if (c == OPT_JSON)
			as_json = true;
		else if (c == OPT_RECURSIVE)
			recursive = true;
		else
			return cli_usage(&verb_files, "unknown option `%s`", argv[optind - 1]);
	}
	if (optind >= argc)
		return cli_usage(&verb_files, "name a sub-verb: ls, stat or rm");
	const char *sub = argv[optind++];
	const bool ls = strcmp(sub, "ls") == 0, st = strcmp(sub, "stat") == 0,
		   rm = strcmp(sub, "rm") == 0;
	if (!ls && !st && !rm)
		return cli_usage(&verb_files, "unknown sub-verb `%s`: ls, stat or rm", sub);
	if (argc - optind > 1 || (!ls && argc - optind != 1))
		return cli_usage(&verb_files, "`files %s` takes %s PATH", sub,
				 ls ? "at most one" : "one");
	if (!t.thread)
		return cli_usage(&verb_files, "--thread is required");
	if (recursive && !rm)
		return cli_usage(&verb_files, "--recursive is an option of `files rm`");
	const char *path = guest_path(optind < argc ? argv[optind] : ".");
	cli_locate_helpers();

	msb_error *err = NULL;
	msb_router *router = NULL;
	msb_sandbox *sb = NULL;
	const msb_capset need = MSB_CAP_EXEC | (ls   ? MSB_CAP_FILES_LIST
						: rm ? MSB_CAP_FILES_DELETE
						     : MSB_CAP_FILES_IN);
	if (cli_target_acquire(&t, need, &router, &sb, NULL, &err) < 0)
		return cli_fail(err);
	int r = ls   ? do_ls(sb, path, as_json, &err)
		: st ? do_stat(sb, path, as_json, &err)
		     : msb_sandbox_remove(sb, path, NULL, recursive, &err);
	msb_sandbox_free(sb);
	msb_router_free(router);
	return r < 0 ? cli_fail(err) : 0;
}
