/* fuzz_header.c: libFuzzer harness for the checks on header names and
 * values that Ruby sets (src/parse.c): a name is accepted exactly when it
 * is a non-empty token of RFC 9110, a value exactly when it has no control
 * character but HTAB (httpd refuses a response header with one); a name's
 * kind is that of the special name it equals without case, if any. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

static int tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static mm_header_kind_e kind_of(const char *name)
{
    static const char *const framing[] = {"Transfer-Encoding", "TE",         "Trailer",
                                          "Upgrade",           "Keep-Alive", "Proxy-Connection"};
    size_t i;

    for (i = 0; i < sizeof framing / sizeof framing[0]; i++) {
        if (strcasecmp(name, framing[i]) == 0) {
            return MM_HEADER_FRAMING;
        }
    }
    if (strcasecmp(name, "Connection") == 0) {
        return MM_HEADER_CONNECTION;
    }
    if (strcasecmp(name, "Content-Length") == 0) {
        return MM_HEADER_CONTENT_LENGTH;
    }
    if (strcasecmp(name, "Set-Cookie") == 0) {
        return MM_HEADER_SET_COOKIE;
    }
    return MM_HEADER_OTHER;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *name = malloc(size + 1);
    size_t i, len;
    int token = 1, clean = 1;

    memcpy(name, data, size);
    name[size] = '\0';
    /* as a name, the text is what C sees: up to the first NUL */
    len = strlen(name);
    for (i = 0; i < len; i++) {
        token &= tchar((unsigned char)name[i]);
    }
    if (mm_parse_header_name_ok(name) != (len > 0 && token)) {
        abort();
    }
    if (mm_parse_header_kind(name) != kind_of(name)) {
        abort();
    }
    /* as a value, all its bytes count */
    for (i = 0; i < size; i++) {
        clean &= (data[i] >= 0x20 || data[i] == '\t') && data[i] != 0x7f;
    }
    if (mm_parse_header_value_ok((const char *)data, size) != clean) {
        abort();
    }
    free(name);
    return 0;
}
