/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The entry point of the JSON and path targets (spec, router, backend,
 * paths): each fuzz_<name>_entry.c defines it once, and it is shared by that
 * target's libFuzzer main (fuzz_target.c) and its corpus replay
 * (replay_target.c). It aborts when a property of the code under test
 * breaks, and says whether the input was accepted.
 */
#ifndef MSB_TESTS_FUZZ_TARGET_H
#define MSB_TESTS_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

/* 1: the input was accepted (parsed, resolved); 0: it was refused. */
int msb_fuzz_target_one(const uint8_t *data, size_t size);

#endif
