/* parse.c: checks and parsers of text that need neither httpd nor mruby:
 * the numbers of directives and the validity of header names and values.
 * They stand alone so that the fuzzing harnesses can call them. */

#include "apr_lib.h"
#include "apr_strings.h"

#include <errno.h>
#include <string.h>

#include "parse.h"

mm_parse_e mm_parse_size(const char *arg, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out)
{
    char *end;
    apr_int64_t n;
    apr_uint64_t unit = 1;

    /* digits only: strtoi64 would also take blanks and a sign */
    if (!apr_isdigit(*arg)) {
        return MM_PARSE_NOT_A_NUMBER;
    }
    errno = 0;
    n = apr_strtoi64(arg, &end, 10);
    if (errno == ERANGE) {
        return MM_PARSE_TOO_LARGE;
    }
    if (*end && !end[1]) {
        switch (*end) {
        case 'k':
        case 'K':
            unit = 1024;
            end++;
            break;
        case 'm':
        case 'M':
            unit = 1024 * 1024;
            end++;
            break;
        case 'g':
        case 'G':
            unit = 1024 * 1024 * 1024;
            end++;
            break;
        }
    }
    if (errno || *end || n < 0) {
        return MM_PARSE_NOT_A_NUMBER;
    }
    if ((apr_uint64_t)n > max / unit) {
        return MM_PARSE_TOO_LARGE;
    }
    if ((apr_uint64_t)n * unit < min) {
        return MM_PARSE_TOO_SMALL;
    }
    *out = (apr_uint64_t)n * unit;
    return MM_PARSE_OK;
}

int mm_parse_header_name_ok(const char *s)
{
    if (*s == '\0') {
        return 0;
    }
    for (; *s; s++) {
        if (!apr_isalnum(*s) && !strchr("!#$%&'*+-.^_`|~", *s)) {
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
