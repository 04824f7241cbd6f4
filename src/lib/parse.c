/* parse.c: checks and parsers of text that need neither httpd nor mruby:
 * the numbers of directives and the validity of header names and values.
 * They stand alone so that the fuzzing harnesses can call them. */

#include "apr_lib.h"
#include "apr_strings.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

/* The multiplier of a K, M or G suffix (any case), or 0. */
static apr_uint64_t unit_of(char c)
{
    switch (c) {
    case 'k':
    case 'K':
        return 1024;
    case 'm':
    case 'M':
        return 1024 * 1024;
    case 'g':
    case 'G':
        return 1024 * 1024 * 1024;
    default:
        return 0;
    }
}

/* Digits, then (when units) one optional suffix. The digits are read here
 * rather than by strtoull or apr_strtoi64: those take blanks and a sign,
 * and apr_strtoi64 stops at 2^63 - 1, short of what an apr_uint64_t holds. */
static mm_parse_e parse_number(const char *arg, int units, apr_uint64_t min, apr_uint64_t max,
                               apr_uint64_t *out)
{
    const char *p = arg;
    apr_uint64_t n = 0, unit = 1;
    int overflow = 0;

    if (!apr_isdigit(*p)) {
        return MM_PARSE_NOT_A_NUMBER;
    }
    for (; apr_isdigit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');

        overflow |= n > (APR_UINT64_MAX - d) / 10;
        n = n * 10 + d;
    }
    if (*p && !p[1] && unit_of(*p)) {
        if (!units) {
            return MM_PARSE_SUFFIX;
        }
        unit = unit_of(*p++);
    }
    if (*p) {
        return MM_PARSE_NOT_A_NUMBER;
    }
    if (overflow || n > max / unit) {
        return MM_PARSE_TOO_LARGE;
    }
    if (n * unit < min) {
        return MM_PARSE_TOO_SMALL;
    }
    *out = n * unit;
    return MM_PARSE_OK;
}

mm_parse_e mm_parse_size(const char *arg, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out)
{
    return parse_number(arg, 1, min, max, out);
}

mm_parse_e mm_parse_count(const char *arg, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out)
{
    return parse_number(arg, 0, min, max, out);
}

/* The characters of a token (RFC 9110: tchar), by byte: letters, digits
 * and !#$%&'*+-.^_`|~. Read once per character of every header name a
 * script sets, so a table rather than a search in the list. */
/* clang-format off */
static const unsigned char token_char[256] = {
    /* 0x00 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x10 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 0x20 */ 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0,
    /* 0x30 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    /* 0x40 */ 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    /* 0x50 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1,
    /* 0x60 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    /* 0x70 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0,
    /* 0x80 to 0xff: none */
};
/* clang-format on */

int mm_parse_header_name_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    if (*p == '\0') {
        return 0;
    }
    for (; *p; p++) {
        if (!token_char[*p]) {
            return 0;
        }
    }
    return 1;
}

int mm_parse_header_value_ok(const char *s, size_t len)
{
    size_t i;

    /* httpd itself refuses the whole response (500) when a value of it has
     * any control character but HTAB: refused here, the script learns it
     * where it set the value. */
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* The header names whose kind is not MM_HEADER_OTHER, with their lengths:
 * a name is compared (without case) only with those of its own length. */
#define SPECIAL_HEADER(name, kind)                                                                           \
    {                                                                                                        \
        name, sizeof(name) - 1, kind                                                                         \
    }
static const struct {
    const char *name;
    size_t len;
    mm_header_kind_e kind;
} special_headers[] = {
    SPECIAL_HEADER("TE", MM_HEADER_FRAMING),
    SPECIAL_HEADER("Trailer", MM_HEADER_FRAMING),
    SPECIAL_HEADER("Upgrade", MM_HEADER_FRAMING),
    SPECIAL_HEADER("Keep-Alive", MM_HEADER_FRAMING),
    SPECIAL_HEADER("Connection", MM_HEADER_CONNECTION),
    SPECIAL_HEADER("Set-Cookie", MM_HEADER_SET_COOKIE),
    SPECIAL_HEADER("Content-Length", MM_HEADER_CONTENT_LENGTH),
    SPECIAL_HEADER("Proxy-Connection", MM_HEADER_FRAMING),
    SPECIAL_HEADER("Transfer-Encoding", MM_HEADER_FRAMING),
};
#undef SPECIAL_HEADER

mm_header_kind_e mm_parse_header_kind(const char *name)
{
    size_t len = strlen(name), i;

    for (i = 0; i < sizeof special_headers / sizeof special_headers[0]; i++) {
        if (special_headers[i].len == len && strcasecmp(name, special_headers[i].name) == 0) {
            return special_headers[i].kind;
        }
    }
    return MM_HEADER_OTHER;
}

const char *mm_parse_request_header_refused(mm_header_kind_e kind, const char *value)
{
    if (kind == MM_HEADER_FRAMING || kind == MM_HEADER_CONTENT_LENGTH) {
        return "is the client's to send: it frames the request on the connection";
    }
    if (kind == MM_HEADER_CONNECTION && strcasecmp(value, "close") != 0) {
        return "may only be \"close\": the client manages the connection";
    }
    return NULL;
}

const char *mm_parse_response_header_refused(mm_header_kind_e kind, const char *value)
{
    if (kind == MM_HEADER_FRAMING) {
        return "is httpd's to send: it frames the response on the connection";
    }
    if (kind == MM_HEADER_CONNECTION && strcasecmp(value, "close") != 0) {
        return "may only be \"close\": httpd manages the connection";
    }
    if (kind == MM_HEADER_CONTENT_LENGTH) {
        size_t n = strspn(value, "0123456789");

        if (n == 0 || n > 18 || value[n] != '\0') {
            return "must be a decimal number of bytes";
        }
    }
    return NULL;
}

int mm_parse_counter_ok(const char *val, apr_size_t len, apr_int64_t *n)
{
    char digits[24], *end;

    if (len == 0 || len >= sizeof digits || memchr(val, '\0', len)) {
        return 0;
    }
    memcpy(digits, val, len);
    digits[len] = '\0';
    if (!(apr_isdigit(digits[0]) || (digits[0] == '-' && apr_isdigit(digits[1])))) {
        return 0;
    }
    errno = 0;
    *n = apr_strtoi64(digits, &end, 10);
    return errno == 0 && *end == '\0';
}
