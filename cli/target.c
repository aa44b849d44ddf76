/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox a verb addresses: a key and kind, the spec it is acquired
 * with, and the router around the one backend (cli/backend_json.c decides
 * the backend and the router options). `exec`, `cp` and `files` name a
 * sandbox the same way, so the same options reach the same warm sandbox.
 */
#include <string.h>

#include <msb/ns.h>

#include "cli.h"

void cli_target_init(cli_target *t)
{
	memset(t, 0, sizeof(*t));
	t->scope = "cli";
	t->agent = "cli";
	t->kind = "shell";
	t->transfer = MSB_DEFAULT_TRANSFER_LIMITS;
}

int cli_target_option(cli_target *t, const cli_verb *verb, int id, const char *arg)
{
	switch (id) {
	case CLI_OPT_CONFIG:
		t->backend.config = arg;
		return 1;
	case CLI_OPT_STATE:
		t->backend.state_dir = arg;
		return 1;
	case CLI_OPT_IMAGE:
		t->backend.image = arg;
		return 1;
	case CLI_OPT_EGRESS_CONFIG:
		t->backend.egress_config = arg;
		return 1;
	case CLI_OPT_RUNTIME:
		t->backend.runtime = arg;
		return 1;
	case CLI_OPT_FLOOR:
		t->min_isolation = arg;
		return 1;
	case CLI_OPT_SCOPE:
		t->scope = arg;
		return 1;
	case CLI_OPT_THREAD:
		t->thread = arg;
		return 1;
	case CLI_OPT_AGENT:
		t->agent = arg;
		return 1;
	case CLI_OPT_KIND:
		t->kind = arg;
		return 1;
	case CLI_OPT_MEMORY:
	case CLI_OPT_PIDS:
	case CLI_OPT_CPU: {
		size_t i = id == CLI_OPT_MEMORY ? 0 : id == CLI_OPT_PIDS ? 1 : 2;
		if (!cli_parse_count(arg, id == CLI_OPT_MEMORY, &t->resources[i])) {
			cli_usage(verb, "--memory, --pids and --cpu want a positive count");
			return -1;
		}
		return 1;
	}
	case CLI_OPT_ALLOW:
		if (t->n_allow == sizeof(t->allow) / sizeof(t->allow[0])) {
			cli_usage(verb, "at most 64 --allow entries");
			return -1;
		}
		t->allow[t->n_allow++] = arg;
		return 1;
	}
	return 0;
}

int cli_target_router(const cli_target *t, const msb_observer *observer, msb_router **out,
		      msb_error **err)
{
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	char *selected = NULL;
	int r = cli_router_options(t->min_isolation, &ro, &selected, err);
	if (r < 0)
		return r;
	ro.log = cli_log;
	ro.observer = observer;
	msb_backend *b = NULL;
	r = cli_backend_new(&t->backend, &b, err);
	if (r == 0) {
		/* ns and the container engines: a container sandbox, under the
		 * default floor. */
		const bool container = strcmp(msb_backend_isolation(b), "container") == 0;
		char bname[64];
		snprintf(bname, sizeof(bname), "%s", msb_backend_name(b));
		r = msb_router_new(&b, 1, &ro, out, err);
		if (r == MSB_E_BACKEND_NOT_PERMITTED && container &&
		    !cli_floor_from_flag_or_file(t->min_isolation))
			msb_error_wrap(
				err,
				"the default floor is microvm and `%s` is a container "
				"sandbox; pass --min-isolation container to opt down, or "
				"set {\"router\": {\"min_isolation\": \"container\"}} in the "
				"configuration file (msb config show)",
				bname);
		msb_backend_unref(b);
	}
	free(selected);
	return r;
}

msb_spec_builder *cli_target_spec(const cli_target *t, msb_capset requires)
{
	msb_spec_builder *sb = msb_spec_builder_new(t->kind);
	if (!sb)
		return NULL;
	msb_spec_builder_set_requires(sb, requires);
	msb_spec_builder_set_files_in(sb, t->transfer);
	msb_spec_builder_set_files_out(sb, t->transfer);
	uint64_t res[CLI_RESOURCES];
	memcpy(res, t->resources, sizeof(res));
	cli_spec_resources(res);
	msb_spec_builder_set_memory_bytes(sb, res[0]);
	msb_spec_builder_set_pids_max(sb, res[1]);
	msb_spec_builder_set_cpu_millis(sb, res[2]);
	msb_spec_builder_set_writable_bytes(sb, res[3]);
	cli_spec_env(sb);
	if (t->n_allow)
		msb_spec_builder_set_egress(sb, MSB_EGRESS_ALLOWLIST);
	for (size_t i = 0; i < t->n_allow; i++) {
		/* HOST or HOST=M1,M2 */
		char buf[512];
		snprintf(buf, sizeof(buf), "%s", t->allow[i]);
		char *eq = strchr(buf, '=');
		if (!eq) {
			msb_spec_builder_add_egress_host(sb, buf);
			continue;
		}
		*eq = '\0';
		const char *methods[32];
		size_t nm = 0;
		char *save = NULL;
		for (char *m = strtok_r(eq + 1, ",", &save); m && nm < 32;
		     m = strtok_r(NULL, ",", &save))
			methods[nm++] = m;
		msb_spec_builder_add_egress_rule(sb, buf, methods, nm);
	}
	return sb;
}

int cli_target_acquire(const cli_target *t, msb_capset requires, msb_router **router,
		       msb_sandbox **sb, msb_spec **spec_out, msb_error **err)
{
	*router = NULL;
	*sb = NULL;
	int r = cli_target_router(t, NULL, router, err);
	if (r < 0)
		return r;
	msb_spec *spec = NULL;
	msb_spec_builder *b = cli_target_spec(t, requires);
	r = b ? msb_spec_build(b, &spec, err) : msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec_builder_free(b);
	if (r == 0) {
		msb_key key = {t->scope, t->thread, t->agent, NULL};
		r = msb_router_acquire(*router, &key, spec, NULL, sb, err);
	}
	if (r < 0) {
		msb_spec_unref(spec);
		msb_router_free(*router);
		*router = NULL;
		return r;
	}
	if (spec_out)
		*spec_out = spec;
	else
		msb_spec_unref(spec);
	return 0;
}
