/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sanitizer defaults of the sanitized msb-agent (sanitizer builds only,
 * agent/meson.build). In a sandbox the agent starts with an environment of
 * its own, without $UBSAN_OPTIONS: undefined behaviour there must stop the
 * agent - noticed by every later call - rather than print and go on.
 * $ASAN_OPTIONS and $UBSAN_OPTIONS, where set (tests/agent), still win.
 */
const char *__ubsan_default_options(void);

/* Visible: the sanitizer runtime (a shared library) looks it up. */
__attribute__((visibility("default"))) const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}
