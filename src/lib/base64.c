/* base64.c: Base64 encoding and decoding as CRuby has them (see base64.h).
 * An encoding, not cryptography: strict decoding must say where a text is
 * wrong, which libcrypto's EVP_DecodeBlock does not. */

#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char urlsafe_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* 60 characters a line: 45 bytes. */
#define LINE_BYTES 45

/* The value of c in the standard alphabet; with urlsafe, '-' and '_' too
 * (CRuby translates them and decodes the result, so '+' and '/' pass as
 * well). -1 outside. */
static int value(unsigned char c, int urlsafe)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+' || (urlsafe && c == '-')) {
        return 62;
    }
    if (c == '/' || (urlsafe && c == '_')) {
        return 63;
    }
    return -1;
}

size_t mm_base64_encoded_len(size_t n, int flags)
{
    size_t len = (flags & MM_B64_NOPAD) ? n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0) : (n + 2) / 3 * 4;

    if (flags & MM_B64_LINES) {
        len += (n + LINE_BYTES - 1) / LINE_BYTES;
    }
    return len;
}

size_t mm_base64_encode(const unsigned char *in, size_t n, char *out, int flags)
{
    const char *abc = (flags & MM_B64_URLSAFE) ? urlsafe_alphabet : alphabet;
    size_t i, o = 0, line = 0;

    for (i = 0; i < n; i += 3) {
        unsigned long v = (unsigned long)in[i] << 16;
        size_t left = n - i;

        if (left > 1) {
            v |= (unsigned long)in[i + 1] << 8;
        }
        if (left > 2) {
            v |= in[i + 2];
        }
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        if (left > 1) {
            out[o++] = abc[v >> 6 & 63];
        } else if (!(flags & MM_B64_NOPAD)) {
            out[o++] = '=';
        }
        if (left > 2) {
            out[o++] = abc[v & 63];
        } else if (!(flags & MM_B64_NOPAD)) {
            out[o++] = '=';
        }
        line += 3;
        if ((flags & MM_B64_LINES) && (line == LINE_BYTES || left <= 3)) {
            out[o++] = '\n';
            line = 0;
        }
    }
    return o;
}

static long strict_error(const char **why, size_t *where, const char *msg, size_t at)
{
    *why = msg;
    *where = at;
    return -1;
}

long mm_base64_decode_strict(const char *in, size_t in_len, unsigned char *out, int urlsafe, const char **why,
                             size_t *where)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t i, o = 0, padded = in_len;
    int v[4];

    /* CRuby's urlsafe_decode64 pads a text that has no '=' at its end */
    if (urlsafe && in_len % 4 != 0 && s[in_len - 1] != '=') {
        padded = (in_len + 3) & ~(size_t)3;
    }
    if (padded % 4 != 0) {
        return strict_error(why, where, "its length is not a multiple of 4", in_len);
    }
    for (i = 0; i < padded; i += 4) {
        int k, pad = 0;

        for (k = 0; k < 4; k++) {
            unsigned char c = i + k < in_len ? s[i + k] : '=';

            v[k] = value(c, urlsafe);
            if (v[k] >= 0 && pad == 0) {
                continue;
            }
            if (c != '=') {
                return strict_error(
                    why, where, pad ? "a character after the padding" : "a character outside the alphabet",
                    i + k);
            }
            if (k < 2 || i + 4 < padded) {
                return strict_error(why, where, "padding before the end", i + k);
            }
            pad++;
        }
        out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
        if (pad == 2) {
            if (v[1] & 0xf) {
                return strict_error(why, where, "bits left over in its last character", i + 1);
            }
            break;
        }
        out[o++] = (unsigned char)(v[1] << 4 | v[2] >> 2);
        if (pad == 1) {
            if (v[2] & 0x3) {
                return strict_error(why, where, "bits left over in its last character", i + 2);
            }
            break;
        }
        out[o++] = (unsigned char)(v[2] << 6 | v[3]);
    }
    return (long)o;
}

/* The next character of the alphabet from *i on (skipping the others);
 * with stop_at_pad, a '=' ends the search. -1 at the end or a '='. */
static int next_value(const unsigned char *s, size_t n, size_t *i, int stop_at_pad)
{
    while (*i < n) {
        int v = value(s[*i], 0);

        if (v >= 0) {
            (*i)++;
            return v;
        }
        if (stop_at_pad && s[*i] == '=') {
            return -1;
        }
        (*i)++;
    }
    return -1;
}

size_t mm_base64_decode_lax(const char *in, size_t in_len, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, o = 0;

    /* As CRuby's pack.c: a '=' is skipped where a group's first or second
     * character is expected, and ends the text where its third or fourth is. */
    for (;;) {
        int a = next_value(s, in_len, &i, 0), b, c, d;

        if (a < 0 || (b = next_value(s, in_len, &i, 0)) < 0) {
            break;
        }
        c = next_value(s, in_len, &i, 1);
        d = c < 0 ? -1 : next_value(s, in_len, &i, 1);
        out[o++] = (unsigned char)(a << 2 | b >> 4);
        if (c < 0) {
            break;
        }
        out[o++] = (unsigned char)(b << 4 | c >> 2);
        if (d < 0) {
            break;
        }
        out[o++] = (unsigned char)(c << 6 | d);
    }
    return o;
}
