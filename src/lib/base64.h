/* base64.h: Base64 (RFC 4648) as CRuby's Base64 module and pack("m")
 * write and read it. Needs neither httpd nor mruby, so that its fuzzing
 * harness (fuzz/fuzz_base64.c) calls it alone. */
#ifndef MM_BASE64_H
#define MM_BASE64_H

#include <stddef.h>

/* Flags of mm_base64_encode. */
#define MM_B64_LINES   1 /* a newline after every 60 characters and at the end (pack("m")) */
#define MM_B64_URLSAFE 2 /* '-' and '_' for '+' and '/' (RFC 4648 section 5) */
#define MM_B64_NOPAD   4 /* no '=' at the end */

/* The length of the encoding of n bytes with flags (at most about 4/3 n +
 * n / 45 + 4). */
size_t mm_base64_encoded_len(size_t n, int flags);

/* Writes the encoding of in[0..n) to out (mm_base64_encoded_len bytes, no
 * NUL); returns its length. */
size_t mm_base64_encode(const unsigned char *in, size_t n, char *out, int flags);

/* Strict decoding (CRuby's strict_decode64, unpack1("m0")): a multiple of
 * 4 characters of the alphabet, '=' only as the padding of the last group,
 * no bits left over in it. With urlsafe, '-' and '_' are read as '+' and
 * '/', and a text without padding has it added first (CRuby's
 * urlsafe_decode64). out has room for in_len / 4 * 3 + 3 bytes. Returns
 * the length decoded, or -1 with *why (a static message) and *where (the
 * byte of the text) set. */
long mm_base64_decode_strict(const char *in, size_t in_len, unsigned char *out, int urlsafe, const char **why,
                             size_t *where);

/* Lenient decoding (CRuby's decode64, unpack1("m")): characters outside
 * the alphabet are skipped, the text ends at a '=' that pads a group or at
 * its end. Never fails; out has room for in_len / 4 * 3 + 3 bytes. */
size_t mm_base64_decode_lax(const char *in, size_t in_len, unsigned char *out);

#endif
