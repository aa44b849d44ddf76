/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named fault-injection points (docs/internals/faults.md).
 *
 * The fault-injection suite (tests/e2e/test_faults.py) stops a process at a
 * named step of acquire, exec, the file plane, reset or dispose, kills one of
 * the processes involved (the client, the shim, the agent, a workload) with
 * SIGKILL, lets the rest carry on and then checks that the key recovers or is
 * refused with a typed error, that nothing dead is reported healthy, and that
 * purge leaves nothing behind.
 *
 * A process whose environment holds MSB_FAULT_POINT=<name> stops itself with
 * SIGSTOP the first time it reaches the point <name>; nothing else happens,
 * and without the variable a point costs one load and one compare. The
 * variable is read with secure_getenv, so a set-id program never honours it.
 * The list of points is msb__fault_points; a point not in it is a bug (the
 * suite checks that every listed point is reached by some operation).
 */
#ifndef MSB_UTIL_FAULT_H
#define MSB_UTIL_FAULT_H

/* Stop here (SIGSTOP to the calling thread's process) when MSB_FAULT_POINT
 * names `point`, once per process. Async-signal-unsafe; thread-safe. */
void msb__fault_point(const char *point);

/* Every named point, NULL-terminated. */
extern const char *const msb__fault_points[];

#endif
