/* fuzz_config.c: libFuzzer harness for the numbers of directives
 * (mm_parse_size in src/parse.c). Whatever the text, the parser must agree
 * with a slow reference reading of it: the same verdict and the same
 * value, always within the bounds the directive gave. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* The bounds of the directives that use it (config.c). */
static const struct {
    apr_uint64_t min, max;
} bounds[] = {
    {1024 * 1024, APR_SIZE_MAX},    /* mrubyMemoryLimit */
    {0, APR_UINT64_MAX},            /* mrubyMaxRequestsPerVM */
    {0, APR_INT64_MAX / 1000},      /* mrubyTimeout */
    {0, APR_INT64_MAX},             /* mrubyRequestBodyLimit */
    {1000, 5000},                   /* narrow bounds, reached by short inputs */
};

/* Digits, then at most one of kKmMgG; the number of the digits must fit an
 * int64 (what apr_strtoi64 reads), the product the bounds. */
static int reference(const char *s, apr_uint64_t min, apr_uint64_t max, apr_uint64_t *out)
{
    unsigned __int128 n = 0, unit = 1;
    const char *p = s;

    if (*p < '0' || *p > '9') {
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > (unsigned __int128)INT64_MAX) {
            return 0;
        }
    }
    if (*p && !p[1] && strchr("kKmMgG", *p)) {
        unit = (*p == 'k' || *p == 'K') ? 1024 : (*p == 'm' || *p == 'M') ? 1024 * 1024 : 1024 * 1024 * 1024;
        p++;
    }
    if (*p || n * unit < min || n * unit > max) {
        return 0;
    }
    *out = (apr_uint64_t)(n * unit);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[64];
    size_t i;

    if (size >= sizeof text) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    for (i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        apr_uint64_t got = 0, want = 0;
        int ok = mm_parse_size(text, bounds[i].min, bounds[i].max, &got) == MM_PARSE_OK;

        if (ok != reference(text, bounds[i].min, bounds[i].max, &want) || (ok && got != want)) {
            abort();
        }
        if (ok && (got < bounds[i].min || got > bounds[i].max)) {
            abort();
        }
    }
    return 0;
}
