/* SPDX-License-Identifier: Apache-2.0 */
/* msb doctor: every backend type's probe of this host (msb_doctor). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cmd_doctor(int argc, char **argv);
static const cli_option doctor_options[] = {
	{"json", NULL, "print one JSON object: probes and backends", CLI_OPT_VERB, CLI_VALUE_NONE,
	 NULL},
	CLI_OPTION_END,
};

const cli_verb verb_doctor = {
	.name = "doctor",
	.summary = "probe this host: what each backend type can do here, and why not",
	.synopsis = "msb doctor [--json]",
	.description =
		"Run the doctor of every backend type the library has (the types backend JSON\n"
		"names, docs/policy.md): each tries what its type needs on this host - for `ns`\n"
		"user namespaces, overlayfs, cgroup v2/v1 controllers, seccomp, openat2,\n"
		"Landlock - and gives a verdict. Prints the facilities tried, then one verdict\n"
		"per type. Exit status 0 when the `ns` backend works here, 1 if not.\n",
	.options = doctor_options,
	.run = cmd_doctor,
};

static void print_probes(const msb_probe *p, size_t n, bool as_json)
{
	for (size_t i = 0; i < n; i++) {
		if (as_json) {
			json_t *o = json_pack("{s:s, s:b, s:s}", "name", p[i].name, "ok", p[i].ok,
					      "reason", p[i].reason);
			char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
			printf("%s%s", i ? "," : "", t ? t : "null");
			free(t);
			json_decref(o);
		} else {
			printf("  %-20s %-3s %s\n", p[i].name, p[i].ok ? "ok" : "NO", p[i].reason);
		}
	}
}

static int cmd_doctor(int argc, char **argv)
{
	bool as_json = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			as_json = true;
		else
			return cli_usage(&verb_doctor, "unexpected argument `%s`", argv[i]);
	}
	msb_doctor_report *rep = NULL;
	msb_error *err = NULL;
	if (msb_doctor(&rep, &err) < 0)
		return cli_fail(err);
	bool ns_ok = false;
	for (size_t i = 0; i < rep->n_backends; i++)
		if (strcmp(rep->backends[i].name, "ns") == 0)
			ns_ok = rep->backends[i].ok;
	if (as_json) {
		printf("{\"probes\":[");
		print_probes(rep->probes, rep->n_probes, true);
		printf("],\"backends\":[");
		print_probes(rep->backends, rep->n_backends, true);
		printf("]}\n");
	} else {
		printf("probes:\n");
		print_probes(rep->probes, rep->n_probes, false);
		printf("backends:\n");
		print_probes(rep->backends, rep->n_backends, false);
	}
	msb_doctor_report_free(rep);
	return ns_ok ? 0 : 1;
}
