/* SPDX-License-Identifier: Apache-2.0 */
/* The error model (checklist 24.3, 24.4; 6.12 error families). */
#include <criterion/criterion.h>

#include <string.h>

#include <msb/error.h>

#include "util/sha256.h"

Test(error, names_are_the_seed_exception_names)
{
	cr_assert_str_eq(msb_code_name(MSB_E_EGRESS_NOT_ENFORCED), "SandboxEgressNotEnforced");
	cr_assert_str_eq(msb_code_name(MSB_E_NO_BACKEND), "NoSandboxBackend");
	cr_assert_str_eq(msb_code_name(MSB_E_VALUE), "ValueError");
	cr_assert_str_eq(msb_code_name(12345), "UnknownError");
	cr_assert_eq(msb_code_from_name("SandboxUnclean"), MSB_E_UNCLEAN);
	cr_assert_eq(msb_code_from_name("NoSuchThing"), 0);
}

/* 6.12: safety refusals are permission-class, functionality refusals runtime-class,
 * NoSandboxBackend lookup-class. */
Test(error, families_6_12)
{
	int safety[] = {MSB_E_BACKEND_NOT_PERMITTED,
			MSB_E_CAPABILITY_DENIED,
			MSB_E_IDENTITY_DENIED,
			MSB_E_EGRESS_NOT_ENFORCED,
			MSB_E_TRANSFER_LIMITS_NOT_PERMITTED,
			MSB_E_SCOPE_NOT_ENFORCED};
	for (size_t i = 0; i < sizeof(safety) / sizeof(safety[0]); i++) {
		cr_assert(msb_code_is(safety[i], MSB_CAT_PERMISSION), "%s",
			  msb_code_name(safety[i]));
		cr_assert_not(msb_code_is(safety[i], MSB_CAT_RUNTIME));
	}
	cr_assert(msb_code_is(MSB_E_CAPABILITY_NOT_SUPPORTED, MSB_CAT_RUNTIME));
	cr_assert(msb_code_is(MSB_E_OS_FAMILY_NOT_SUPPORTED, MSB_CAT_RUNTIME));
	cr_assert_not(msb_code_is(MSB_E_CAPABILITY_NOT_SUPPORTED, MSB_CAT_PERMISSION));
	cr_assert(msb_code_is(MSB_E_NO_BACKEND, MSB_CAT_LOOKUP));
	/* SandboxProgramTimeout and SandboxQueuedTimeout are TimeoutErrors. */
	cr_assert(msb_code_is(MSB_E_PROGRAM_TIMEOUT, MSB_CAT_TIMEOUT));
	cr_assert(msb_code_is(MSB_E_QUEUED_TIMEOUT, MSB_CAT_TIMEOUT));
	/* Every SandboxOutput* refusal is a SandboxOutputError (12.18). */
	int outputs[] = {MSB_E_OUTPUT_MISSING,	    MSB_E_OUTPUT_SIZE_UNKNOWN,
			 MSB_E_OUTPUT_UNREACHABLE,  MSB_E_OUTPUT_NOT_REGULAR,
			 MSB_E_OUTPUT_NOT_CONFINED, MSB_E_TRANSFER_CAP_EXCEEDED};
	for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++)
		cr_assert(msb_code_is(outputs[i], MSB_CAT_OUTPUT));
}

Test(error, message_is_one_line_and_wraps)
{
	msb_error *err = NULL;
	int r = msb_error_set(&err, MSB_E_VALUE, "bad `%s`\nsecond line.", "x");
	cr_assert_eq(r, MSB_E_VALUE);
	cr_assert_str_eq(msb_error_message(err), "bad `x` second line");
	cr_assert_eq(msb_error_wrap(&err, "loading %s", "spec"), MSB_E_VALUE);
	cr_assert_str_eq(msb_error_message(err), "loading spec: bad `x` second line");
	cr_assert_str_eq(msb_error_name(err), "ValueError");
	cr_assert_null(msb_error_detail(err));
	msb_error_set_detail(&err, "endpoint %s", "https://secret.invalid");
	cr_assert_str_eq(msb_error_detail(err), "endpoint https://secret.invalid");
	msb_error_free(err);
}

Test(error, null_err_still_returns_code)
{
	cr_assert_eq(msb_error_set(NULL, MSB_E_TIMEOUT, "late"), MSB_E_TIMEOUT);
	msb_error_free(NULL);
}

/* SHA-256 known answers (FIPS 180-4 examples): names and label digests rely on it. */
Test(util, sha256_known_answers)
{
	char hex[65];
	msb__sha256_hex("", 0, hex);
	cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	msb__sha256_hex("abc", 3, hex);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	msb__sha256_hex(two, strlen(two), hex);
	cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* A million 'a's, fed in odd-sized pieces. */
	msb_sha256 s;
	uint8_t d[32];
	char chunk[997];
	memset(chunk, 'a', sizeof(chunk));
	msb__sha256_init(&s);
	size_t left = 1000000;
	while (left) {
		size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
		msb__sha256_update(&s, chunk, n);
		left -= n;
	}
	msb__sha256_final(&s, d);
	cr_assert_eq(d[0], 0xcd);
	cr_assert_eq(d[1], 0xc7);
	cr_assert_eq(d[31], 0xd0);
}
