/* SPDX-License-Identifier: Apache-2.0 */
/* Print msb_ns__doctor()'s probes and the ns verdict (what `msb doctor` shows for ns). */
#include <stdio.h>

#include "backends/ns/boundary/boundary.h"

int main(void)
{
	msb_ns_doctor *d = NULL;
	msb_error *e = NULL;
	if (msb_ns__doctor(&d, &e) < 0) {
		fprintf(stderr, "doctor: %s\n", msb_error_message(e));
		msb_error_free(e);
		return 1;
	}
	printf("probes:\n");
	for (size_t i = 0; i < d->n_probes; i++)
		printf("  %-20s %-4s %s\n", d->probes[i].name, d->probes[i].ok ? "ok" : "NO",
		       d->probes[i].reason);
	printf("verdict:\n  %-20s %-4s %s\n", "ns", d->ok ? "ok" : "NO", d->reason);
	msb_ns__doctor_free(d);
	return 0;
}
