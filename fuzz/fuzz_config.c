/* fuzz_config.c: libFuzzer harness for the numbers of directives
 * (mm_parse_size and mm_parse_count in src/parse.c). Whatever the text, the
 * parsers must agree with a slow reference reading of it: the same verdict
 * and the same value, always within the bounds the directive gave. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* The bounds of the directives that use them (config.c); units: sizes in
 * bytes, which take K, M and G, against counts and times, which do not. */
static const struct {
    apr_uint64_t min, max;
    int units;
} bounds[] = {
    {1024 * 1024, APR_SIZE_MAX, 1},   /* mrubyMemoryLimit */
    {0, APR_UINT64_MAX, 0},           /* mrubyMaxRequestsPerVM */
    {0, APR_INT64_MAX / 2000, 0},     /* mrubyTimeout */
    {0, APR_INT64_MAX, 1},            /* mrubyRequestBodyLimit */
    {1, 1000000, 0},                  /* mrubyFormFieldsLimit */
    {1, 64 * 1024 * 1024, 1},         /* mrubyCache max-value= */
    {1000, 5000, 1},                  /* narrow bounds, reached by short inputs */
    {1000, 5000, 0},
};

/* Digits, then (with units) at most one of kKmMgG; the number must fit an
 * apr_uint64_t, the product the bounds. */
static int reference(const char *s, apr_uint64_t min, apr_uint64_t max, int units, apr_uint64_t *out)
{
    const unsigned __int128 too_big = (unsigned __int128)UINT64_MAX + 1;
    unsigned __int128 n = 0, unit = 1;
    const char *p = s;

    if (*p < '0' || *p > '9') {
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > too_big) {
            n = too_big; /* stays above every bound, and within 128 bits */
        }
    }
    if (units && *p && !p[1] && strchr("kKmMgG", *p)) {
        unit = (*p == 'k' || *p == 'K') ? 1024 : (*p == 'm' || *p == 'M') ? 1024 * 1024 : 1024 * 1024 * 1024;
        p++;
    }
    if (*p || n >= too_big || n * unit < min || n * unit > max) {
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
        mm_parse_e rv = bounds[i].units ? mm_parse_size(text, bounds[i].min, bounds[i].max, &got)
                                        : mm_parse_count(text, bounds[i].min, bounds[i].max, &got);
        int ok = rv == MM_PARSE_OK;

        if (ok != reference(text, bounds[i].min, bounds[i].max, bounds[i].units, &want) || (ok && got != want)) {
            abort();
        }
        if (ok && (got < bounds[i].min || got > bounds[i].max)) {
            abort();
        }
        /* only a count says it was given a suffix */
        if (rv == MM_PARSE_SUFFIX && bounds[i].units) {
            abort();
        }
    }
    return 0;
}
