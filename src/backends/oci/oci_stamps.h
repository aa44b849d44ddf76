/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-oci-shim's timing probe: monotonic stamps of the steps of a start and
 * of a teardown, written as one line each to $MSB_OCI_TIMING (an absolute
 * path, appended) when it is set. bench/oci_breakdown.py reads them;
 * docs/internals/oci-backend.md has the table.
 */
#ifndef MSB_BACKENDS_OCI_STAMPS_H
#define MSB_BACKENDS_OCI_STAMPS_H

#include <stddef.h>
#include <stdint.h>

#define OCI_STAMPS_MAX 24

typedef struct oci_stamps {
	const char *name[OCI_STAMPS_MAX]; /* static strings */
	int64_t ns[OCI_STAMPS_MAX];	  /* CLOCK_MONOTONIC */
	size_t n;
} oci_stamps;

/* The step `name` ends now (the first stamp is the start). Beyond
 * OCI_STAMPS_MAX, nothing. */
void oci_stamp(oci_stamps *t, const char *name);

/* "WHAT runtime=RUNTIME NAME=MS ... mono=NS\n" appended to $MSB_OCI_TIMING:
 * each step's milliseconds since the stamp before it, and the first stamp's
 * monotonic time (as Python's time.monotonic_ns), to line the steps up with
 * the caller's clock. Nothing when the variable is unset or not absolute,
 * or fewer than two stamps; best effort. */
void oci_stamps_write(const char *runtime, const char *what, const oci_stamps *t);

#endif
