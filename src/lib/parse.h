/* parse.h: checks and parsers of text that need neither httpd nor mruby,
 * so that the fuzzing harnesses (tools/fuzz) can call them alone. */
#ifndef MM_PARSE_H
#define MM_PARSE_H

#include "apr.h"

#include <stddef.h>

typedef enum {
    MM_PARSE_OK,
    MM_PARSE_NOT_A_NUMBER,
    MM_PARSE_TOO_SMALL,
    MM_PARSE_TOO_LARGE,
    MM_PARSE_SUFFIX, /* a count with a K, M or G suffix */
} mm_parse_e;

/* A size in bytes: a whole number (digits only, up to 2^64 - 1) with an
 * optional K, M or G suffix (powers of 1024), from min to max; *out is set
 * only when the result is MM_PARSE_OK. */
mm_parse_e mm_parse_size(const char *arg, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out);

/* A count or a time: the same without the suffixes, which mean bytes. */
mm_parse_e mm_parse_count(const char *arg, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out);

/* A header name: a token of RFC 9110 (not empty). */
int mm_parse_header_name_ok(const char *s);

/* A header value of len bytes: no control character but HTAB (CR, LF and
 * NUL would end the header line or the C string; httpd refuses a response
 * with any other). */
int mm_parse_header_value_ok(const char *s, size_t len);

/* What httpd and the HTTP client make of a header name, whatever its
 * case: the headers that frame a message or belong to its connection
 * (Transfer-Encoding, TE, Trailer, Upgrade, Keep-Alive, Proxy-Connection),
 * Connection, Content-Length, Set-Cookie (each one a header of its own),
 * or any other. */
typedef enum {
    MM_HEADER_OTHER,
    MM_HEADER_FRAMING,
    MM_HEADER_CONNECTION,
    MM_HEADER_CONTENT_LENGTH,
    MM_HEADER_SET_COOKIE
} mm_header_kind_e;

mm_header_kind_e mm_parse_header_kind(const char *name);

/* NULL when a script may set a response header of this kind (of its name:
 * mm_parse_header_kind) to value, else why not: httpd owns the headers
 * that frame the response or belong to the connection (Connection but
 * "close"); a Content-Length must be a number (httpd puts the body's real
 * length in its place: run.c). */
const char *mm_parse_response_header_refused(mm_header_kind_e kind, const char *value);

/* NULL when a script may send a request header of this kind with value on
 * an outgoing call (Apache::HTTP), else why not: the client library frames
 * the request (Content-Length and the framing headers; Connection but
 * "close"), and a pooled connection read otherwise than it was written
 * would give the next call the rest of this one. */
const char *mm_parse_request_header_refused(mm_header_kind_e kind, const char *value);

/* A counter's value of len bytes: a decimal integer of 64 bits, digits
 * with an optional '-' before them (no blanks, no '+'). */
int mm_parse_counter_ok(const char *val, apr_size_t len, apr_int64_t *n);

#endif
