/* fuzz_base64.c: libFuzzer harness for Base64 (src/base64.c). Every input
 * is encoded in each form (plain, MIME lines, URL-safe with and without
 * padding, without padding) into a buffer of exactly the promised length,
 * and must decode back to itself; every input is also decoded as a text,
 * strictly (both alphabets) and leniently, into buffers of exactly the
 * promised room: what the strict reading accepts is canonical (it encodes
 * back to the text), and the lenient reading agrees with it. A broken
 * contract aborts: a finding. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

static void check(int ok)
{
    if (!ok) {
        abort();
    }
}

/* A buffer of exactly n bytes (at least one, for malloc), so that ASan
 * reports a write past the promised length. */
static unsigned char *exact(size_t n)
{
    return malloc(n ? n : 1);
}

static size_t room(size_t text_len)
{
    return text_len / 4 * 3 + 3;
}

/* data encoded with flags decodes back to data. */
static void round_trip(const uint8_t *data, size_t size, int flags)
{
    size_t len = mm_base64_encoded_len(size, flags);
    char *text = (char *)exact(len);
    unsigned char *back = exact(room(len));
    const char *why = NULL;
    size_t where = 0;
    long n;

    check(mm_base64_encode(data, size, text, flags) == len);
    if (flags & MM_B64_URLSAFE) {
        n = mm_base64_decode_strict(text, len, back, 1, &why, &where);
        check(n == (long)size && memcmp(back, data, size) == 0);
    } else {
        if (!(flags & (MM_B64_LINES | MM_B64_NOPAD))) {
            n = mm_base64_decode_strict(text, len, back, 0, &why, &where);
            check(n == (long)size && memcmp(back, data, size) == 0);
        }
        check(mm_base64_decode_lax(text, len, back) == size && memcmp(back, data, size) == 0);
    }
    free(text);
    free(back);
}

/* The input read as Base64 text. */
static void decode(const char *text, size_t len)
{
    unsigned char *strict = exact(room(len)), *urlsafe = exact(room(len)), *lax = exact(room(len));
    const char *why = NULL;
    size_t where = (size_t)-1, i;
    long n = mm_base64_decode_strict(text, len, strict, 0, &why, &where);
    size_t m = mm_base64_decode_lax(text, len, lax);

    check(m <= room(len));
    if (n >= 0) {
        /* canonical: it is the encoding of what it decodes to */
        size_t elen = mm_base64_encoded_len((size_t)n, 0);
        char *again = (char *)exact(elen);

        check(elen == len && mm_base64_encode(strict, (size_t)n, again, 0) == len &&
              memcmp(again, text, len) == 0);
        check(m == (size_t)n && memcmp(lax, strict, m) == 0);
        free(again);
    } else {
        check(why != NULL && where <= len);
    }
    why = NULL;
    where = (size_t)-1;
    n = mm_base64_decode_strict(text, len, urlsafe, 1, &why, &where);
    if (n >= 0) {
        /* the URL-safe encoding of the result is the text, '+' and '/'
         * read as '-' and '_', with its padding added when it had none */
        size_t elen = mm_base64_encoded_len((size_t)n, MM_B64_URLSAFE);
        char *again = (char *)exact(elen);

        check(mm_base64_encode(urlsafe, (size_t)n, again, MM_B64_URLSAFE) == elen && elen >= len &&
              elen - len < 4);
        for (i = 0; i < elen; i++) {
            char c = i < len ? text[i] : '=';

            c = c == '+' ? '-' : c == '/' ? '_' : c;
            check(again[i] == c);
        }
        free(again);
    } else {
        check(why != NULL && where <= len);
    }
    free(strict);
    free(urlsafe);
    free(lax);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int forms[] = {0, MM_B64_LINES, MM_B64_NOPAD, MM_B64_URLSAFE, MM_B64_URLSAFE | MM_B64_NOPAD};
    size_t i;

    for (i = 0; i < sizeof forms / sizeof *forms; i++) {
        round_trip(data, size, forms[i]);
    }
    decode((const char *)data, size);
    return 0;
}
