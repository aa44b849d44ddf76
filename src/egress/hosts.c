/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolver's hosts map (the backend configuration's "hosts", resolved
 * first; resolve.c does the rest) and IP literals. No I/O: the engine core
 * on Windows builds it with the configuration reader (docs/windows.md).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"

void msb_egress__resolver_clear(msb_egress_resolver *r)
{
	for (size_t i = 0; i < r->n_hosts; i++)
		free(r->hosts[i].name);
	free(r->hosts);
	r->hosts = NULL;
	r->n_hosts = 0;
}

bool msb_egress__parse_ip(const char *s, uint16_t port, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	struct sockaddr_in *in = (struct sockaddr_in *)out;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
	if (inet_pton(AF_INET, s, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		return true;
	}
	if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		return true;
	}
	return false;
}

int msb_egress__resolver_add(msb_egress_resolver *r, const char *name, const char *address)
{
	char low[MSB_EGRESS_HOST_MAX + 1];
	size_t n = strlen(name);
	if (n == 0 || n > MSB_EGRESS_HOST_MAX)
		return -EINVAL;
	for (size_t i = 0; i <= n; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	if (!msb_egress__valid_name(low))
		return -EINVAL;
	struct sockaddr_storage sa;
	if (!msb_egress__parse_ip(address, 0, &sa))
		return -EINVAL;
	msb_egress_hosts_entry *e = NULL;
	for (size_t i = 0; i < r->n_hosts; i++)
		if (strcmp(r->hosts[i].name, low) == 0)
			e = &r->hosts[i];
	if (!e) {
		msb_egress_hosts_entry *h =
			msb__reallocarray(r->hosts, r->n_hosts + 1, sizeof(*r->hosts));
		if (!h)
			return -ENOMEM;
		r->hosts = h;
		e = &r->hosts[r->n_hosts];
		memset(e, 0, sizeof(*e));
		e->name = strdup(low);
		if (!e->name)
			return -ENOMEM;
		r->n_hosts++;
	}
	if (e->n >= MSB_EGRESS_ADDRS_MAX)
		return -EINVAL;
	e->addrs[e->n++] = sa;
	return 0;
}
